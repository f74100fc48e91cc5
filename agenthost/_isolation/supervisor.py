"""The host's side of a worker process: start it, route calls to it, restart or stop it.

A :class:`Supervisor` owns the worker of one plugin version. Calls go out as
JSON; one reader thread per process reads what comes back and checks all of it
(see ``protocol``). A call whose caller gives up (a timeout) kills the process
and everything it started, and the next call starts a fresh one. A crash ends
the calls it was running with an error; a worker that keeps crashing is
quarantined, and one that breaks the protocol is stopped and its plugin marked
failed, each until the plugin's files change. A stream's output is delivered
only as fast as its reader takes it: the worker may send a window ahead, then
waits for the host's credit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from loguru import logger

from agenthost._authoring.context import current_context
from agenthost._calls.boundary import Relayed
from agenthost._calls.results import Prerendered
from agenthost._directory.scan import Source
from agenthost._isolation.options import WorkerOptions, WorkerState
from agenthost._isolation.processes import SPARES, Launch, Process, hang_up, shut
from agenthost._isolation.protocol import (
    STREAM_WINDOW,
    Frame,
    Hello,
    ProtocolError,
    answer,
    hello,
    read,
)

__all__ = ["RemoteError", "Supervisor", "WorkerGone"]

_RETIRED = (
    "the plugin version was unloaded (replaced or stopped) before the call reached its "
    "worker; a new call reaches the current version, if there is one"
)
_REPEATS_SHOWN = 3  # of a frame that repeats (a recursion), as Python shows it
_RESTART_WINDOW = 60.0  # seconds in which crashes are counted
_SEND_TIMEOUT = 2.0  # seconds a send may wait for a worker that does not read its channel
_BACKLOG_LIMIT = 4 * 2**20  # bytes waiting for a worker that reads, but too slowly
_SIGNALS = {
    signal.SIGKILL: "was killed (at its memory or CPU time limit, or by someone else)",
    signal.SIGSEGV: "crashed (segmentation fault)",
    signal.SIGXCPU: "used up its CPU time limit",
    signal.SIGABRT: "aborted",
    signal.SIGBUS: "crashed (bus error)",
    signal.SIGSYS: "made a system call its sandbox forbids (through another architecture's ABI)",
}


class RemoteError(Relayed):
    """An exception a tool raised inside its worker: ``Type: message``, and its frames."""


def _remote_error(kind: str, text: str, frames: tuple[Frame, ...], omitted: int) -> RemoteError:
    """The worker's account of what its tool raised, told as the in-process path tells it
    (a limit the worker reached is a sentence of its own, with no frames)."""
    message = f"{kind}: {text}" if text else kind
    if not frames:
        return RemoteError(message, kind)
    shown = _shown(frames[:1])
    if omitted:
        shown.append(f"  ... {omitted} frames left out ...\n")
    shown += _shown(frames[1:])
    last = message.replace("\n", "\n  ")  # a line of the message starts no line of the host's
    trace = "".join(["Traceback (most recent call last):\n", *shown, last])
    return RemoteError(message, kind, trace)


def _shown(frames: tuple[Frame, ...]) -> list[str]:
    """The frames as Python shows them, a recursion's repeats counted: only from what the
    worker sent (``traceback``'s own formatter would read source files here, in the host,
    at the path a worker names)."""
    shown: list[str] = []
    previous, count = None, 0
    for frame in frames:
        where = (frame.file, frame.line, frame.function)
        if where != previous:
            shown += _repeated(count)
            previous, count = where, 0
        count += 1
        if count <= _REPEATS_SHOWN:
            source = f"    {frame.source}\n" if frame.source else ""
            shown.append(f'  File "{frame.file}", line {frame.line}, in {frame.function}\n{source}')
    return shown + _repeated(count)


def _repeated(count: int) -> list[str]:
    more = count - _REPEATS_SHOWN
    return [f"  [Previous line repeated {more} more time{'s' if more > 1 else ''}]\n"] * (more > 0)


class WorkerGone(Relayed):
    """The worker ended (or was stopped, quarantined, retired) before the call's answer:
    a sentence saying what happened and what comes next, and no traceback."""


class _Run:
    """One process of a worker, and everything that lives and dies with it."""

    def __init__(self, process: Process, cwd: str | None) -> None:
        self.process, self.conn, self.cwd = process, process.conn, cwd
        self.loaded = threading.Event()
        self.hello: Hello | None = None
        self.pending: dict[int, _Pending] = {}
        self.abandoned: set[int] = set()  # calls given up on: their answers may still come
        self.stopping = ""  # why the host stops this process, if it does
        self.broken = ""  # how it broke the protocol, if it did
        self.reader: threading.Thread | None = None
        self.stuck: Callable[[str], None] = lambda why: None  # stop it: it does not read
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closed = False
        self._backlog: list[bytes] = []  # frames waiting for the worker to read
        self._writing = False  # a writer thread owns the backlog
        self._backlog_bytes = 0
        self._overflowed = False
        self._waiters: list[_Pending] = []
        with _attached(self.conn) as sock:  # the writer's waits are bounded
            seconds = struct.pack("ll", int(_SEND_TIMEOUT), 0)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, seconds)

    @property
    def ready(self) -> bool:
        return self.loaded.is_set() and self.hello is not None and self.hello.loaded is not None

    def send(self, message: Mapping[str, Any]) -> None:
        """Send without waiting: what the channel cannot take now, a writer thread sends
        (the caller's event loop must not stall on a worker that stops reading); the
        writer gives up on it after ``_SEND_TIMEOUT``. ``OSError`` if the channel closed."""
        data = json.dumps(message, default=str).encode()
        frame = struct.pack("!i", len(data)) + data  # multiprocessing's framing
        with self._send_lock:
            if self._closed:
                raise OSError("the worker's channel is closed")
            if not self._writing:
                with _attached(self.conn) as sock:
                    try:
                        sent = sock.send(frame, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        sent = 0
                if sent == len(frame):
                    return
                frame, self._writing = frame[sent:], True
                threading.Thread(target=self._write, name="agenthost-worker-writer",
                                 daemon=True).start()  # fmt: skip
            self._backlog.append(frame)
            self._backlog_bytes += len(frame)
            waiting = self._backlog_bytes - len(self._backlog[0])  # one large call may wait
            if waiting > _BACKLOG_LIMIT and not self._overflowed:
                self._overflowed = True  # it reads far less than the host sends it: stop it
                why = "it reads its channel far slower than the host writes to it"
                threading.Thread(target=self.stuck, args=(why,), daemon=True).start()

    def _write(self) -> None:
        with self._send_lock:  # a descriptor of its own: the reader may close the channel's
            sock = socket.socket(fileno=os.dup(self.conn.fileno()))
        with sock:
            while True:
                with self._send_lock:
                    chunk, self._backlog = b"".join(self._backlog), []
                    self._backlog_bytes = 0
                    if not chunk:
                        self._writing = False
                        return
                try:
                    sock.sendall(chunk)
                except BlockingIOError:  # waited _SEND_TIMEOUT and it read nothing
                    break
                except OSError:
                    return  # the channel ended
        self.stuck("it stopped reading its channel")

    def close(self) -> None:
        """Close the channel; a send after this raises ``OSError``."""
        with self._send_lock:
            self._closed = True
            self._backlog = []
            hang_up(self.conn)

    def until_loaded(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any] | None:
        """A future on ``loop`` for the first message (None if it came already)."""
        with self._lock:
            if self.loaded.is_set():
                return None
            waiter = _Pending(loop, None, False)
            self._waiters.append(waiter)
            return waiter.future

    def mark_loaded(self) -> None:
        """The first message came (or the process ended): wake whoever waits for it."""
        with self._lock:
            self.loaded.set()
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.finish(("done", None))


@contextlib.contextmanager
def _attached(conn: Connection) -> Iterator[socket.socket]:
    """The channel as a socket, for as long as the caller holds its send lock."""
    sock = socket.socket(fileno=conn.fileno())
    try:
        yield sock
    finally:
        sock.detach()


class Supervisor:
    """The worker process of one plugin version, replaced when it dies.

    ``files`` is the version the host read (shown to a sandboxed worker as its
    plugin); ``expected`` is the plugin name its hello must give; ``on_change``
    is told when the worker's state changes what ``plugins()`` shows.
    """

    def __init__(
        self,
        source: Source,
        options: WorkerOptions,
        launch: Launch,
        *,
        files: Mapping[Path, bytes],
        expected: str,
        config: Mapping[str, Any],
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.source, self.options, self._launch = source, options, launch
        self._files, self._expected, self._config = files, expected, dict(config)
        self._on_change = on_change
        self.status = WorkerState(sandbox="bwrap" if launch.layout is not None else "none")
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._ids = itertools.count(1)
        self._closed = False

    # --- life ----------------------------------------------------------------------------------
    def start(self) -> Hello | str:
        """Start the process and wait for its hello; what went wrong instead, as text."""
        with self._lock:
            run = self._spawn()
        if not run.loaded.wait(self.options.import_timeout):
            self._stop_run(run, "its import took longer than the limit")
            limit = self.options.import_timeout
            return (
                f"the plugin's import did not finish within {limit:g} s; worker stopped "
                "(more time: --import-timeout or WorkerOptions.import_timeout)"
            )
        if run.hello is None:
            return f"the worker {self.status.last_exit or 'ended'} before it loaded the plugin"
        return run.hello

    def _spawn(self) -> _Run:
        """A new process for this worker (call with the lock held)."""
        self.status.state = "starting"
        process = SPARES.take(self._launch)
        cwd = None
        config = dict(self._config)
        if process.files is not None:
            _write(process.files, self.source.path.parent, self._files)
            config.update(cwd="/tmp/agenthost-worker-cwd", cache_dir="/tmp/agenthost-cache")
        else:
            cwd = config["cwd"] = tempfile.mkdtemp(prefix="agenthost-worker-")
        process.output.label = f"{self._expected} worker {process.pid}"
        run = self._run = _Run(process, cwd)
        run.stuck = functools.partial(self._stop_run, run)
        self.status.pid = process.pid
        run.send(config)
        run.reader = threading.Thread(
            target=self._read, args=(run,), name="agenthost-worker-reader", daemon=True
        )
        run.reader.start()
        return run

    def stop(self) -> None:
        """Hang up; the worker retires its plugin and exits (killed if it does not)."""
        with self._lock:
            self._closed = True
            if self.status.state not in ("quarantined", "failed"):
                self.status.state = "stopped"
            run, self._run = self._run, None
        if run is None:
            return
        shut(run.conn)  # the reader sees the end, waits for the exit and cleans up
        with contextlib.suppress(Exception):
            run.process.popen.wait(2)
        run.process.kill()
        if run.reader is not None and run.reader is not threading.current_thread():
            run.reader.join(5)

    def _detach(self, run: _Run, reason: str) -> bool:
        """Stop routing calls to ``run`` (the next call starts a fresh process)."""
        with self._lock:
            if self._run is not run:
                return False
            self._run = None
            run.stopping = reason
            self.status.state, self.status.last_exit = "stopped", f"was stopped ({reason})"
            return True

    def _stop_run(self, run: _Run, reason: str) -> None:
        """Stop ``run`` on purpose (not a crash): kill all of it; returns once it is gone."""
        self._detach(run, reason)
        if run.process.popen.poll() is None:
            logger.warning("stopping worker {} of {}: {}", run.process.pid, self.source.key, reason)
        run.process.kill()
        shut(run.conn)
        if run.reader is not None and run.reader is not threading.current_thread():
            run.reader.join(5)

    # --- the channel ---------------------------------------------------------------------------
    def _read(self, run: _Run) -> None:
        popen = run.process.popen
        frame_limit = self.options.max_output  # the worker keeps 64 kB of it for the envelope
        reason = ""
        try:
            while True:
                if not run.conn.poll(0.25):
                    if popen.poll() is not None:
                        break  # it ended, and something it started still holds the channel
                    continue
                frame = run.conn.recv_bytes(frame_limit)
                self._received(run, read(frame), len(frame))
        except (EOFError, OSError) as exc:
            if isinstance(exc, OSError) and "bad message length" in str(exc):
                run.broken = f"sent a message over the {self.options.max_output:,}-byte limit"
        except ProtocolError as exc:
            run.broken = str(exc)
        except Exception as exc:  # noqa: BLE001 - whatever a hostile worker sends ends it
            run.broken = f"sent a message the host cannot use ({type(exc).__name__})"
        if run.broken:
            reason = f"broke the protocol: it {run.broken}"
            logger.error("worker {} of {} {}", popen.pid, self.source.key, reason)
            run.process.kill()
        try:
            popen.wait(0.5 if run.stopping or run.broken else 5)
        except Exception:  # noqa: BLE001 - hung up but still running: make sure
            run.process.kill()
            popen.wait(5)
        self._ended(run, reason or _exit_reason(popen.returncode, run.process.sandboxed))

    def _received(self, run: _Run, message: dict[str, Any], size: int) -> None:
        if run.hello is None and not run.loaded.is_set():
            run.hello = hello(message, self._expected)
            if self._run is run:
                self.status.state = "running" if run.hello.loaded is not None else "stopped"
            run.mark_loaded()
            return
        kind, cid, payload = answer(message)
        pending = run.pending.get(cid)
        if pending is None:
            if cid in run.abandoned:
                return  # a call the host gave up on, a moment before the worker was stopped
            raise ProtocolError("answered a call the host never made")
        if kind == "delta":
            if not payload:
                raise ProtocolError("sent an empty stream message")
            if not pending.streams:
                raise ProtocolError("streamed output from a tool that does not stream")
            pending.streamed += len(payload)
            if pending.streamed - pending.credited > STREAM_WINDOW:
                raise ProtocolError("streamed more output than its reader allowed")
            pending.stream(payload, functools.partial(self._credit, run, cid, pending))
            return
        run.pending.pop(cid, None)
        pending.finish((kind, (*payload, size)))

    def _credit(self, run: _Run, cid: int, pending: _Pending, size: int) -> None:
        """The reader took ``size`` characters: the worker may send that much more."""
        pending.credited += size
        with contextlib.suppress(OSError):
            run.send({"credit": cid, "bytes": size})

    def _ended(self, run: _Run, reason: str) -> None:
        with self._lock:
            current = self._run is run
            if current:
                self._run = None
            pending, run.pending = run.pending, {}
            closed = self._closed
        run.close()
        run.process.cleanup()
        if run.cwd is not None:
            shutil.rmtree(run.cwd, ignore_errors=True)
        if run.stopping:
            reason = f"was stopped ({run.stopping})"
        if run.broken:
            self._failed(reason)
        elif current and not closed and not run.stopping:
            self._crashed(reason)
        run.mark_loaded()
        for call in pending.values():
            call.finish(("gone", self._gone(reason, run)))

    def _gone(self, reason: str, run: _Run) -> str:
        """What a call whose worker ended is told: what happened, and what comes next."""
        if run.broken:
            return f"the plugin's worker process {reason}; save the plugin to retry"
        if self.status.state == "quarantined" and not run.stopping:
            return (f"the plugin's worker process {reason}, {len(self.status.crashes)} times "
                    "within a minute, and is quarantined; save the plugin to retry")  # fmt: skip
        return f"the plugin's worker process {reason}; it is restarted for the next call"

    def _crashed(self, reason: str) -> None:
        status = self.status
        status.last_exit, status.state = reason, "stopped"
        now = time.monotonic()
        status.crashes = [t for t in status.crashes if now - t < _RESTART_WINDOW] + [now]
        if len(status.crashes) >= self.options.max_crashes:
            status.state = "quarantined"
            logger.error(
                "worker of {} quarantined: it {}, {} times within a minute; "
                "save the plugin to retry",
                self.source.key, reason, len(status.crashes),
            )  # fmt: skip
            if self._on_change is not None:
                self._on_change()

    def _failed(self, reason: str) -> None:
        """It broke the protocol: no restart until the plugin changes, and ``plugins()`` says so."""
        self.status.last_exit, self.status.state = reason, "failed"
        if self._on_change is not None and self.status.pid is not None and not self._closed:
            self._on_change()

    # --- calls ---------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], *, streams: bool) -> Prerendered:
        """Run ``tool`` (a generator if ``streams``) in the worker; raises ``RemoteError``
        (the tool raised) or ``WorkerGone`` (the worker ended, or is quarantined or failed)."""
        ctx = current_context()
        loop = asyncio.get_running_loop()
        pending = _Pending(loop, ctx._sink if ctx is not None else None, streams)
        cid = next(self._ids)
        context = {
            "call_id": ctx.call_id if ctx else "",
            "session": ctx.session if ctx else None,
            "attributes": _jsonable_attributes(ctx.attributes if ctx else {}),
        }
        message = {"call": cid, "tool": tool, "arguments": arguments, "context": context}
        run = await self._ready(loop)
        run.pending[cid] = pending
        self.status.calls += 1
        try:
            run.send(message)
        except OSError:
            run.pending.pop(cid, None)
            raise WorkerGone(
                "the plugin's worker process ended before the call reached it; "
                "it is restarted for the next call"
            ) from None
        try:
            kind, payload = await pending.future
        except asyncio.CancelledError:  # the caller's timeout: stop the tool for real
            run.abandoned.add(cid)
            run.pending.pop(cid, None)
            if self._detach(run, f"call {tool} timed out"):  # the next call gets a fresh one
                logger.warning("stopping worker {} of {}: call {} timed out",
                               run.process.pid, self.source.key, tool)  # fmt: skip
                run.process.kill()
                shut(run.conn)  # its reader sees the end now
            raise
        if kind == "gone":
            raise WorkerGone(payload)
        if kind == "error":
            raise _remote_error(*payload[:4])
        return Prerendered(*payload)

    async def _ready(self, loop: asyncio.AbstractEventLoop) -> _Run:
        """The running process, or a fresh one if the last one ended; waits without a thread."""
        self._refuse_if_stopped_for_good()
        run = self._run
        if run is not None and run.ready:
            return run
        if run is None:
            crashes = len(self.status.crashes)
            if crashes:  # backoff: a crashing worker must not spin the host
                await asyncio.sleep(min(0.05 * 2 ** (crashes - 1), 2.0))
            with self._lock:
                if self._closed:
                    raise WorkerGone(_RETIRED)
                self._refuse_if_stopped_for_good()
                run = self._run
                if run is None:
                    self.status.restarts += 1
                    run = self._spawn()
        loaded = run.until_loaded(loop)
        if loaded is not None:
            try:
                await asyncio.wait_for(loaded, self.options.import_timeout)
            except asyncio.TimeoutError:
                if self._detach(run, "it did not load the plugin again in time"):
                    run.process.kill()
                    shut(run.conn)
        if run.stopping:  # stopped for another call's sake before this one reached it
            raise WorkerGone(
                f"the plugin's worker was stopped ({run.stopping}) before the call reached it; "
                "it is restarted for the next call"
            )
        if not run.ready or self._run is not run:
            raise WorkerGone(
                "the plugin's restarted worker did not load the plugin again; "
                "the next call starts another"
            )
        return run

    def _refuse_if_stopped_for_good(self) -> None:
        status = self.status
        if status.state == "quarantined":
            raise WorkerGone(
                f"the plugin's worker is quarantined: it {status.last_exit}, "
                f"{len(status.crashes)} times within a minute; save the plugin to retry"
            )
        if status.state == "failed":
            raise WorkerGone(
                f"the plugin's worker was stopped because it {status.last_exit}; "
                "save the plugin to retry"
            )


class _Pending:
    """A call waiting for its worker: stream output goes to its reader, the end to the future."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sink: Callable[..., None] | None, streams: bool
    ) -> None:
        self.loop, self.sink, self.streams = loop, sink, streams
        self.future: asyncio.Future[tuple[str, Any]] = loop.create_future()
        self.streamed = 0  # characters of output received
        self.credited = 0  # characters of it the reader has taken

    def stream(self, text: str, ack: Callable[[int], None]) -> None:
        """Hand ``text`` to the reader, which acknowledges it when it takes it."""
        if self.sink is None:  # nobody reads the stream: the answer will hold it all
            ack(len(text))
            return
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits
            self.loop.call_soon_threadsafe(self.sink, text, lambda: ack(len(text)))

    def finish(self, item: tuple[str, Any]) -> None:
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._resolve, item)

    def _resolve(self, item: tuple[str, Any]) -> None:
        if not self.future.done():
            self.future.set_result(item)


def _write(root: Path, directory: Path, files: Mapping[Path, bytes]) -> None:
    """The version's files, at their place relative to the plugin directory, readable to
    the worker whatever uid it runs as."""
    for path, data in files.items():
        target = root / path.relative_to(directory)
        for folder in reversed(target.relative_to(root).parents[:-1]):
            (root / folder).mkdir(exist_ok=True)
            os.chmod(root / folder, 0o755)
        target.write_bytes(data)
        os.chmod(target, 0o644)


def _jsonable_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in attributes.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue  # host objects stay in the host
        out[str(key)] = value
    return out


def _exit_reason(code: int | None, sandboxed: bool) -> str:
    if code is None:
        return "stopped answering"
    if sandboxed and code > 128:  # bwrap exits with 128 + the signal that ended the worker
        code = 128 - code
    if code < 0:
        try:
            return _SIGNALS.get(signal.Signals(-code), f"was ended by signal {-code}")
        except ValueError:
            return f"was ended by signal {-code}"
    return f"exited with code {code}"
