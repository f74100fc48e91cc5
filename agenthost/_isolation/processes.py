"""Worker processes: started ahead of need, in their sandbox and cgroup, and ended whole.

A spare has already imported agenthost (and dropped to its own uid) and waits
for its plugin, so a new worker costs the plugin's own import, not an
interpreter start. (multiprocessing's fork server was tried and dropped: it
re-imports the host's ``__main__`` in every child.) Spares are kept per
:class:`Launch`, since a sandbox is made for one plugin directory and one
network setting. The channel is a socket pair the child inherits and nothing
else; its stdout and stderr are one pipe the host relays (see ``logs``).

A worker joins its cgroup before anything of it runs (a shell writes its own
pid into the cgroup, then becomes bwrap, or the worker where there is no
sandbox), so every process it ever starts is counted there. Ending a worker ends
all of it: its pid namespace (sandboxed), its cgroup's processes, and its
process group.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path

from agenthost._isolation.cgroups import Cgroup, alive, create
from agenthost._isolation.logs import RELAY, Source
from agenthost._isolation.sandbox import Layout, command, search_path
from agenthost._isolation.syscalls import filter_fd

__all__ = ["SPARES", "Launch", "Process", "hang_up", "shut"]

BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from agenthost._isolation.worker import boot; boot(int(sys.argv[2]), int(sys.argv[3]))"
)
_JOIN = (
    'for f in $AGENTHOST_CGROUP; do echo $$ > "$f" || exit 125; done; '
    'unset AGENTHOST_CGROUP; exec "$@"'
)


@dataclass(frozen=True)
class Launch:
    """How to start a worker: its environment, and its sandbox (None: a plain process).

    ``uids`` are the ids a root host gives its workers, one each; ``memory`` and
    ``pids`` are the cgroup's limits.
    """

    env: tuple[tuple[str, str], ...]
    layout: Layout | None = None
    bwrap: str = ""
    uids: range | None = None
    memory: int | None = None
    pids: int | None = None


class Process:
    """One started worker process and everything that lives and dies with it."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        conn: Connection,
        output: Source,
        *,
        files: Path | None,
        cgroup: Cgroup | None,
    ) -> None:
        self.popen, self.conn, self.output = popen, conn, output
        self.files = files  # shown to a sandboxed worker as its plugin directory
        self.cgroup = cgroup

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def sandboxed(self) -> bool:
        return self.files is not None

    def kill(self) -> None:
        """SIGKILL the worker and every process it started; returns at once."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # its session, in a plain process
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()  # bwrap: its pid namespace ends with it
        if self.cgroup is not None:
            self.cgroup.kill()

    def cleanup(self) -> None:
        """After it ended: nothing of it left running, its cgroup and files removed."""
        self.kill()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.files is not None:
            shutil.rmtree(self.files.parent, ignore_errors=True)


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


def start(launch: Launch) -> Process:
    """A fresh worker process, holding only its end of the channel and its output pipe."""
    ours, theirs = socket.socketpair()
    out_r, out_w = os.pipe()
    uid = -1 if launch.uids is None else _free_uid(launch.uids)
    env, files, seccomp = dict(launch.env), None, None
    if launch.layout is None:
        argv = _boot([p for p in sys.path if os.path.isabs(p)], theirs.fileno(), uid)
    else:
        argv, files, seccomp = _sandboxed(launch, launch.layout, theirs.fileno(), uid)
        env = {}  # bwrap sets the worker's own
    cgroup = create(launch.memory, launch.pids)
    if cgroup is not None:
        argv = ["/bin/sh", "-c", _JOIN, "agenthost-worker", *argv]
        env = {**env, "AGENTHOST_CGROUP": " ".join(cgroup.procs)}
    try:
        popen = subprocess.Popen(
            argv,
            pass_fds=[theirs.fileno(), *([] if seccomp is None else [seccomp])],
            stdin=subprocess.DEVNULL,
            stdout=out_w,  # never the host's stdout (the MCP protocol may live there)
            stderr=out_w,
            env=env,
            cwd=tempfile.gettempdir(),
            start_new_session=True,  # a Ctrl-C for the host is the host's to handle
        )
    except BaseException:
        for fd in (out_r, out_w):
            os.close(fd)
        ours.close()
        if cgroup is not None:
            cgroup.remove()
        raise
    finally:
        theirs.close()
        if seccomp is not None:
            os.close(seccomp)
    os.close(out_w)
    output = RELAY.attach(out_r, f"worker {popen.pid}")
    return Process(popen, Connection(ours.detach()), output, files=files, cgroup=cgroup)


def _boot(search: list[str], fd: int, uid: int) -> list[str]:
    return [sys.executable, "-I", "-c", BOOT, json.dumps(search), str(fd), str(uid)]


def _sandboxed(
    launch: Launch, layout: Layout, fd: int, uid: int
) -> tuple[list[str], Path, int | None]:
    """The bwrap command of a worker, the folder its plugin version goes in, and the
    descriptor of its system call filter. As root, setpriv gives the worker its own uid
    (and an empty capability bounding set) before any Python runs."""
    scratch = Path(tempfile.mkdtemp(prefix="worker-", dir=_private_dir()))
    files = scratch / "plugin"
    files.mkdir()
    files.chmod(0o755)  # the root of what the worker sees as its plugin directory
    drop = _setpriv(uid) if uid >= 0 else []
    argv = [*drop, *_boot(search_path(layout.directory), fd, -1 if drop else uid)]
    seccomp = filter_fd()
    layout = replace(layout, files=files)
    argv = command(launch.bwrap, layout, argv, dict(launch.env), root=uid >= 0, seccomp=seccomp)
    return argv, files, seccomp


def _setpriv(uid: int) -> list[str]:
    """util-linux's setpriv, from ``/usr`` (bound into the sandbox), changing to ``uid``;
    without it the worker drops its uid itself, first thing (see ``worker.boot``)."""
    found = shutil.which("setpriv")
    path = os.path.realpath(found) if found else ""
    if not path.startswith("/usr/"):
        return []
    return [path, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--"]  # fmt: skip


def discard(process: Process) -> None:
    """End a spare nobody needs: hang up (it exits), then make sure."""
    hang_up(process.conn)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.popen.wait(2)
    process.cleanup()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.popen.wait(5)


class Spares:
    """Processes started ahead of need, one waiting per way of launching; taking one
    costs a message, not an interpreter start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[Launch, Process] = {}

    def take(self, launch: Launch) -> Process:
        with self._lock:
            spare = self._ready.pop(launch, None)
        if spare is None or spare.popen.poll() is not None:
            if spare is not None:
                discard(spare)
            spare = start(launch)
        threading.Thread(target=self._refill, args=(launch,), daemon=True).start()
        return spare

    def _refill(self, launch: Launch) -> None:
        started = start(launch)
        with self._lock:
            if launch not in self._ready and len(self._ready) < 8:
                self._ready[launch] = started
                return
        discard(started)

    def release(self, directory: Path | None) -> None:
        """Discard the spares made for ``directory`` (its host stopped); None: all of them."""
        with self._lock:
            gone = [
                launch
                for launch in self._ready
                if directory is None
                or (launch.layout is not None and launch.layout.directory == directory)
            ]
            spares = [self._ready.pop(launch) for launch in gone]
        for spare in spares:
            discard(spare)


