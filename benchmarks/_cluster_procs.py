"""The processes of a cluster benchmark: redis-server, agenthost replicas, nginx.

Each is a real process on a free loopback port with its files in a temp dir, and
each context manager stops what it started (SIGTERM or SIGINT, SIGKILL after a
deadline), whatever happens inside. redis-server and nginx are the tests' own
(``tests/services.py``): nginx runs the shipped ``deploy/nginx.conf`` with only its
upstream ``server`` lines and its ``listen`` line rewritten, as the cluster tests run it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# tests/services.py is the one copy of the redis-server and nginx code: import it from there.
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))

from services import (
    INSTALL,
    Nginx,
    RedisServer,
    _tail,
    _terminate,
    free_port,
    missing_services,
)

from benchmarks._harness import installed

__all__ = [
    "INSTALL",
    "Balancer",
    "RedisServer",
    "Replica",
    "children",
    "free_port",
    "missing_services",
    "replicas",
]

START_S = 30.0  # deadline for a replica to serve after its start


def _wait(
    process: subprocess.Popen[bytes], ready: Callable[[], bool], what: str, log: Path
) -> None:
    deadline = time.monotonic() + START_S
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n{_tail(log)}")
        time.sleep(0.01)


class Balancer(Nginx):
    """:class:`services.Nginx` with what the benchmark reads of it: its processes and logs."""

    def pids(self) -> list[int]:
        """The master and its workers."""
        assert self.process is not None
        return [self.process.pid, *children(self.process.pid)]

    def statuses(self) -> dict[str, int]:
        """How many answers of each HTTP status its access log holds."""
        counts: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in (self.directory / "access.log").read_text(errors="replace").splitlines():
                found = re.search(r'" (\d{3}) ', line)
                if found:
                    counts[found.group(1)] = counts.get(found.group(1), 0) + 1
        return counts

    def errors(self) -> list[str]:
        with contextlib.suppress(OSError):
            return self.error_log.read_text(errors="replace").splitlines()
        return []


@dataclass
class Replica:
    """One ``agenthost serve DIR --http ... --redis URL`` subprocess."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/mcp"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""


@contextlib.contextmanager
def replicas(directories: Sequence[Path], redis: str, *extra: str) -> Iterator[list[Replica]]:
    """A replica per directory, started at once and each serving before this yields."""
    started = [Replica(directory) for directory in directories]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        for replica in started:
            replica.log = replica.directory.parent / f"replica-{replica.port}.log"
            command = [
                sys.executable, "-m", "agenthost", "serve", str(replica.directory),
                "--http", replica.address, "--redis", redis, *extra,
            ]  # fmt: skip
            with replica.log.open("wb") as sink:
                replica.process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    env=environment,
                )
        for replica in started:
            assert replica.process is not None
            assert replica.log is not None
            _wait(
                replica.process,
                lambda r=replica: "serving MCP at" in r.output(),
                f"replica {replica.address}",
                replica.log,
            )
        yield started
    finally:
        for replica in started:  # Ctrl-C: no balancer's grace to wait out
            if replica.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    replica.process.send_signal(signal.SIGINT)
        for replica in started:
            if replica.process is not None:
                _terminate(replica.process, sig=signal.SIGINT)


def children(pid: int) -> list[int]:
    """The direct children of a process, with psutil or from /proc."""
    if installed("psutil"):
        psutil = importlib.import_module("psutil")
        return [child.pid for child in psutil.Process(pid).children()]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found
