"""A cgroup per worker: memory and process limits the kernel enforces on all its processes.

A worker's cgroup is a child of the host's own, made where the host may make
one (as root, or in a delegated subtree): cgroup v2 where the memory and pids
controllers are enabled for children, else the v1 memory and pids hierarchies.
The memory limit counts what the worker's processes really use (and what they
write to their ``/tmp``), where the address-space rlimit only counts what they
reserve; the pids limit counts every process and thread of the worker, however
it was started. Where no cgroup can be made, the rlimits are the only limits.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cgroup", "alive", "create"]

_names = itertools.count(1)


@dataclass(frozen=True)
class Cgroup:
    """One worker's cgroup: a directory (v2), or one per controller (v1)."""

    paths: tuple[Path, ...]
    version: int

    @property
    def procs(self) -> list[str]:
        """The files a process joins by writing its pid."""
        return [str(path / "cgroup.procs") for path in self.paths]

    def remove(self) -> None:
        """Kill whatever still runs in it, then remove it (retried while processes end)."""
        for attempt in range(50):
            if not self.kill():
                break
            time.sleep(0.01 * min(attempt + 1, 10))
        for path in self.paths:
            with contextlib.suppress(OSError):
                path.rmdir()

    def kill(self) -> bool:
        """SIGKILL every process in the cgroup; whether any was left to kill."""
        left = False
        for path in self.paths:
            if self.version == 2 and (path / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    left |= bool((path / "cgroup.procs").read_text().split())
                    (path / "cgroup.kill").write_text("1")
                continue
            with contextlib.suppress(OSError):
                for pid in (path / "cgroup.procs").read_text().split():
                    left = True
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)
        return left


def create(memory_bytes: int | None, pids: int | None) -> Cgroup | None:
    """A new cgroup with these limits under the host's own, or None where none can be made."""
    if memory_bytes is None and pids is None:
        return None
    name = f"agenthost-worker-{os.getpid()}-{next(_names)}"
    _sweep()
    return _create_v2(name, memory_bytes, pids) or _create_v1(name, memory_bytes, pids)


@functools.cache
def _sweep() -> None:
    """Remove the cgroups a host that was killed left behind (its workers died with it;
    their empty cgroups did not), once per host, before making the first of its own."""
    bases = [_own("cgroup2", None), _own("cgroup", "memory"), _own("cgroup", "pids")]
    for base in filter(None, bases):
        with contextlib.suppress(OSError):
            for path in base.iterdir():
                found = _LEFT.fullmatch(path.name)
                if found and not alive(int(found[1])):
                    Cgroup((path,), 2 if base == bases[0] else 1).remove()


_LEFT = re.compile(r"agenthost-worker-(\d+)-\d+")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _create_v2(name: str, memory_bytes: int | None, pids: int | None) -> Cgroup | None:
    base = _own("cgroup2", None)
    if base is None:
        return None
    wanted = {c for c, limit in (("memory", memory_bytes), ("pids", pids)) if limit is not None}
    try:
        enabled = set((base / "cgroup.subtree_control").read_text().split())
        if not wanted <= enabled:  # only possible where the host's cgroup holds no process
            (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
        path = base / name
        path.mkdir()
    except OSError:
        return None
    try:
        if memory_bytes is not None:
            (path / "memory.max").write_text(str(memory_bytes))
            (path / "memory.swap.max").write_text("0")
        if pids is not None:
            (path / "pids.max").write_text(str(pids))
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return Cgroup((path,), 2)


def _create_v1(name: str, memory_bytes: int | None, pids: int | None) -> Cgroup | None:
    made: list[Path] = []
    try:
        for controller, limit in (("memory", memory_bytes), ("pids", pids)):
            if limit is None:
                continue
            base = _own("cgroup", controller)
            if base is None:
                raise OSError(f"no {controller} hierarchy")
            path = base / name
            path.mkdir()
            made.append(path)
            if controller == "pids":
                (path / "pids.max").write_text(str(limit))
                continue
            (path / "memory.limit_in_bytes").write_text(str(limit))
            swap = path / "memory.memsw.limit_in_bytes"
            if swap.exists():  # no swapping beyond the limit either
                swap.write_text(str(limit))
    except OSError:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()
        return None
    return Cgroup(tuple(made), 1)


def _own(fstype: str, controller: str | None) -> Path | None:
    """The directory of the host's own cgroup in the hierarchy of ``fstype`` (v1: the one
    holding ``controller``), or None."""
    mount = _mount(fstype, controller)
    if mount is None:
        return None
    point, root = mount
    for line in _read("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        listed = controllers.split(",")
        if (fstype == "cgroup2" and controllers == "") or (controller in listed):
            relative = os.path.relpath(path, root) if path.startswith(root) else path
            return (Path(point) / relative.lstrip("/")).resolve()
    return None


def _mount(fstype: str, controller: str | None) -> tuple[str, str] | None:
    """(mount point, root) of the cgroup hierarchy of that type (and controller)."""
    for line in _read("/proc/self/mountinfo").splitlines():
        fields = line.split()
        dash = fields.index("-")
        kind, options = fields[dash + 1], fields[dash + 3].split(",")
        if kind == fstype and (controller is None or controller in options):
            return fields[4], fields[3]
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""