_uid_slots = itertools.count(random.randrange(2**16))  # another host starts elsewhere


def _free_uid(uids: range) -> int:
    """The next uid of the range that no process on the machine has now (another host's
    workers count: a process limit counts per uid), or the next one if all are taken."""
    taken = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError):
                    taken.add(os.stat(f"/proc/{name}").st_uid)
    first = uids[next(_uid_slots) % len(uids)]
    uid = first
    for _ in range(min(len(uids), 1000)):
        if uid not in taken:
            return uid
        uid = uids[next(_uid_slots) % len(uids)]
    return first


SPARES = Spares()
atexit.register(SPARES.release, None)  # spares hang up and exit with the host


def _private_dir() -> str:
    """A folder only the host can enter, for the files it shows its workers."""
    global _PRIVATE
    with _PRIVATE_LOCK:
        if _PRIVATE is None or not os.path.isdir(_PRIVATE):
            _sweep(Path(tempfile.gettempdir()))
            _PRIVATE = tempfile.mkdtemp(prefix=f"agenthost-{os.getpid()}-")
            atexit.register(shutil.rmtree, _PRIVATE, True)
        return _PRIVATE


def _sweep(temp: Path) -> None:
    """Remove the folders of this user's hosts that were killed (no atexit ran for them)."""
    with contextlib.suppress(OSError):
        for path in temp.iterdir():
            found = _LEFT.fullmatch(path.name)
            if found and not alive(int(found[1])) and path.lstat().st_uid == os.geteuid():
                shutil.rmtree(path, ignore_errors=True)


_LEFT = re.compile(r"agenthost-(\d+)-[a-z0-9_]{8}")


_PRIVATE: str | None = None
_PRIVATE_LOCK = threading.Lock()
