"""Running an agent on a suite: from an `EvalConfig` to a results file (`run_evaluation`).

The agent file runs only in a locked-down agent process of its own (``in_process=True``, i.e.
``--in-process``, is for debugging, and such results are not submittable), and the parent journals
every finished episode so that an interrupted evaluation resumes. docs/evaluate.md ("The code")
lists the modules in the order an episode meets them.
"""

from .agents import DEFAULT_AGENT_THREADS, probe_agent
from .config import EvalConfig, Unit, check_pins, journal_path
from .dispatch import pack_agent_folder
from .episodes import EpisodeRunner, run_episode
from .run import run_evaluation
from .trajectory import TrajectoryDigest

__all__ = ["EvalConfig", "Unit", "journal_path", "run_evaluation", "check_pins", "run_episode", "probe_agent",
           "EpisodeRunner", "TrajectoryDigest", "pack_agent_folder", "DEFAULT_AGENT_THREADS"]
