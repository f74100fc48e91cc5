"""Worker interpreters started ahead of need, and ending the channel to one.

A spare has already imported agenthost and waits for its plugin, so a new worker
costs the plugin's own import, not an interpreter start. (multiprocessing's
fork server was tried and dropped: it re-imports the host's ``__main__`` in
every child.) The channel is a socket pair the child inherits and nothing else.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection

__all__ = ["SPARES", "Spares", "hang_up", "shut"]


class Spares:
    """Worker processes started ahead of need, agenthost already imported, waiting for a
    plugin: taking one costs a message, not an interpreter start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: list[tuple[subprocess.Popen[bytes], Connection]] = []
        self._env: dict[str, str] = {}

    def take(self, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Connection]:
        stale: list[tuple[subprocess.Popen[bytes], Connection]] = []
        with self._lock:
            if env != self._env:  # spares started for another environment are no use
                stale, self._ready, self._env = self._ready, [], env
            spare = self._ready.pop() if self._ready else None
        for process, conn in stale:
            _discard(process, conn)
        if spare is None or spare[0].poll() is not None:
            spare = _start(env)
        threading.Thread(target=self._refill, args=(env,), daemon=True).start()
        return spare

    def _refill(self, env: dict[str, str]) -> None:
        started = _start(env)
        with self._lock:
            if env == self._env and not self._ready:
                self._ready.append(started)
                return
        _discard(*started)

    def clear(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for process, conn in ready:
            _discard(process, conn)


SPARES = Spares()
atexit.register(SPARES.clear)  # spares hang up and exit with the host
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from agenthost._isolation.worker import run; run(int(sys.argv[2]))"
)


def _start(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Connection]:
    """A fresh interpreter with agenthost imported, holding only its end of the channel."""
    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, json.dumps(sys.path), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=2,  # never the host's stdout (the MCP protocol may live there)
            env=env,
            cwd=tempfile.gettempdir(),
            start_new_session=True,  # a Ctrl-C for the host is the host's to handle
        )
    finally:
        theirs.close()
    return process, Connection(ours.detach())


def shut(conn: Connection) -> None:
    """End the channel for both sides at once, even with a read in progress, without
    closing the descriptor: only the thread reading it may close it, or a new channel
    could take its number while the old reader still reads from it."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=conn.fileno())
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.detach()


def hang_up(conn: Connection) -> None:
    """End and close a channel nobody else reads."""
    shut(conn)
    conn.close()


def _discard(process: subprocess.Popen[bytes], conn: Connection) -> None:
    hang_up(conn)
    try:
        process.wait(2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
