"""RL fine-tuning of the LLM agent itself (issue #20): see README.md."""
