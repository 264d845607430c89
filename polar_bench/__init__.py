"""polar_bench: a benchmark suite and evaluation standard for RL and LLM-driven agents.

The stable public surface: `make`, `TaskInfo`, `Agent`, `load_suite`, `read_results`,
`register_family`, and the modules `polar_bench.scoring` and `polar_bench.sandbox`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .agent import Agent
from .errors import PolarBenchError, UserError
from .harness import Harness, make, register_family
from .results import read_results
from .suite import load_suite
from .task_info import Component, TaskInfo

__all__ = [
    "__version__",
    "make",
    "register_family",
    "Harness",
    "TaskInfo",
    "Component",
    "Agent",
    "load_suite",
    "read_results",
    "PolarBenchError",
    "UserError",
]
