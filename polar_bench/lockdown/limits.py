"""Memory and disk limits of a locked-down process tree, kept by its trusted parent.

`TreeLimits` is made before the untrusted process starts and closed after it is gone. The process
itself joins the cgroup, raises its OOM score and mounts its folder (`polar_bench.lockdown.kernel`,
with `TreeLimits.child_config`); the parent watches (a cgroup v2 or v1 memory limit, else a
watchdog thread), kills the whole tree when a limit is crossed and says why (`TreeLimits.reason`).
See docs/sandbox.md#the-lockdown-toolkit.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from pathlib import Path

__all__ = ["TreeLimits", "gib", "DEFAULT_DISK_MB", "DISK_INODES_PER_MB"]

DEFAULT_DISK_MB = 1024
DISK_INODES_PER_MB = 64  # files and folders the private folder may hold per MiB of its size (65,536 for 1 GiB)
_WATCH_INTERVAL_S = 0.2


def gib(mb: int) -> str:
    """``mb`` MiB as the limit messages say it: "8 GiB", "1.5 GiB", "64 MiB" (under 1 GiB)."""
    return f"{mb / 1024:g} GiB" if mb >= 1024 else f"{mb} MiB"


def _mountpoint(fstype: str, option: str | None) -> Path | None:
    """Where a filesystem of ``fstype`` (with ``option`` among its super options) is mounted."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) < 5 or len(rparts) < 3 or rparts[0] != fstype:
            continue
        if option is None or option in rparts[2].split(","):
            return Path(parts[4])
    return None


def _own_cgroup(controller: str | None) -> str | None:
    """This process's cgroup path in the v1 hierarchy of ``controller`` (None: the v2 one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (controller is None and controllers == "") or (controller and controller in controllers.split(",")):
            return path
    return None


class _Cgroup:
    """A memory cgroup of one tree: made, limited, watched, emptied and removed by the parent."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version

    @classmethod
    def make(cls, name: str, limit: int) -> tuple[_Cgroup | None, str]:
        """A new cgroup limited to ``limit`` bytes, or None and why not."""
        reasons = []
        for version in (2, 1):
            parent = cls._parent(version)
            if parent is None:
                reasons.append(f"v{version}: no memory controller to delegate")
                continue
            cls._sweep(parent)
            path = parent / name
            try:
                path.mkdir()
            except OSError as exc:
                reasons.append(f"v{version}: cannot create a cgroup ({exc.strerror})")
                continue
            group = cls(path, version)
            try:
                group._limit(limit)
            except OSError as exc:
                group.remove()
                reasons.append(f"v{version}: cannot set its limit ({exc.strerror})")
                continue
            return group, ""
        return None, "; ".join(reasons)

    @staticmethod
    def _parent(version: int) -> Path | None:
        if version == 2:
            mount, own = _mountpoint("cgroup2", None), _own_cgroup(None)
            if mount is None or own is None:
                return None
            parent = mount / own.lstrip("/")
            try:
                if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                    (parent / "cgroup.subtree_control").write_text("+memory")  # refused where processes live
            except OSError:
                return None
            return parent
        mount, own = _mountpoint("cgroup", "memory"), _own_cgroup("memory")
        if mount is None or own is None:
            return None
        return mount / own.lstrip("/")

    @staticmethod
    def _sweep(parent: Path) -> None:
        """Remove the empty cgroups that trees of processes now gone left behind (a parent killed outright)."""
        try:
            stale = [p for p in parent.glob("polar_bench-*") if not _alive(int(p.name.split("-")[1]))]
        except (OSError, ValueError, IndexError):
            return
        for p in stale:
            try:
                p.rmdir()
            except OSError:
                pass

    def _limit(self, limit: int) -> None:
        if self.version == 2:
            (self.path / "memory.max").write_text(str(limit))
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")
            (self.path / "memory.oom.group").write_text("1")
        else:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            if (self.path / "memory.memsw.limit_in_bytes").exists():  # memory + swap: after the memory limit
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit))

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def oom_waiter(self) -> tuple[int, int, list[int]]:
        """(fd, poll events, fds to close): an fd that becomes ready when the kernel kills for memory."""
        if self.version == 2:
            fd = os.open(self.path / "memory.events", os.O_RDONLY)
            return fd, select.POLLPRI | select.POLLERR, [fd]
        efd = os.eventfd(0, os.EFD_CLOEXEC)
        ofd = os.open(self.path / "memory.oom_control", os.O_RDONLY)
        try:
            (self.path / "cgroup.event_control").write_text(f"{efd} {ofd}")
        except OSError:
            os.close(efd)
            os.close(ofd)
            raise
        return efd, select.POLLIN, [efd, ofd]

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        if self.version == 2 and (self.path / "cgroup.kill").exists():
            try:
                (self.path / "cgroup.kill").write_text("1")
                return
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def remove(self) -> None:
        deadline = time.monotonic() + 5
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # swept by a later `make` once empty
                self.kill_all()
                time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_rss(pgid: int) -> int:
    """Resident bytes of the processes of process group ``pgid`` (from /proc)."""
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 21 and int(fields[2]) == pgid:
            total += int(fields[21]) * page
    return total


def _folder_usage(folder: str) -> tuple[int, int]:
    """(bytes allocated, entries) under ``folder``."""
    used = entries = 0
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            entries += 1
            try:
                used += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return used, entries


