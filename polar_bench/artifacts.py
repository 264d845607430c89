"""Artifacts an agent loads (checkpoints, programs, models): declared, checked by SHA-256, rebuilt when missing.

An agent declares them in ``artifacts.json`` beside its agent file (not in ``AGENT_INFO``: the agent
file's own SHA-256 is pinned by its results, so the manifest must be able to change without it)::

    {
      "format": 1,
      "recipes": {
        "retrain": {"command": ["{python}", "-m", "baselines.ppo.rebuild", "{task}", "{run}"],
                    "cwd": "../..", "about": "deterministic retrain, about 35 s per Procgen run"}
      },
      "artifacts": [
        {"path": "checkpoints/procgen/bigfish/run0.pt", "sha256": "3c55...", "bytes": 2518519,
         "task": "procgen/bigfish", "run": 0, "recipe": "retrain"}
      ]
    }

``tasks`` (optional, a list) widens ``task``: the artifact is needed by the episodes of any of these
tasks (an LLM+PPO NetHack episode plays the skill policies of five other NetHack tasks).
``path`` is relative to the manifest's folder (``../ppo/checkpoints/...`` lets one agent share another's
files; absolute paths are refused). ``task``
and ``run`` are optional: an artifact with them is needed only by the episodes of that task and run,
so that `verify` rebuilds only what its sample plays; one without them is always needed. A recipe's
``command`` is run with ``{python}`` (this interpreter), ``{task}``, ``{run}`` and ``{path}`` (absolute)
substituted, in ``cwd`` (relative to the manifest's folder). ``sha256`` may be ``null`` for an
artifact whose rebuild has not been pinned yet: such an artifact is reported, never trusted.

`ensure_artifacts` runs in the trusted process before any agent code: every needed artifact that
exists is hashed and must equal its ``sha256``; a missing one is rebuilt by its recipe and must then
equal it. Any difference raises `ArtifactError` (one line naming the file, both hashes and the fix);
nothing runs on an unchecked file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UserError

__all__ = ["MANIFEST_NAME", "Artifact", "Manifest", "ArtifactError", "load_manifest", "ensure_artifacts",
           "file_sha256"]

MANIFEST_NAME = "artifacts.json"
MANIFEST_FORMAT = 1


class ArtifactError(UserError):
    """A needed artifact is missing and cannot be rebuilt, or its SHA-256 differs from the manifest's."""


@dataclass(frozen=True)
class Artifact:
    path: str
    sha256: str | None
    recipe: str | None = None
    task: str | None = None
    run: int | None = None
    bytes: int | None = None
    tasks: tuple[str, ...] | None = None

    def needed_by(self, units: Iterable[tuple[str, int]] | None) -> bool:
        """Whether any of these (task, run) pairs plays with this artifact (None: every pair)."""
        users = self.tasks if self.tasks is not None else (self.task,) if self.task is not None else None
        if units is None or users is None:
            return True
        return any(t in users and (self.run is None or r == self.run) for t, r in units)


@dataclass(frozen=True)
class Manifest:
    folder: Path
    artifacts: tuple[Artifact, ...]
    recipes: dict[str, dict[str, Any]]

    def file(self, artifact: Artifact) -> Path:
        return self.folder / artifact.path


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _bad(path: Path, what: str) -> ArtifactError:
    return ArtifactError(f"{path}: {what}; fix the manifest (format: polar_bench/artifacts.py)")


