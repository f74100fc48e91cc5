"""The host's side of a worker process: start it, route calls to it, restart or quarantine it.

A :class:`Supervisor` owns the worker of one plugin version. Calls are sent as
JSON and their answers read by one reader thread per process; a call whose
caller gives up (a timeout) stops the process for real, and the next call
starts a fresh one. A crash ends the calls it was running with an error; a
worker that keeps crashing is quarantined until its plugin's files change.
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
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from loguru import logger

from agenthost._authoring.context import current_context
from agenthost._calls.results import Prerendered
from agenthost._directory.scan import Source
from agenthost._isolation.options import WorkerOptions, WorkerState
from agenthost._isolation.processes import SPARES, hang_up, shut

__all__ = ["RemoteError", "Supervisor", "WorkerGone"]

_RESTART_WINDOW = 60.0  # seconds in which crashes are counted
_SIGNALS = {
    signal.SIGKILL: "was killed (out of memory, or by someone else)",
    signal.SIGSEGV: "crashed (segmentation fault)",
    signal.SIGXCPU: "used up its CPU time limit",
    signal.SIGABRT: "aborted",
    signal.SIGBUS: "crashed (bus error)",
}


class RemoteError(Exception):
    """An exception a tool raised inside its worker; named after the original type."""


@functools.lru_cache(maxsize=256)
def _remote_error(name: str) -> type[RemoteError]:
    if not name.isidentifier() or len(name) > 100:  # a worker's word, not a class name
        name = "RemoteError"
    return type(name, (RemoteError,), {"__module__": "agenthost.worker"})


class WorkerGone(Exception):
    """The worker ended (or was stopped) while the call ran."""


class _Run:
    """One process of a worker, and everything that lives and dies with it."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection, cwd: str) -> None:
        self.process, self.conn, self.cwd = process, conn, cwd
        self.loaded = threading.Event()
        self.hello: dict[str, Any] = {}
        self.pending: dict[int, _Pending] = {}
        self.stopping = ""  # why the host stops this process, if it does
        self.reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._waiters: list[_Pending] = []

    @property
    def ready(self) -> bool:
        return self.loaded.is_set() and "loaded" in self.hello

    def until_loaded(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any] | None:
        """A future on ``loop`` for the first message (None if it came already)."""
        with self._lock:
            if self.loaded.is_set():
                return None
            waiter = _Pending(loop, None)
            self._waiters.append(waiter)
            return waiter.future

    def mark_loaded(self) -> None:
        """The first message came (or the process ended): wake whoever waits for it."""
        with self._lock:
            self.loaded.set()
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.deliver(("done", None))