class TreeLimits:
    """The limits of one untrusted process tree (``memory_mb`` for all of it, ``disk_mb`` for its folder).

    Use: ``limits = TreeLimits(...)``; pass ``limits.child_config()`` to the process, which applies it
    (`polar_bench.lockdown.kernel`); ``limits.watch(pgid, ...)`` once it runs; after it died,
    ``limits.reason`` says whether a limit killed it; ``limits.close()`` when it is gone.
    """

    def __init__(self, memory_mb: int | None, disk_mb: int | None = None, *, who: str = "agent",
                 cgroups: bool = True):
        self.memory_mb, self.disk_mb, self.who = memory_mb, disk_mb, who
        self.reason: str | None = None
        self._cgroup: _Cgroup | None = None
        self._no_cgroup = "no memory limit asked for"
        if memory_mb and cgroups:
            self._cgroup, self._no_cgroup = _Cgroup.make(f"polar_bench-{os.getpid()}-{id(self):x}",
                                                          int(memory_mb) << 20)
        elif memory_mb:
            self._no_cgroup = "cgroups not used"
        self._oom_before = self._cgroup.oom_kills() if self._cgroup is not None else 0
        self._stop_r, self._stop_w = -1, -1
        self._thread: threading.Thread | None = None
        self._pgid: int | None = None
        self._poll_fd: int | None = None
        self._poll_events = 0
        self._closers: list[int] = []
        self._watch_rss = False
        self._folder: str | None = None

    # ------------------------------------------------------------------ the child's side
    def child_config(self, tmpfs: bool = True) -> dict:
        """What the process applies to itself, as plain data. ``tmpfs=False``: its folder stays on the
        host's disk (the parent reads what it wrote there afterwards), held by the file-size limit and
        `watch_folder` instead."""
        return {"cgroup_procs": self._cgroup.procs_file if self._cgroup is not None else None,
                "disk_bytes": int(self.disk_mb) << 20 if self.disk_mb else None,
                "disk_inodes": int(self.disk_mb) * DISK_INODES_PER_MB if self.disk_mb else None,
                "disk_tmpfs": tmpfs}

    # ------------------------------------------------------------------ the parent's side
    def memory_layer(self) -> str:
        """How the memory limit is enforced, for ``isolation.layers``."""
        if not self.memory_mb:
            return "off (no limit)"
        if self._cgroup is not None:
            return (f"cgroup v{self._cgroup.version} memory controller: {gib(self.memory_mb)} for the {self.who} "
                    f"process and everything it starts together")
        return (f"watchdog: resident memory of the {self.who}'s process group checked every "
                f"{_WATCH_INTERVAL_S:g} s against {gib(self.memory_mb)} (no cgroup: {self._no_cgroup})")

    def watch(self, pgid: int) -> None:
        """Start watching the tree of process group ``pgid``: the OOM events of its cgroup, or its resident
        memory where there is no cgroup (and its folder, once `watch_folder` names it)."""
        self._pgid = pgid
        self._poll_fd, self._poll_events, self._closers = None, 0, []
        if self._cgroup is not None:
            try:
                self._poll_fd, self._poll_events, self._closers = self._cgroup.oom_waiter()
            except OSError:
                pass  # the kills are still counted: `check` reads them when the process dies
        self._watch_rss = bool(self.memory_mb) and self._cgroup is None
        if self._poll_fd is not None or self._watch_rss:
            self._start_thread()

    def watch_folder(self, folder: str) -> None:
        """Also add up ``folder`` against the disk limit (where the process could not mount its tmpfs)."""
        if self.disk_mb:
            self._folder = folder
            self._start_thread()

    def _start_thread(self) -> None:
        if self._thread is None:
            self._stop_r, self._stop_w = os.pipe()
            self._thread = threading.Thread(target=self._run, name="tree-limits", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._stop_r, select.POLLIN)
        if self._poll_fd is not None:
            poller.register(self._poll_fd, self._poll_events)
        try:
            while self.reason is None:
                ready = {fd for fd, _ in poller.poll(int(_WATCH_INTERVAL_S * 1000))}
                if self._stop_r in ready:
                    return
                if self._poll_fd in ready:
                    if self._cgroup is not None and self._cgroup.version == 1:
                        os.read(self._poll_fd, 8)  # the eventfd's count
                    if self.check() is not None:
                        return
                if self._watch_rss and self._pgid is not None \
                        and _group_rss(self._pgid) > int(self.memory_mb or 0) << 20:
                    self._exceeded(f"{self.who} memory limit of {gib(self.memory_mb or 0)} exceeded")
                if self._folder is not None and self.disk_mb:
                    used, entries = _folder_usage(self._folder)
                    if used > int(self.disk_mb) << 20 or entries > int(self.disk_mb) * DISK_INODES_PER_MB:
                        self._exceeded(f"{self.who} disk limit of {gib(self.disk_mb)} exceeded "
                                       f"({used >> 20} MiB in {entries} files and folders)")
        finally:
            for fd in self._closers:
                os.close(fd)
            self._closers = []

    def check(self) -> str | None:
        """The reason a limit ended the tree, reading the cgroup's OOM count (None: no limit was crossed)."""
        if self.reason is None and self._cgroup is not None and self._cgroup.oom_kills() > self._oom_before:
            self._exceeded(f"{self.who} memory limit of {gib(self.memory_mb or 0)} exceeded")
        return self.reason

    def _exceeded(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.kill()

    def kill(self) -> None:
        """SIGKILL every process of the tree (its process group and its cgroup)."""
        if self._pgid is not None:
            try:
                os.killpg(self._pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def close(self) -> None:
        """Stop watching; kill what is left of the tree and remove its cgroup."""
        if self._stop_w >= 0:
            os.write(self._stop_w, b"x")
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        for fd in self._closers:  # the thread never ran
            os.close(fd)
        self._closers = []
        for name in ("_stop_r", "_stop_w"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)
        if self._cgroup is not None:
            self._cgroup.kill_all()
            self._cgroup.remove()
            self._cgroup = None
