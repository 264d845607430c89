"""polar_bench: a benchmark suite and evaluation standard for RL and LLM-driven agents.

The stable public surface (see docs/): `make`, `TaskInfo`, `Agent`, `load_suite`, `read_results`,
and the modules `polar_bench.scoring` and `polar_bench.sandbox`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import PolarBenchError, UserError
from .harness import Harness, make, register_family
from .task_info import Component, TaskInfo

__all__ = [
    "__version__",
    "make",
    "register_family",
    "Harness",
    "TaskInfo",
    "Component",
    "PolarBenchError",
    "UserError",
]
