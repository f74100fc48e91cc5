"""The processes of a cluster benchmark: redis-server, agenthost replicas, nginx.

Each is a real process on a free loopback port with its files in a temp dir, and
each context manager stops what it started (SIGTERM or SIGINT, SIGKILL after a
deadline), whatever happens inside. nginx runs the shipped ``deploy/nginx.conf``
with only its upstream ``server`` lines and its ``listen`` line rewritten, as the
cluster tests run it (``tests/services.py``, not imported: benchmarks stand alone).
"""

from __future__ import annotations

import contextlib
import grp
import importlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._harness import installed

DEPLOY_CONF = Path(__file__).resolve().parent.parent / "deploy" / "nginx.conf"
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")  # nginx lives here, often off a user's PATH
INSTALL = "apt-get install -y redis-server nginx"
START_S = 30.0  # deadline for a process to answer after its start
STOP_S = 10.0  # deadline for a process to exit after its signal, before SIGKILL


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_binary(name: str) -> str | None:
    """``name`` on PATH, else in the sbin directories (Debian puts nginx in /usr/sbin)."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN_DIRS))


def missing_binaries() -> list[str]:
    return [name for name in ("redis-server", "nginx") if find_binary(name) is None]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _pongs(port: int) -> bool:
    """Whether a Redis answers PING (it may accept before it serves)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return f"(no {path.name})"


def _stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, group: bool = False) -> None:
    """Signal ``process`` by its pid and wait; SIGKILL it (its group too) after the deadline."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)
    try:
        process.wait(STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        process.wait(STOP_S)


def _wait(
    process: subprocess.Popen[bytes], ready: Callable[[], bool], what: str, log: Path
) -> None:
    deadline = time.monotonic() + START_S
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n{_tail(log)}")
        time.sleep(0.01)


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[tuple[str, int]]:
    """A redis-server persisting nothing; its URL and pid."""
    directory.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), directory / "redis.log"
    command = [
        find_binary("redis-server") or "redis-server",
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(directory),
        "--daemonize", "no",
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        _wait(process, lambda: _pongs(port), "redis-server", log)
        yield f"redis://127.0.0.1:{port}/0", process.pid
    finally:
        _stop(process)


def nginx_config(upstreams: Sequence[str], port: int, source: Path = DEPLOY_CONF) -> str:
    """``source`` with its upstream servers replaced by ``upstreams`` (each keeping the
    first shipped line's parameters) and listening on ``127.0.0.1:port``; every other
    line as shipped."""
    text = source.read_text()
    servers = list(re.finditer(r"^([ \t]*)server[ \t]+\S+:\d+([^;\n]*);[ \t]*\n", text, re.M))
    listens = list(re.finditer(r"^([ \t]*)listen[ \t]+[^;\n]+;", text, re.M))
    if not upstreams or not servers or len(listens) != 1:
        raise ValueError(f"{source}: expected upstream server lines and one listen line")
    indent, parameters = servers[0].group(1), servers[0].group(2)
    lines = "".join(f"{indent}server {address}{parameters};\n" for address in upstreams)
    start, end = servers[0].start(), servers[-1].end()
    if text[start:end].count(";") != len(servers):
        raise ValueError(f"{source}: the upstream server lines must be consecutive")
    text = text[:start] + lines + text[end:]
    return re.sub(
        r"^([ \t]*)listen[ \t]+[^;\n]+;", rf"\1listen 127.0.0.1:{port};", text, flags=re.M
    )


@dataclass
class Nginx:
    """A running nginx: its port, master pid and prefix directory (logs live there)."""

    port: int
    pid: int
    directory: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def pids(self) -> list[int]:
        """The master and its workers."""
        return [self.pid, *children(self.pid)]

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
            return (self.directory / "error.log").read_text(errors="replace").splitlines()
        return []


@contextlib.contextmanager
def nginx(upstreams: Sequence[str], directory: Path, port: int | None = None) -> Iterator[Nginx]:
    """nginx running deploy/nginx.conf in front of ``upstreams`` ("127.0.0.1:PORT")."""
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    config, output = directory / "nginx.conf", directory / "stderr.log"
    config.write_text(nginx_config(upstreams, port))
    directives = "daemon off;"  # in the foreground: its pid is ours to signal and wait on
    if os.geteuid() == 0:  # workers as this user, not "nobody" who cannot enter the temp dir
        user = pwd.getpwuid(os.geteuid()).pw_name
        directives += f" user {user} {grp.getgrgid(os.getegid()).gr_name};"
    command = [
        find_binary("nginx") or "nginx",
        "-p", f"{directory}/",
        "-c", str(config),
        "-e", "stderr",
        "-g", directives,
    ]  # fmt: skip
    with output.open("wb") as sink:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group, to SIGKILL workers a stuck master left
        )
    try:
        _wait(process, lambda: _accepts(port), "nginx", output)
        yield Nginx(port, process.pid, directory)
    finally:
        _stop(process, group=True)


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
                _stop(replica.process, signal.SIGINT)


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
