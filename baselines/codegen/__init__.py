"""The codegen baseline: an LLM writes its policy as Python code, run in `polar_bench.sandbox`.

`search.py` asks the model for programs, scores them in the sandbox on training seeds, feeds back
returns and errors, and saves the best program per (task, run) under ``programs/``; `agent.py` plays
the saved programs with no LLM at all. See README.md.
"""