def load_manifest(agent_path: str | Path) -> Manifest | None:
    """The manifest beside an agent file, or None when it declares no artifacts."""
    folder = Path(agent_path).resolve().parent
    path = folder / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _bad(path, f"not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise _bad(path, f"'format' must be {MANIFEST_FORMAT}")
    recipes = data.get("recipes") or {}
    if not isinstance(recipes, dict) or not all(
            isinstance(r, dict) and isinstance(r.get("command"), list) and r["command"]
            and all(isinstance(a, str) for a in r["command"]) for r in recipes.values()):
        raise _bad(path, "every recipe needs a 'command': a non-empty list of strings")
    artifacts = []
    for i, a in enumerate(data.get("artifacts") or []):
        if not isinstance(a, dict) or not isinstance(a.get("path"), str):
            raise _bad(path, f"artifacts[{i}] needs a 'path'")
        rel = Path(a["path"])
        if rel.is_absolute():
            raise _bad(path, f"artifacts[{i}].path {a['path']!r} must be relative to the manifest's folder")
        sha = a.get("sha256")
        if sha is not None and (not isinstance(sha, str) or len(sha) != 64
                                or any(c not in "0123456789abcdef" for c in sha)):
            raise _bad(path, f"artifacts[{i}].sha256 must be 64 lowercase hex digits or null")
        recipe = a.get("recipe")
        if recipe is not None and recipe not in recipes:
            raise _bad(path, f"artifacts[{i}].recipe {recipe!r} is not one of the recipes {sorted(recipes)}")
        run, users = a.get("run"), a.get("tasks")
        if users is not None and not (isinstance(users, list) and all(isinstance(t, str) for t in users)):
            raise _bad(path, f"artifacts[{i}].tasks must be a list of task ids")
        artifacts.append(Artifact(a["path"], sha, recipe, a.get("task"), None if run is None else int(run),
                                  a.get("bytes"), None if users is None else tuple(users)))
    return Manifest(folder, tuple(artifacts), recipes)


def _rebuild(manifest: Manifest, artifact: Artifact, log: Callable[[str], None]) -> None:
    target = manifest.file(artifact)
    if artifact.recipe is None:
        raise ArtifactError(f"{target} is missing and its manifest gives no recipe to rebuild it; restore the "
                            "file (the agent's url in AGENT_INFO says where to get it)")
    recipe = manifest.recipes[artifact.recipe]
    values = {"python": sys.executable, "task": artifact.task or "", "run": "" if artifact.run is None
              else str(artifact.run), "path": str(target)}
    command = [arg.format(**values) for arg in recipe["command"]]
    cwd = (manifest.folder / str(recipe.get("cwd", "."))).resolve()
    log(f"rebuilding {artifact.path} ({recipe.get('about', artifact.recipe)}): {' '.join(command)}")
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0 or not target.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ArtifactError(f"{target} is missing and its rebuild failed (exit code {done.returncode}: "
                            f"{tail[0][:300]}); run '{' '.join(command)}' in {cwd} to see why")


def ensure_artifacts(agent_path: str | Path, units: Iterable[tuple[str, int]] | None = None, *,
                     rebuild: bool = True, log: Callable[[str], None] = print) -> list[dict]:
    """Check (and, when missing, rebuild) every artifact the (task, run) ``units`` need.

    Returns one row per needed artifact: path, sha256, and ``"checked"`` or ``"rebuilt"``. Raises
    `ArtifactError` for an artifact without a pinned SHA-256, a missing one that cannot be rebuilt
    (or ``rebuild`` is false), and any SHA-256 that differs from the manifest's."""
    manifest = load_manifest(agent_path)
    if manifest is None:
        return []
    wanted = None if units is None else sorted(set(units))
    rows = []
    for artifact in manifest.artifacts:
        if not artifact.needed_by(wanted):
            continue
        target = manifest.file(artifact)
        if artifact.sha256 is None:
            raise ArtifactError(f"{target}: the manifest pins no SHA-256 for it, so it cannot be checked; rebuild "
                                "it and pin its SHA-256 in the manifest before this entry can be verified")
        how = "checked"
        if not target.is_file():
            if not rebuild:
                raise ArtifactError(f"{target} is missing; rebuild it (its manifest's recipe) or restore it")
            _rebuild(manifest, artifact, log)
            how = "rebuilt"
        sha = file_sha256(target)
        if sha != artifact.sha256:
            fix = "delete it so that it is rebuilt, or restore the original"
            if how == "rebuilt":  # set aside, so that no later evaluate plays it
                target.replace(target.with_name(target.name + ".rejected"))
                fix = (f"the rebuild is not bit-for-bit reproducible on this machine (kept as {target.name}.rejected); "
                       "the entry cannot be verified here")
            raise ArtifactError(f"{target}: SHA-256 {sha[:16]}... differs from the manifest's "
                                f"{artifact.sha256[:16]}... ({how}); {fix}")
        rows.append({"path": artifact.path, "sha256": sha, "status": how})
    return rows
