"""Artifacts an agent loads (checkpoints, programs, models): declared, checked by SHA-256, fetched or rebuilt.

`ensure_artifacts` runs in the trusted process before any agent code: every needed file is hashed
and must equal its manifest's SHA-256; a missing one is fetched from the content-addressed
`ArtifactStore`, else rebuilt by its recipe, locked down (`run_recipe`). Nothing runs on an unchecked
file. The manifest format, the store and the portable numeric mode: docs/artifacts.md.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cache import user_cache_dir
from .errors import UserError
from .numerics import MODES, PORTABLE_MODES, portable_supported, vendor_of

__all__ = ["MANIFEST_NAME", "Artifact", "Manifest", "ArtifactError", "ArtifactStore", "load_manifest",
           "manifest_path", "ensure_artifacts", "fetch_missing_artifacts", "played_pins", "pending_artifacts",
           "pending_rebuilds", "publish_artifacts", "store_location", "file_sha256", "machine_description",
           "run_recipe", "RecipeGroup", "RECIPE_MEMORY_MB", "RECIPE_MAX_PROCESSES", "RECIPE_DISK_MB", "STORE_ENV"]

MANIFEST_NAME = "artifacts.json"
MANIFEST_FORMAT = 1
RECIPE_MEMORY_MB = 16384    # address space of a recipe's process (a PPO retrain needs about 3 GiB)
RECIPE_MAX_PROCESSES = 256  # processes and threads a recipe may add
RECIPE_DISK_MB = 4096       # its folder, and each file it writes (its output included)
STORE_ENV = "POLAR_BENCH_ARTIFACT_STORE"  # the store's location: a folder, an fsspec URL, or "none"
_UNSIZED_LIMIT = 8 << 30  # the most a store may send for an artifact whose manifest gives no size
# What a recipe's process keeps of the verifier's environment (not its tokens and keys).
_RECIPE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "VIRTUAL_ENV", "PYTHONPATH", "TERM")
_LAYERS_LINE = "polar_bench recipe layers: "  # the launcher's first line on standard error
# Runs in the recipe's fresh interpreter: lock down, then become the recipe's command.
_LAUNCHER = """
import json, os, sys
cfg = json.loads(sys.argv[1])
from polar_bench.evaluate.lockdown import lock_down
layers = lock_down(cfg["workdir"], memory_mb=cfg["memory_mb"], max_processes=cfg["max_processes"], exec_next=True,
                   limits=cfg["limits"])
print(cfg["layers_line"] + json.dumps(layers), file=sys.stderr, flush=True)
os.chdir(cfg["cwd"])
os.execvpe(sys.argv[2], sys.argv[2:], cfg["env"])
"""


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
    built_on: str | None = None
    numerics: str | None = None

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


@functools.cache
def machine_description() -> str:
    """This machine as far as a rebuild's bits depend on it: the CPU (model, family and model numbers, the
    widest SIMD it has), e.g. ``"AMD EPYC, x86_64 family 23 model 49, AVX2 (no AVX-512)"``."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if not key:
                    break  # the first processor's block is enough
                info.setdefault(key, value.strip())
    except OSError:
        pass
    name = info.get("model name") or platform.processor() or "unknown CPU"
    parts = [name]
    if "cpu family" in info:
        parts.append(f"{platform.machine()} family {info['cpu family']} model {info.get('model', '?')}")
    flags = set(info.get("flags", "").split())
    if flags:
        parts.append("AVX-512" if "avx512f" in flags else "AVX2 (no AVX-512)" if "avx2" in flags
                     else "no AVX2")
    return ", ".join(parts)


def _bad(path: Path, what: str) -> ArtifactError:
    return ArtifactError(f"{path}: {what}; fix the manifest (its format: docs/artifacts.md)")


def manifest_path(agent_path: str | Path) -> Path | None:
    """The manifest of an agent file: ``<stem>.artifacts.json`` beside it, else ``artifacts.json``, else None."""
    agent = Path(agent_path).resolve()
    for path in (agent.with_name(f"{agent.stem}.{MANIFEST_NAME}"), agent.with_name(MANIFEST_NAME)):
        if path.is_file():
            return path
    return None


