"""The plugin's own test: polar_bench's conformance suite over its tasks (run it after pip install)."""

from polar_bench.testing import HarnessConformance


class TestToyTextConformance(HarnessConformance):
    task_ids = ["toytext/FrozenLake", "toytext/Taxi", "toytext/CliffWalking"]
