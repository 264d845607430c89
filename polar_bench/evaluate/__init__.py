"""Running an agent on a suite: the flow from a configuration to a results file.

The parts, in the order an episode meets them:

- `config`: `EvalConfig` (what to run) and its `Unit` of work, one episode ``(task, run, index, seed)``.
- `journal`: every finished episode is appended to ``<out stem>.episodes.jsonl`` (flushed, fsynced)
  by the parent alone, so after Ctrl-C, a crash or ``kill -9`` the same command resumes and ends
  with exactly the episodes an uninterrupted run would have.
- `dispatch`: one loop hands batches of episodes to trusted workers over a transport (spawned
  processes, or Ray actors) and replaces a worker that dies, retrying its episodes once.
- `episodes`: in each worker, the episode loop steps the harnesses of its lanes together and asks
  the agents for actions; each record carries a digest of its trajectory.
- `agents`, `agent_process`, `lockdown`: the agent file runs only in an agent process of its own,
  locked down before the agent's code is imported (no network, writes only in a private folder, no
  signals to or tracing of other processes, memory and process limits), reached over pipes in a
  format that is never unpickled. ``in_process=True`` (``--in-process``) runs it inside the worker,
  for debugging only; such results are marked not submittable.
- `run`: `run_evaluation` ties these together and writes the results file.
"""

from .agents import DEFAULT_AGENT_THREADS, probe_agent
from .config import EvalConfig, Unit, check_pins, journal_path
from .dispatch import pack_agent_folder
from .episodes import EpisodeRunner, TrajectoryDigest, run_episode
from .run import run_evaluation

__all__ = ["EvalConfig", "Unit", "journal_path", "run_evaluation", "check_pins", "run_episode", "probe_agent",
           "EpisodeRunner", "TrajectoryDigest", "pack_agent_folder", "DEFAULT_AGENT_THREADS"]