def load_manifest(agent_path: str | Path) -> Manifest | None:
    """The manifest of an agent file (`manifest_path`), or None when it declares no artifacts."""
    path = manifest_path(agent_path)
    if path is None:
        return None
    folder = path.parent
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
        run, users, built_on, mode = a.get("run"), a.get("tasks"), a.get("built_on"), a.get("numerics")
        if users is not None and not (isinstance(users, list) and all(isinstance(t, str) for t in users)):
            raise _bad(path, f"artifacts[{i}].tasks must be a list of task ids")
        if built_on is not None and not isinstance(built_on, str):
            raise _bad(path, f"artifacts[{i}].built_on must be a string or null")
        if mode is not None and mode not in MODES:
            raise _bad(path, f"artifacts[{i}].numerics must be one of {', '.join(MODES)} or null")
        size = a.get("bytes")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise _bad(path, f"artifacts[{i}].bytes must be a non-negative integer or null")
        artifacts.append(Artifact(a["path"], sha, recipe, a.get("task"), None if run is None else int(run),
                                  size, None if users is None else tuple(users), built_on, mode))
    return Manifest(folder, tuple(artifacts), recipes)


def store_location(option: str | None = None) -> str | None:
    """Where artifacts are looked up by SHA-256: ``option`` (a verify/evaluate flag), else the environment
    variable `STORE_ENV`, else a folder in the user's cache; None when either says ``none``."""
    where = option or os.environ.get(STORE_ENV) or str(user_cache_dir("artifacts"))
    return None if where.strip().lower() == "none" else where


class ArtifactStore:
    """Files named by their SHA-256 (``<root>/sha256/<first two digits>/<digest>``) in a local folder or
    under any fsspec URL (``file://``, ``s3://``, ``hf://``, ...). What it returns is checked by the caller:
    a store is trusted for nothing but availability."""

    def __init__(self, location: str | Path):
        self.location = str(location)
        self.remote = "://" in self.location
        if self.remote:
            from ._optional import require

            fsspec = require("fsspec", "store", f"the artifact store {self.location}")
            self._fs, self._root = fsspec.core.url_to_fs(self.location)
        else:
            self._root = str(Path(self.location).expanduser())

    def __repr__(self) -> str:
        return f"ArtifactStore({self.location!r})"

    def _key(self, sha256: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise ValueError(f"not a SHA-256: {sha256!r}")
        return f"{self._root.rstrip('/')}/sha256/{sha256[:2]}/{sha256}"

    def has(self, sha256: str) -> bool:
        key = self._key(sha256)
        return bool(self._fs.exists(key)) if self.remote else Path(key).is_file()

    def fetch(self, sha256: str, dest: Path, limit: int) -> bool:
        """Copy the stored file of ``sha256`` to the new file ``dest``, at most ``limit`` bytes (more is
        an `ArtifactError`); False when the store holds no such file."""
        key = self._key(sha256)
        try:
            source = self._fs.open(key, "rb") if self.remote else open(key, "rb")
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise ArtifactError(f"the artifact store {self.location} could not be read ({exc}); check {STORE_ENV} "
                                "or --artifact-store, or pass 'none' to rebuild instead") from None
        copied = 0
        with source, open(dest, "xb") as out:
            for block in iter(lambda: source.read(1 << 20), b""):
                copied += len(block)
                if copied > limit:
                    raise ArtifactError(f"the artifact store {self.location} sent more than {limit} bytes for "
                                        f"{sha256[:16]}..., more than its manifest declares; refused")
                out.write(block)
        return True

    def put(self, path: Path, sha256: str) -> bool:
        """Store the file at ``path`` (whose SHA-256 the caller checked) unless it is there already."""
        if self.has(sha256):
            return False
        key = self._key(sha256)
        partial = f"{key}.{os.getpid()}.partial"
        if self.remote:
            self._fs.makedirs(key.rsplit("/", 1)[0], exist_ok=True)
            self._fs.put_file(str(path), partial)
            self._fs.mv(partial, key)
        else:
            Path(key).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, partial)
            os.replace(partial, key)
        return True


