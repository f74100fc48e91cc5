"""Where plugins run, and the limits of the worker processes that isolate them.

A plugin asks for its own process with ``__agenthost_isolation__ = "process"``
(read from its source without running it); the host may choose for it.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from agenthost._directory.scan import Source

__all__ = [
    "DEFAULT_ENV",
    "LEVELS",
    "SANDBOXES",
    "Isolation",
    "Sandbox",
    "WorkerOptions",
    "WorkerState",
    "declared_isolation",
]

Isolation = Literal["in-process", "process"]
LEVELS: tuple[Isolation, ...] = ("in-process", "process")
Sandbox = Literal["auto", "required", "off"]
SANDBOXES: tuple[Sandbox, ...] = ("auto", "required", "off")
DEFAULT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")


@dataclass(frozen=True)
class WorkerOptions:
    """Limits and settings of every worker process.

    Limits, all hard (a plugin cannot raise them): ``memory_mb`` (address space,
    and the cgroup's memory where the host can make one), ``cpu_seconds`` (CPU
    time), ``open_files``, ``file_size_mb`` (the largest file it may write),
    ``processes`` (processes and threads: the cgroup's pids, else a per-sandbox
    process limit), ``tmp_mb`` (its private ``/tmp``, in the sandbox).

    ``max_output``: the largest message (bytes of JSON) a worker may send;
    ``concurrency``: calls a worker runs at once; ``import_timeout``: seconds the
    plugin's import may take; ``env``: the environment variables a worker keeps
    (all others are removed); ``max_crashes``: crashes within a minute before the
    worker is quarantined.

    Sandbox: ``network`` names the plugins whose workers may use the network
    (others have none); ``user_ids`` are the uids workers run as when the host
    is root, one per worker process; ``bwrap`` is bubblewrap's path (default:
    ``AGENTHOST_BWRAP``, else ``bwrap`` on ``PATH``).
    """

    memory_mb: int | None = 2048
    cpu_seconds: int | None = None
    open_files: int | None = 256
    file_size_mb: int | None = 256
    processes: int | None = 64
    tmp_mb: int = 256
    max_output: int = 16 * 2**20
    concurrency: int = 8
    import_timeout: float = 30.0
    env: tuple[str, ...] = DEFAULT_ENV
    max_crashes: int = 5
    network: Collection[str] = ()
    user_ids: range = range(2**31, 2**31 + 2**16)
    bwrap: str | None = None

    def limits(self, *, processes: bool) -> dict[str, int]:
        """The rlimits a worker sets on itself, soft and hard; ``processes``: include
        ``RLIMIT_NPROC`` (only where it counts the worker's processes alone)."""
        limits = {
            "RLIMIT_AS": self.memory_mb * 2**20 if self.memory_mb else None,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_FSIZE": self.file_size_mb * 2**20 if self.file_size_mb else None,
            "RLIMIT_NPROC": self.processes if processes else None,
        }
        return {name: value for name, value in limits.items() if value is not None}


@dataclass
class WorkerState:
    """What ``agenthost list`` shows of an isolated plugin's worker (a live view).

    ``state`` is ``failed`` when the worker broke the protocol (``last_exit``
    says how); ``sandbox`` says what isolates it (``bwrap``, or why nothing does).
    """

    state: Literal["starting", "running", "stopped", "quarantined", "failed"] = "starting"
    pid: int | None = None
    calls: int = 0
    restarts: int = 0
    last_exit: str = ""
    sandbox: str = ""
    crashes: list[float] = field(default_factory=list, repr=False)


def declared_isolation(source: Source) -> Isolation | None:
    """The level a module or package asks for with ``__agenthost_isolation__ = "process"``.

    Read from the source text without running it: the point of asking is that
    the host should not import the plugin itself.
    """
    path = source.path / "__init__.py" if source.kind == "package" else source.path
    if source.kind not in ("module", "package"):
        return None
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(
                isinstance(t, ast.Name) and t.id == "__agenthost_isolation__" for t in node.targets
            )
            and isinstance(node.value, ast.Constant)
            and node.value.value in LEVELS
        ):
            return node.value.value
    return None
