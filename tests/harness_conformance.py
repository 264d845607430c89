"""The conformance suite lives in `polar_bench.testing` (so that third-party families can run it);
the test modules here import it under this name."""

from polar_bench.testing import HarnessConformance, action_sequence, trajectory

__all__ = ["HarnessConformance", "action_sequence", "trajectory"]