def _fetch(store: ArtifactStore, artifact: Artifact, target: Path, log: Callable[[str], None]) -> bool:
    """Place the store's copy of ``artifact`` at ``target`` when its bytes are the pinned ones."""
    assert artifact.sha256 is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.fetching")
    partial.unlink(missing_ok=True)
    try:
        limit = artifact.bytes if artifact.bytes is not None else _UNSIZED_LIMIT
        if not store.fetch(artifact.sha256, partial, limit):
            return False
        sha = file_sha256(partial)
        if sha != artifact.sha256:
            log(f"refused {artifact.path} from the artifact store {store.location}: its SHA-256 {sha[:16]}... is "
                f"not the manifest's {artifact.sha256[:16]}...")
            return False
        os.replace(partial, target)
        log(f"fetched {artifact.path} from the artifact store {store.location}")
        return True
    finally:
        partial.unlink(missing_ok=True)


def fetch_missing_artifacts(agent_path: str | Path, units: Iterable[tuple[str, int]] | None = None, *,
                            store: str | None = None, log: Callable[[str], None] = print) -> list[dict]:
    """Before an evaluation: fetch from the store every pinned artifact the ``units`` need that is not on
    disk (nothing is rebuilt, files present are left as they are). Returns a row per fetched file."""
    manifest = load_manifest(agent_path)
    where = store_location(store)
    if manifest is None or where is None:
        return []
    artifact_store = ArtifactStore(where)
    wanted = None if units is None else sorted(set(units))
    rows = []
    for artifact in manifest.artifacts:
        target = manifest.file(artifact)
        if artifact.sha256 is None or target.is_file() or not artifact.needed_by(wanted):
            continue
        if _fetch(artifact_store, artifact, target, log):
            rows.append({"path": artifact.path, "sha256": artifact.sha256, "status": "fetched"})
    return rows


def played_pins(agent_path: str | Path, units: Iterable[tuple[str, int]] | None = None) -> dict[str, str]:
    """Before an evaluation plays: the pinned artifacts the (task, run) ``units`` need, as {path: SHA-256},
    each one on disk hashed and checked against its pin (one absent is left to the agent: a run whose
    episodes are all journaled needs none). An evaluation journals these pins, so that a journal played
    with other bytes under the same paths is not resumed with the new ones. Raises `ArtifactError` for
    a file whose bytes are not the pinned ones: an evaluation would play weights other than those its
    results claim."""
    manifest = load_manifest(agent_path)
    if manifest is None:
        return {}
    wanted = None if units is None else sorted(set(units))
    pins = {}
    for artifact in manifest.artifacts:
        if artifact.sha256 is None or not artifact.needed_by(wanted):
            continue
        pins[artifact.path] = artifact.sha256
        target = manifest.file(artifact)
        if target.is_file() and (sha := file_sha256(target)) != artifact.sha256:
            raise ArtifactError(
                f"{target}: SHA-256 {sha[:16]}... is not the {artifact.sha256[:16]}... that "
                f"{manifest_path(agent_path)} pins, so the results would name weights they did not play; pin "
                f"these bytes there (sha256, bytes) if they are the ones to evaluate, or delete the file so "
                f"that the pinned one is fetched or rebuilt (python -m polar_bench artifacts check {agent_path})")
    return pins


