"""Where plugins run, and the limits of the worker processes that isolate them.

A plugin asks for its own process with ``__agenthost_isolation__ = "process"``
(read from its source without running it); the host may choose for it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Literal

from agenthost._directory.scan import Source

__all__ = [
    "DEFAULT_ENV",
    "LEVELS",
    "Isolation",
    "WorkerOptions",
    "WorkerState",
    "declared_isolation",
]

Isolation = Literal["in-process", "process"]
LEVELS: tuple[Isolation, ...] = ("in-process", "process")
DEFAULT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")


@dataclass(frozen=True)
class WorkerOptions:
    """Limits and settings of every worker process.

    ``memory_mb`` (address space), ``cpu_seconds`` (CPU time, per worker
    process), ``open_files``: resource limits; ``max_output``: the largest answer
    (bytes of JSON) a call may send back; ``concurrency``: calls a worker runs at
    once; ``import_timeout``: seconds the plugin's import may take; ``env``: the
    environment variables a worker keeps (all others are removed);
    ``max_crashes``: crashes within a minute before the worker is quarantined.
    """

    memory_mb: int | None = 2048
    cpu_seconds: int | None = None
    open_files: int | None = 256
    max_output: int = 16 * 2**20
    concurrency: int = 8
    import_timeout: float = 30.0
    env: tuple[str, ...] = DEFAULT_ENV
    max_crashes: int = 5

    def limits(self) -> dict[str, int]:
        limits = {
            "RLIMIT_AS": self.memory_mb * 2**20 if self.memory_mb else None,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_NOFILE": self.open_files,
        }
        return {name: value for name, value in limits.items() if value is not None}


@dataclass
class WorkerState:
    """What ``agenthost list`` shows of an isolated plugin's worker (a live view)."""

    state: Literal["starting", "running", "stopped", "quarantined"] = "starting"
    pid: int | None = None
    calls: int = 0
    restarts: int = 0
    last_exit: str = ""
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