class Supervisor:
    """The worker process of one plugin version, replaced when it dies."""

    def __init__(
        self,
        source: Source,
        cache_dir: Path,
        hook_timeout: float,
        options: WorkerOptions,
        on_quarantine: Callable[[], None] | None = None,
    ) -> None:
        self.source = source
        self.options = options
        self._on_quarantine = on_quarantine
        self.status = WorkerState()
        self._env = {k: os.environ[k] for k in options.env if k in os.environ}
        self._config = {
            "key": source.key, "path": str(source.path), "kind": source.kind,
            "cache_dir": str(cache_dir), "hook_timeout": hook_timeout,
            "concurrency": options.concurrency, "max_output": options.max_output,
            "env": self._env, "limits": options.limits(), "memory_mb": options.memory_mb,
        }  # fmt: skip
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._ids = itertools.count(1)
        self._closed = False

    # --- life ----------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Start the process and wait for its first message (``loaded`` or ``failed``)."""
        with self._lock:
            run = self._spawn()
        if not run.loaded.wait(self.options.import_timeout):
            self._stop_run(run, "its import took longer than the limit")
            limit = self.options.import_timeout
            message = f"the plugin's import did not finish within {limit:g} s; worker stopped"
            return {"failed": {"message": message}}
        return run.hello

    def _spawn(self) -> _Run:
        """A new process for this worker (call with the lock held)."""
        self.status.state = "starting"
        cwd = tempfile.mkdtemp(prefix="agenthost-worker-")
        process, conn = SPARES.take(self._env)
        conn.send_bytes(json.dumps({**self._config, "cwd": cwd}).encode())
        run = self._run = _Run(process, conn, cwd)
        self.status.pid = process.pid
        run.reader = threading.Thread(
            target=self._read, args=(run,), name="agenthost-worker-reader", daemon=True
        )
        run.reader.start()
        return run

    def stop(self) -> None:
        """Hang up; the worker retires its plugin and exits (killed if it does not)."""
        with self._lock:
            self._closed = True
            self.status.state = "stopped"
            run, self._run = self._run, None
        if run is None:
            return
        shut(run.conn)  # the reader sees the end and closes the channel
        try:
            run.process.wait(2)
        except subprocess.TimeoutExpired:
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
        """Stop ``run`` on purpose (not a crash); returns once it is gone."""
        self._detach(run, reason)
        process = run.process
        if process.poll() is None:
            logger.warning("stopping worker {} of {}: {}", process.pid, self.source.key, reason)
            process.terminate()
            try:
                process.wait(0.5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if run.reader is not None and run.reader is not threading.current_thread():
            run.reader.join(5)

    # --- the channel ---------------------------------------------------------------------------
    def _read(self, run: _Run) -> None:
        process = run.process
        limit = self.options.max_output + 65536
        try:
            while True:
                self._received(run, json.loads(run.conn.recv_bytes(limit)))
        except (EOFError, OSError) as exc:
            too_big = isinstance(exc, OSError) and "bad message length" in str(exc)
            broken = f"sent an answer over the {self.options.max_output:,}-byte output limit"
            reason = broken if too_big else ""
        except Exception as exc:  # noqa: BLE001 - whatever a hostile worker sends ends it
            reason = f"sent a malformed message ({type(exc).__name__})"
        if reason:
            process.kill()
        try:
            process.wait(0.5 if run.stopping else 5)
        except subprocess.TimeoutExpired:  # hung up but still running: make sure
            process.kill()
            process.wait(5)
        self._ended(run, reason or _exit_reason(process.returncode))

    def _received(self, run: _Run, message: dict[str, Any]) -> None:
        if "loaded" in message or "failed" in message:
            run.hello = message
            if self._run is run:
                self.status.state = "running" if "loaded" in message else "stopped"
            run.mark_loaded()
            return
        cid = message.get("done", message.get("delta"))
        pending = run.pending.get(cid) if isinstance(cid, int) else None
        if pending is None or not isinstance(cid, int):
            return
        if "delta" in message:
            pending.deliver(("delta", message.get("text", "")))
        else:
            run.pending.pop(cid, None)
            pending.deliver(("done", message))

    def _ended(self, run: _Run, reason: str) -> None:
        with self._lock:
            current = self._run is run
            if current:
                self._run = None
            pending, run.pending = run.pending, {}
            crashed = current and not self._closed and not run.stopping
        hang_up(run.conn)
        shutil.rmtree(run.cwd, ignore_errors=True)
        if run.stopping:
            reason = f"was stopped ({run.stopping})"
        if crashed:
            self._crashed(reason)
        run.mark_loaded()
        for call in pending.values():
            call.deliver(
                ("gone", f"the worker process {reason}; it is restarted for the next call")
            )

    def _crashed(self, reason: str) -> None:
        status = self.status
        status.last_exit, status.state = reason, "stopped"
        now = time.monotonic()
        status.crashes = [t for t in status.crashes if now - t < _RESTART_WINDOW] + [now]
        if len(status.crashes) >= self.options.max_crashes:
            status.state = "quarantined"
            logger.error(
                "worker of {} quarantined: it {} ({} times within a minute); "
                "save the plugin again to retry",
                self.source.key, reason, len(status.crashes),
            )  # fmt: skip
            if self._on_quarantine is not None:
                self._on_quarantine()

    # --- calls ---------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any]) -> Prerendered:
        """Run ``tool`` in the worker; raises ``RemoteError`` (the tool raised) or
        ``WorkerGone`` (the worker ended, or is quarantined)."""
        ctx = current_context()
        loop = asyncio.get_running_loop()
        pending = _Pending(loop, ctx._sink if ctx is not None else None)
        cid = next(self._ids)
        context = {
            "call_id": ctx.call_id if ctx else "",
            "session": ctx.session if ctx else None,
            "attributes": _jsonable_attributes(ctx.attributes if ctx else {}),
        }
        data = json.dumps(
            {"call": cid, "tool": tool, "arguments": arguments, "context": context}, default=str
        ).encode()
        run = await self._ready(loop)
        run.pending[cid] = pending
        self.status.calls += 1
        try:
            run.conn.send_bytes(data)
        except (OSError, ValueError):
            run.pending.pop(cid, None)
            raise WorkerGone("the worker process ended before the call reached it") from None
        try:
            kind, payload = await pending.future
        except asyncio.CancelledError:  # the caller's timeout: stop the tool for real
            run.pending.pop(cid, None)
            if self._detach(run, f"call {tool} timed out"):  # the next call gets a fresh one
                logger.warning("stopping worker {} of {}: call {} timed out",
                               run.process.pid, self.source.key, tool)  # fmt: skip
                run.process.terminate()
                shut(run.conn)  # its reader sees the end now and kills it if it lingers
            raise
        if kind == "gone":
            raise WorkerGone(payload)
        error = payload.get("error")
        if error is not None:
            raise _remote_error(str(error.get("type") or "Exception"))(error.get("message", ""))
        output, data_, truncated = (
            payload.get("output", ""),
            payload.get("data"),
            payload.get("truncated"),
        )
        return Prerendered(output, data_, bool(truncated))

    async def _ready(self, loop: asyncio.AbstractEventLoop) -> _Run:
        """The running process, or a fresh one if the last one ended; waits without a thread."""
        if self.status.state == "quarantined":
            raise WorkerGone(
                f"the plugin's worker is quarantined: it {self.status.last_exit} "
                f"{self.options.max_crashes} times within a minute; save the plugin to retry"
            )
        run = self._run
        if run is not None and run.ready:
            return run
        if run is None:
            crashes = len(self.status.crashes)
            if crashes:  # backoff: a crashing worker must not spin the host
                await asyncio.sleep(min(0.05 * 2 ** (crashes - 1), 2.0))
            with self._lock:
                if self._closed:
                    raise WorkerGone("the plugin version was retired")
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
                    run.process.terminate()
                    shut(run.conn)
        if not run.ready or self._run is not run:
            raise WorkerGone("the restarted worker did not load the plugin again")
        return run


class _Pending:
    """A call waiting for its worker: deltas go to the stream, the end to the future."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: Callable[[str], None] | None) -> None:
        self.loop = loop
        self.sink = sink
        self.future: asyncio.Future[tuple[str, Any]] = loop.create_future()

    def deliver(self, item: tuple[str, Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits
            if item[0] == "delta":
                if self.sink is not None:
                    self.loop.call_soon_threadsafe(self.sink, item[1])
            else:
                self.loop.call_soon_threadsafe(self._resolve, item)

    def _resolve(self, item: tuple[str, Any]) -> None:
        if not self.future.done():
            self.future.set_result(item)


def _jsonable_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in attributes.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue  # host objects stay in the host
        out[str(key)] = value
    return out


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return _SIGNALS.get(signal.Signals(-code), f"was ended by signal {-code}")
        except ValueError:
            return f"was ended by signal {-code}"
    return f"exited with code {code}"