def pending_artifacts(agent_path: str | Path, units: Iterable[tuple[str, int]] | None = None, *,
                      store: str | None = None) -> list[Artifact]:
    """The manifest's artifacts that the (task, run) ``units`` need and that are neither on disk nor in the
    artifact store (``store``, as `ensure_artifacts` takes it): what `ensure_artifacts` would have to
    rebuild, in manifest order. Nothing is hashed or fetched; a store that cannot be asked counts as
    holding nothing. The manifest is read once and the store asked once per artifact, so a caller that
    groups them (verify's stages, by task) asks here once for all its units."""
    manifest = load_manifest(agent_path)
    if manifest is None:
        return []
    where = store_location(store)
    artifact_store = ArtifactStore(where) if where is not None else None
    wanted = None if units is None else sorted(set(units))
    out = []
    for artifact in manifest.artifacts:
        if not artifact.needed_by(wanted) or manifest.file(artifact).is_file():
            continue
        try:
            stored = artifact_store is not None and artifact.sha256 is not None and artifact_store.has(artifact.sha256)
        except OSError:
            stored = False
        if not stored:
            out.append(artifact)
    return out


def pending_rebuilds(agent_path: str | Path, units: Iterable[tuple[str, int]] | None = None, *,
                     store: str | None = None) -> set[str]:
    """The manifest paths of `pending_artifacts`."""
    return {a.path for a in pending_artifacts(agent_path, units, store=store)}


def publish_artifacts(agent_path: str | Path, store: str | None = None,
                      log: Callable[[str], None] = print) -> list[dict]:
    """Put every pinned artifact of an agent's manifest that is on disk with its pinned bytes into the store
    (``store``, else `store_location`'s); returns one row per artifact: stored, present or missing."""
    manifest = load_manifest(agent_path)
    if manifest is None:
        raise UserError(f"{agent_path} has no {MANIFEST_NAME} beside it: it declares no artifacts to publish")
    where = store_location(store)
    if where is None:
        raise UserError("no artifact store to publish to: pass --store URL (a folder or an fsspec URL)")
    target_store = ArtifactStore(where)
    rows = []
    for artifact in manifest.artifacts:
        path = manifest.file(artifact)
        if artifact.sha256 is None or not path.is_file():
            rows.append({"path": artifact.path, "status": "missing"})
            continue
        sha = file_sha256(path)
        if sha != artifact.sha256:
            raise ArtifactError(f"{path}: SHA-256 {sha[:16]}... differs from the manifest's "
                                f"{artifact.sha256[:16]}...; only pinned bytes are published (delete it and "
                                "rebuild it)")
        stored = target_store.put(path, sha)
        rows.append({"path": artifact.path, "sha256": sha, "status": "stored" if stored else "present"})
        log(f"{'stored' if stored else 'present'} {artifact.path} ({sha[:16]}...) in {where}")
    return rows


