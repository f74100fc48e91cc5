"""Real Redis and real nginx for tests: started on free loopback ports, in temp dirs, always stopped.

The cluster tests need the real services: a fake Redis or a Python proxy would not show
how a replica copes with Redis going away, nor how nginx retries or buffers. Nginx runs
the shipped ``deploy/nginx.conf`` itself, with only its upstream ``server`` lines and its
``listen`` line rewritten, so the tests check the config users deploy.

Register the fixtures from ``conftest.py`` with ``pytest_plugins = ["services"]``.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

import pytest

DEPLOY_CONF = Path(__file__).resolve().parent.parent / "deploy" / "nginx.conf"
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")  # nginx lives here, often off a user's PATH
INSTALL = "apt-get install -y redis-server nginx"
START_S = 10.0  # deadline for a service to answer after start
STOP_S = 10.0  # deadline for a service to exit after SIGTERM, before SIGKILL


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_binary(name: str) -> str | None:
    """``name`` on PATH, else in the sbin directories (Debian puts nginx in /usr/sbin)."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN_DIRS))


def in_ci() -> bool:
    """Whether ``CI`` is set to a truthy value (``.ci/run`` exports ``CI=1``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def missing_services(*names: str) -> list[str]:
    """Which of ``names`` (by default redis-server and nginx) :func:`find_binary` cannot find."""
    return [name for name in names or ("redis-server", "nginx") if find_binary(name) is None]


def need_services(*names: str) -> None:
    """Skip the test when a service binary is missing, but fail it under CI.

    A developer without Redis or nginx still gets a green run of everything else; CI
    must not pass by skipping the cluster tests.
    """
    missing = missing_services(*names)
    if not missing:
        return
    what = " and ".join(missing)
    if in_ci():
        pytest.fail(f"{what} not found and CI is set: {INSTALL} (.ci/run does)", pytrace=False)
    pytest.skip(f"needs {what}: {INSTALL}")


def _accepts(port: int) -> bool:
    """Whether something accepts connections on ``127.0.0.1:port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _pongs(port: int) -> bool:
    """Whether a Redis on ``127.0.0.1:port`` answers PING (it may accept before it serves)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _tail(path: Path, limit: int = 4000) -> str:
    """The end of a log file, or a note that there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no {path.name})"
    return text[-limit:] or f"({path.name} is empty)"


def _terminate(
    process: subprocess.Popen[bytes] | None, group: bool = False, sig: int = signal.SIGTERM
) -> None:
    """Signal ``process`` by pid (SIGTERM unless ``sig`` says otherwise) and wait; SIGKILL it
    (its group too) after the deadline."""
    if process is None or process.poll() is not None:
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


class RedisServer:
    """A ``redis-server`` on a fixed loopback port, restartable on that same port.

    Nothing is persisted (no RDB, no AOF) and nothing is written outside ``directory``:
    a restart starts empty, like a Redis that lost its memory.
    """

    def __init__(self, directory: Path, port: int | None = None) -> None:
        binary = find_binary("redis-server")
        if binary is None:
            raise FileNotFoundError(f"redis-server not found: {INSTALL}")
        self.binary = binary
        self.directory = directory
        self.port = port if port is not None else free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = directory / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and wait until it answers PING, so a test never races its start."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"redis-server already running on port {self.port}")
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--daemonize", "no",
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_S
        while not _pongs(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"redis-server did not answer on port {self.port}:\n{_tail(self.log)}"
                )
            time.sleep(0.01)

    def stop(self) -> None:
        """SIGTERM and wait, so the port is free for :meth:`start` again."""
        _terminate(self.process)

    def kill(self) -> None:
        """SIGKILL and wait: Redis dies without closing anything gracefully."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_S)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def nginx_config(upstreams: Sequence[str], port: int, source: Path = DEPLOY_CONF) -> str:
    """``source`` with its upstream servers replaced by ``upstreams`` and listening on
    ``127.0.0.1:port``; every other line stays as shipped.

    Each new ``server`` line keeps the parameters of the first shipped one
    (``max_fails``, ``fail_timeout``), so the tests run the shipped failover settings.
    """
    if not upstreams:
        raise ValueError("nginx needs at least one upstream")
    text = source.read_text()
    servers = list(re.finditer(r"^([ \t]*)server[ \t]+\S+:\d+([^;\n]*);[ \t]*\n", text, re.M))
    listens = list(re.finditer(r"^([ \t]*)listen[ \t]+[^;\n]+;", text, re.M))
    if not servers or len(listens) != 1:
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


class Nginx:
    """nginx running ``deploy/nginx.conf`` in front of ``upstreams`` ("127.0.0.1:PORT").

    ``directory`` is its prefix: config, pid, logs and temp files all live there. ``port``
    is a free one unless given (to name it to the upstreams before nginx starts).
    """

    def __init__(self, upstreams: Sequence[str], directory: Path, port: int | None = None) -> None:
        binary = find_binary("nginx")
        if binary is None:
            raise FileNotFoundError(f"nginx not found: {INSTALL}")
        self.binary = binary
        self.upstreams = list(upstreams)
        self.directory = directory
        self.port = port if port is not None else free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = directory / "nginx.conf"
        self.error_log = directory / "error.log"  # as the shipped config names it
        self.output = directory / "stderr.log"
        self.process: subprocess.Popen[bytes] | None = None

    def command(self, *extra: str) -> list[str]:
        """The nginx command line for this prefix and config, plus ``extra`` options."""
        directives = "daemon off;"  # in the foreground: its pid is ours to signal and wait on
        if os.geteuid() == 0:
            # Workers run as the test's user rather than nginx's "nobody", who could not
            # enter pytest's private temp dirs.
            user = pwd.getpwuid(os.geteuid()).pw_name
            group = grp.getgrgid(os.getegid()).gr_name
            directives += f" user {user} {group};"
        # -e: the log nginx writes before it reads the config is stderr, never /var/log.
        return [
            self.binary,
            "-p", f"{self.directory}/",
            "-c", str(self.config),
            "-e", "stderr",
            "-g", directives,
            *extra,
        ]  # fmt: skip

    def start(self) -> None:
        """Start it and wait until its port accepts; raise with its error log if it cannot."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"nginx already running on port {self.port}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config.write_text(nginx_config(self.upstreams, self.port))
        with self.output.open("ab") as output:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a process group, to SIGKILL workers a stuck master left
            )
        deadline = time.monotonic() + START_S
        while not _accepts(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"nginx did not listen on port {self.port}:\n"
                    f"{_tail(self.error_log)}\n{_tail(self.output)}"
                )
            time.sleep(0.01)

    def stop(self) -> None:
        """Fast shutdown (SIGTERM to the master, which stops its workers) and wait."""
        _terminate(self.process, group=True)

    def __enter__(self) -> Nginx:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A started Redis of this test's own, stopped at teardown whatever happened."""
    need_services("redis-server")
    server = RedisServer(tmp_path / "redis")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def nginx_for(tmp_path: Path) -> Iterator[Callable[[Sequence[str]], Nginx]]:
    """Start nginx with the shipped config in front of given upstreams; all stopped at teardown."""
    need_services("nginx")
    started: list[Nginx] = []

    def make(upstreams: Sequence[str]) -> Nginx:
        nginx = Nginx(upstreams, tmp_path / f"nginx{len(started)}")
        started.append(nginx)  # before start: a half-started one is stopped too
        nginx.start()
        return nginx

    try:
        yield make
    finally:
        for nginx in reversed(started):
            nginx.stop()