class RecipeGroup:
    """The processes of recipes that run at once, so that one `stop` ends them all from another thread:
    those running are killed, and a recipe whose thread has not started its process yet never starts
    it (`run_recipe` starts and registers it under the same lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.stopped = False

    def start(self, args: list[str], **popen: Any) -> subprocess.Popen:
        with self._lock:
            if self.stopped:
                raise ArtifactError("the rebuilds were stopped before this recipe started")
            proc = subprocess.Popen(args, **popen)
            self._procs.add(proc)
            return proc

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop(self) -> None:
        from .lockdown.process import kill_process_group

        with self._lock:
            self.stopped = True
            procs = list(self._procs)
        for proc in procs:  # their threads then return, and a pool's exit need not wait for them
            kill_process_group(proc)


def run_recipe(command: list[str], cwd: str | Path, workdir: str | Path, *,
               memory_mb: int | None = RECIPE_MEMORY_MB, max_processes: int = RECIPE_MAX_PROCESSES,
               disk_mb: int | None = RECIPE_DISK_MB,
               running: RecipeGroup | None = None) -> subprocess.CompletedProcess:
    """Run a recipe's ``command`` in ``cwd`` locked down (the module docstring): it may write only
    under ``workdir``, which it gets as ``HOME`` and ``TMPDIR`` too. Its output is captured; the last
    line of its standard error names the layers that took effect (`lock_down`'s). A recipe is a
    submitter's code: ``memory_mb`` holds it and everything it starts together, ``disk_mb`` its folder
    and each file it writes, its output included (`polar_bench.lockdown.limits`); over a limit it is
    killed and its standard error ends with the reason. ``running``: the `RecipeGroup` that starts the
    recipe's process and holds it while it runs, so that a caller can stop it from another thread
    (`_rebuild_all` on Ctrl-C); a stopped group raises `ArtifactError` instead of starting it."""
    from .lockdown.limits import TreeLimits
    from .lockdown.process import end_tree

    workdir = Path(workdir)
    for sub in ("home", "tmp"):
        (workdir / sub).mkdir(exist_ok=True)
    if os.geteuid() == 0:  # the recipe runs as the agents' uid: let it write its own folder
        from .evaluate.lockdown import AGENT_UID

        for folder in (workdir, *(p for p in workdir.rglob("*") if p.is_dir())):
            os.chown(folder, AGENT_UID, AGENT_UID)
    env = {k: os.environ[k] for k in _RECIPE_ENV if k in os.environ}
    env.update(HOME=str(workdir / "home"), TMPDIR=str(workdir / "tmp"), XDG_CACHE_HOME=str(workdir / "home"),
               MPLCONFIGDIR=str(workdir / "home"), PYTHONDONTWRITEBYTECODE="1")
    limits = TreeLimits(memory_mb, disk_mb, who="recipe")
    cfg = {"workdir": str(workdir), "cwd": str(cwd), "env": env, "memory_mb": memory_mb,
           "max_processes": max_processes, "layers_line": _LAYERS_LINE,
           "limits": limits.child_config(tmpfs=False)}  # the rebuilt file is read from the folder afterwards
    args = [sys.executable, "-c", _LAUNCHER, json.dumps(cfg), *command]
    # output to files, not pipes: a process it leaves behind holding a pipe would block the reading
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        group = running if running is not None else RecipeGroup()
        proc = group.start(args, cwd=workdir, stdout=out, stderr=err, start_new_session=True)
        try:
            limits.watch(proc.pid)
            if disk_mb:
                limits.watch_folder(str(workdir))
            proc.wait()
        finally:
            # whatever it left running (seccomp keeps every process it starts in its group) ends with
            # it, before its file is read: nothing can swap the file afterwards
            over = limits.check()
            end_tree(proc, limits)
            group.discard(proc)
        stderr = _head_and_tail(err) + (f"\n{over}\n" if over else "")
        return subprocess.CompletedProcess(args, proc.returncode, _head_and_tail(out), stderr)


def _head_and_tail(stream: Any, head: int = 4096, tail: int = 60_000) -> str:
    """What a recipe printed, at most ``head + tail`` bytes of it (its first line names the
    layers; the last ones say why it failed)."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(0)
    if size <= head + tail:
        return stream.read().decode("utf-8", "replace")
    first = stream.read(head).decode("utf-8", "replace")
    stream.seek(size - tail)
    return f"{first}\n[... {size - head - tail} bytes left out ...]\n{stream.read().decode('utf-8', 'replace')}"


def _layers(stderr: str) -> dict:
    for line in stderr.splitlines():
        if line.startswith(_LAYERS_LINE):
            try:
                layers = json.loads(line[len(_LAYERS_LINE):])
            except ValueError:
                break
            return layers if isinstance(layers, dict) else {}
    return {}


def _rebuild(manifest: Manifest, artifact: Artifact, log: Callable[[str], None],
             running: RecipeGroup | None = None) -> tuple[Path, dict]:
    """Run the artifact's recipe locked down; return the file it wrote, in a private folder that
    the caller removes (``path.parent.parent``), and the layers that took effect."""
    target = manifest.file(artifact)
    if artifact.recipe is None:
        raise ArtifactError(f"{target} is missing and its manifest gives no recipe to rebuild it; restore the "
                            "file (the agent's url in AGENT_INFO says where to get it)")
    if artifact.numerics in PORTABLE_MODES:
        ok, why = portable_supported(built_on=artifact.built_on, mode=artifact.numerics)
        if not ok:
            vendor = vendor_of(artifact.built_on)
            where = f"an {vendor} x86-64 machine" if vendor else "an x86-64 machine with AVX2 and FMA"
            raise ArtifactError(f"{target} is missing and cannot be rebuilt here: {why} (its recipe trains in "
                                f"the {artifact.numerics} numeric mode); fetch it from an artifact store "
                                f"(--artifact-store) or verify on {where}")
    recipe = manifest.recipes[artifact.recipe]
    workdir = Path(tempfile.mkdtemp(prefix="polar_bench_rebuild_"))
    out = workdir / "out" / target.name
    out.parent.mkdir()
    values = {"python": sys.executable, "task": artifact.task or "", "run": "" if artifact.run is None
              else str(artifact.run), "path": str(out)}
    # only these four placeholders are replaced (no str.format: a recipe's braces stay as written)
    command = [re.sub(r"\{(python|task|run|path)\}", lambda m: values[m.group(1)], arg) for arg in recipe["command"]]
    cwd = (manifest.folder / str(recipe.get("cwd", "."))).resolve()
    log(f"rebuilding {artifact.path} ({recipe.get('about', artifact.recipe)}), locked down: {' '.join(command)}")
    done = run_recipe(command, cwd, workdir, running=running)
    if done.returncode != 0 or out.parent.is_symlink() or out.is_symlink() or not out.is_file():
        shutil.rmtree(workdir, ignore_errors=True)
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines()
                 if not line.startswith(_LAYERS_LINE)]
        why = (f"exit code {done.returncode}: {lines[-1][:300]}" if lines else f"exit code {done.returncode}") \
            if done.returncode != 0 else f"it wrote no regular file at {out}"
        raise ArtifactError(f"{target} is missing and its rebuild failed ({why}); the recipe runs locked down "
                            f"(no network, writes only to {out.parent}, HOME and TMPDIR): run '{' '.join(command)}' "
                            f"in {cwd} to see why")
    return out, _layers(done.stderr)


def _place(manifest: Manifest, artifact: Artifact, built: Path, artifact_store: ArtifactStore | None) -> str:
    """Move a rebuilt file where the agent loads it when it has the pinned bytes (else beside it, as
    ``.rejected``, so that no evaluation plays it), keep it in a local store; return its SHA-256."""
    target = manifest.file(artifact)
    try:
        sha = file_sha256(built)
        placed = target if sha == artifact.sha256 else target.with_name(target.name + ".rejected")
        placed.parent.mkdir(parents=True, exist_ok=True)
        partial = placed.with_name(placed.name + f".{os.getpid()}.partial")
        shutil.copyfile(built, partial)
        os.replace(partial, placed)
    finally:
        shutil.rmtree(built.parent.parent, ignore_errors=True)
    if sha == artifact.sha256 and artifact_store is not None and not artifact_store.remote:
        artifact_store.put(target, sha)  # the next verification need not retrain it
    return sha


def _rebuild_all(manifest: Manifest, artifacts: list[Artifact], artifact_store: ArtifactStore | None,
                 log: Callable[[str], None], workers: int) -> dict[str, tuple[str, dict]]:
    """Rebuild ``artifacts``, up to ``workers`` recipes at once (each a locked-down process of one thread
    in the recipes this project ships); path -> (SHA-256, layers). Every rebuild that finished is placed,
    also when another fails; after a failure no recipe is started, and the first failure (in manifest
    order) is raised once the running ones end. An interruption (Ctrl-C) kills the running recipes
    before it goes on: a retrain may have many minutes left, and what it would build is not kept."""
    out: dict[str, tuple[str, dict]] = {}
    failures: dict[int, ArtifactError] = {}
    queue = list(enumerate(artifacts))
    running: dict[concurrent.futures.Future, int] = {}
    processes = RecipeGroup()  # the recipes' processes, while they run
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        try:
            while queue or running:
                while queue and len(running) < max(1, workers) and not failures:
                    i, artifact = queue.pop(0)
                    running[pool.submit(_rebuild, manifest, artifact, log, processes)] = i
                if not running:
                    break
                done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    i = running.pop(future)
                    try:
                        built, layers = future.result()
                    except ArtifactError as exc:
                        failures[i] = exc
                        continue
                    out[artifacts[i].path] = (_place(manifest, artifacts[i], built, artifact_store), layers)
        except BaseException:
            processes.stop()  # and a recipe about to start does not: the pool's exit need not wait
            raise
    if failures:
        raise failures[min(failures)]
    return out


def ensure_artifacts(agent_path: str | Path, units: Iterable[tuple[str, int]] | None = None, *,
                     rebuild: bool = True, log: Callable[[str], None] = print,
                     store: str | None = None, workers: int = 1) -> list[dict]:
    """Check (and, when missing, fetch or rebuild) every artifact the (task, run) ``units`` need.

    Files on disk are hashed first. A missing artifact is then looked up by SHA-256 in the artifact store
    (``store``, else `store_location`'s), then rebuilt by its recipe, up to ``workers`` recipes at once; a
    rebuilt one is kept in a local store. Returns one row per needed artifact, in the manifest's order:
    path, sha256, and ``"checked"``, ``"fetched"`` or ``"rebuilt"``. Raises `ArtifactError` for an
    artifact without a pinned SHA-256, a missing one that can be neither fetched nor rebuilt (or
    ``rebuild`` is false), and any SHA-256 that differs from the manifest's."""
    manifest = load_manifest(agent_path)
    if manifest is None:
        return []
    wanted = None if units is None else sorted(set(units))
    where = store_location(store)
    artifact_store = ArtifactStore(where) if where is not None else None
    needed = [a for a in manifest.artifacts if a.needed_by(wanted)]
    for artifact in needed:
        if artifact.sha256 is None:
            raise ArtifactError(f"{manifest.file(artifact)}: the manifest pins no SHA-256 for it, so it cannot be "
                                "checked; rebuild it and pin its SHA-256 in the manifest before this entry can be "
                                "verified")
    status: dict[str, tuple[str, str]] = {}  # path -> (how, sha256)
    missing = []
    for artifact in needed:  # what is on disk first: a changed file stops it before any rebuild
        target = manifest.file(artifact)
        if target.is_file():
            status[artifact.path] = ("checked", file_sha256(target))
            _check(artifact, target, *status[artifact.path])
        elif artifact_store is not None and _fetch(artifact_store, artifact, target, log):
            status[artifact.path] = ("fetched", str(artifact.sha256))  # _fetch placed it only with these bytes
        else:
            missing.append(artifact)
    if missing and not rebuild:
        raise ArtifactError(f"{manifest.file(missing[0])} is missing; rebuild it (its manifest's recipe), restore "
                            f"it, or name an artifact store that holds it (--artifact-store, {STORE_ENV})")
    rebuilt = _rebuild_all(manifest, missing, artifact_store, log, workers)
    rows = []
    for artifact in needed:
        if artifact.path in rebuilt:
            sha, layers = rebuilt[artifact.path]
            _check(artifact, manifest.file(artifact), "rebuilt", sha)
            rows.append({"path": artifact.path, "sha256": sha, "status": "rebuilt", "recipe_layers": layers})
        else:
            how, sha = status[artifact.path]
            rows.append({"path": artifact.path, "sha256": sha, "status": how})
    return rows


def _check(artifact: Artifact, target: Path, how: str, sha: str) -> None:
    """`ArtifactError` unless ``sha`` is the pinned SHA-256, with the fix for how the file came."""
    if sha == artifact.sha256:
        return
    assert artifact.sha256 is not None
    fix = "delete it so that it is rebuilt, or restore the original"
    if how == "rebuilt":
        where = (f"the pinned file was built on: {artifact.built_on}" if artifact.built_on
                 else "the manifest does not say where the pinned file was built")
        fix = (f"the rebuild is not bit-for-bit reproducible on this machine ({machine_description()}; "
               f"{where}; kept as {target.name}.rejected); the entry cannot be verified here: verify "
               f"on a machine like the one that built it")
    raise ArtifactError(f"{target}: SHA-256 {sha[:16]}... differs from the manifest's "
                        f"{artifact.sha256[:16]}... ({how}); {fix}")
