"""Process isolation: a plugin version that lives in a worker process of its own.

The host keeps the worker's tool definitions in its registry like any other:
validation (against the published schema), permissions, interceptors and
timeouts all happen in the host, and each tool's function is a proxy that sends
the validated arguments to the worker and waits for its answer. What the
worker does cannot reach the host: a crash, ``os._exit``, memory exhaustion or
an endless loop ends the worker, and the calls it was running end with
``tool_error``. A timeout kills the worker for real (the proxy is cancelled and
stops it); the next call starts a fresh one. A worker that keeps crashing is
quarantined until its plugin's files change.

Workers are forked from a fork server that has already imported agenthost, so
a new one costs a fork and the plugin's own import, not a fresh interpreter.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import contextlib
import functools
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

from loguru import logger

from agenthost._context import current_context
from agenthost._definition import ToolDefinition
from agenthost._errors import DefinitionProblem, ToolDefinitionError
from agenthost._frozen import freeze
from agenthost._loader import LoadFailure, PluginVersion
from agenthost._results import Prerendered
from agenthost._scan import Source

__all__ = [
    "Isolation",
    "WorkerOptions",
    "WorkerState",
    "declared_isolation",
    "load_isolated",
]

Isolation = Literal["in-process", "process"]
LEVELS: tuple[Isolation, ...] = ("in-process", "process")
DEFAULT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_RESTART_WINDOW = 60.0  # seconds in which crashes are counted
_SIGNALS = {
    signal.SIGKILL: "was killed (out of memory, or by someone else)",
    signal.SIGSEGV: "crashed (segmentation fault)",
    signal.SIGXCPU: "used up its CPU time limit",
    signal.SIGABRT: "aborted",
    signal.SIGBUS: "crashed (bus error)",
}


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


class RemoteError(Exception):
    """An exception a tool raised inside its worker; named after the original type."""


@functools.cache
def _remote_error(name: str) -> type[RemoteError]:
    return type(name, (RemoteError,), {"__module__": "agenthost.worker"})


class WorkerGone(Exception):
    """The worker ended (or was stopped) while the call ran."""


class _Spares:
    """Worker processes started ahead of need, agenthost already imported, waiting for a
    plugin: taking one costs a message, not an interpreter start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: list[tuple[subprocess.Popen[bytes], Connection]] = []
        self._env: dict[str, str] = {}

    def take(self, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Connection]:
        with self._lock:
            spare = self._ready.pop() if self._ready and env == self._env else None
            stale, self._ready = (self._ready, []) if env != self._env else ([], self._ready)
            self._env = env
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


_SPARES = _Spares()
atexit.register(_SPARES.clear)  # spares hang up and exit with the host
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from agenthost._worker import run; run(int(sys.argv[2]))"
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


def _hang_up(conn: Connection) -> None:
    """Close the channel so that both ends see it at once, even with a read in progress
    (closing alone leaves a blocked reader, and so the socket, open)."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=conn.fileno())
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.detach()
    conn.close()


def _discard(process: subprocess.Popen[bytes], conn: Connection) -> None:
    _hang_up(conn)
    try:
        process.wait(2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


class Worker:
    """One worker process of one plugin version, restarted when it dies."""

    def __init__(
        self,
        source: Source,
        cache_dir: Path,
        hook_timeout: float,
        options: WorkerOptions,
    ) -> None:
        self.source = source
        self.options = options
        self.status = WorkerState()
        self._env = {k: os.environ[k] for k in options.env if k in os.environ}
        self._config = {
            "key": source.key, "path": str(source.path), "kind": source.kind,
            "cache_dir": str(cache_dir), "hook_timeout": hook_timeout,
            "concurrency": options.concurrency, "max_output": options.max_output,
            "env": self._env,
            "limits": options.limits(), "memory_mb": options.memory_mb,
        }  # fmt: skip
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Connection | None = None
        self._reader: threading.Thread | None = None
        self._cwd: str | None = None
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._loaded: threading.Event = threading.Event()
        self._hello: dict[str, Any] = {}
        self._closed = False
        self._stopping = ""  # why the host is stopping the current process, if it is

    # --- life ----------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Start the process and wait for its first message (``loaded`` or ``failed``)."""
        with self._lock:
            self._spawn()
        if not self._loaded.wait(self.options.import_timeout):
            self._kill("its import took longer than the limit")
            limit = self.options.import_timeout
            message = f"the plugin's import did not finish within {limit:g} s; worker stopped"
            return {"failed": {"message": message}}
        return self._hello

    def _spawn(self) -> None:
        self.status.state = "starting"
        self._cwd = tempfile.mkdtemp(prefix="agenthost-worker-")
        process, conn = _SPARES.take(self._env)
        conn.send_bytes(json.dumps({**self._config, "cwd": self._cwd}).encode())
        self._process, self._conn = process, conn
        self._loaded.clear()
        self._hello = {}
        self.status.pid = process.pid
        self._reader = threading.Thread(
            target=self._read, args=(process, conn), name="agenthost-worker-reader", daemon=True
        )
        self._reader.start()

    def stop(self) -> None:
        """Hang up; the worker retires its plugin and exits (killed if it does not)."""
        with self._lock:
            self._closed = True
            self.status.state = "stopped"
            process, conn = self._process, self._conn
        if conn is not None:
            _hang_up(conn)
        if process is not None:
            try:
                process.wait(2)
            except subprocess.TimeoutExpired:
                process.kill()
        self._reap()

    def _kill(self, reason: str) -> None:
        """Stop the running process on purpose (not a crash); returns once it is gone."""
        with self._lock:
            process, reader = self._process, self._reader
            self._stopping = reason
        if process is None:
            return
        if process.poll() is None:
            logger.warning("stopping worker {} of {}: {}", process.pid, self.source.key, reason)
            process.terminate()
            try:
                process.wait(0.5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if reader is not None and reader is not threading.current_thread():
            reader.join(5)  # its end is handled: the next call starts a fresh worker

    def _reap(self) -> None:
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(5)
        if self._cwd is not None:
            shutil.rmtree(self._cwd, ignore_errors=True)
            self._cwd = None

    # --- the channel ---------------------------------------------------------------------------
    def _read(self, process: Any, conn: Connection) -> None:
        try:
            while True:
                message = json.loads(conn.recv_bytes(self.options.max_output + 65536))
                self._received(message)
        except (EOFError, OSError, ValueError) as exc:
            too_big = isinstance(exc, OSError) and "bad message length" in str(exc)
            if too_big:
                process.kill()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:  # hung up but still running: make sure
                process.kill()
                process.wait(5)
            reason = (
                f"sent an answer over the {self.options.max_output:,}-byte output limit"
                if too_big
                else _exit_reason(process.returncode)
            )
            self._ended(process, conn, reason)

    def _received(self, message: dict[str, Any]) -> None:
        if "loaded" in message or "failed" in message:
            self._hello = message
            self.status.state = "running" if "loaded" in message else "stopped"
            self._loaded.set()
            return
        cid = message.get("done", message.get("delta"))
        pending = self._pending.get(cid) if isinstance(cid, int) else None
        if pending is None or not isinstance(cid, int):
            return
        if "delta" in message:
            pending.deliver(("delta", message.get("text", "")))
        else:
            self._pending.pop(cid, None)
            pending.deliver(("done", message))

    def _ended(self, process: Any, conn: Any, reason: str) -> None:
        with self._lock:
            mine = process is self._process
            if mine:
                self._process = self._conn = None
            pending, self._pending = (self._pending, {}) if mine else ({}, self._pending)
            closed, stopping, self._stopping = self._closed, self._stopping, ""
        conn.close()
        if stopping:
            reason = f"was stopped ({stopping})"
            self.status.last_exit, self.status.state = reason, "stopped"
        elif not closed and mine:
            self.status.last_exit = reason
            self.status.state = "stopped"
            now = time.monotonic()
            self.status.crashes = [t for t in self.status.crashes if now - t < _RESTART_WINDOW]
            self.status.crashes.append(now)
            if len(self.status.crashes) >= self.options.max_crashes:
                self.status.state = "quarantined"
                logger.error(
                    "worker of {} quarantined: it {} ({} times within a minute); "
                    "save the plugin again to retry",
                    self.source.key, reason, len(self.status.crashes),
                )  # fmt: skip
        self._loaded.set()
        for call in pending.values():
            call.deliver(
                ("gone", f"the worker process {reason}; it is restarted for the next call")
            )
        if self._cwd is not None and mine:
            shutil.rmtree(self._cwd, ignore_errors=True)

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
        conn = await self._ready(loop)
        self._pending[cid] = pending
        self.status.calls += 1
        try:
            conn.send_bytes(data)
        except (OSError, ValueError):
            self._pending.pop(cid, None)
            raise WorkerGone("the worker process ended before the call reached it") from None
        try:
            kind, payload = await pending.future
        except asyncio.CancelledError:  # the caller's timeout: stop the tool for real
            self._pending.pop(cid, None)
            await loop.run_in_executor(None, self._kill, f"call {tool} timed out")
            raise
        if kind == "gone":
            raise WorkerGone(payload)
        error = payload.get("error")
        if error is not None:
            raise _remote_error(str(error.get("type") or "Exception"))(error.get("message", ""))
        return Prerendered(
            payload.get("output", ""), payload.get("data"), bool(payload.get("truncated"))
        )

    async def _ready(self, loop: asyncio.AbstractEventLoop) -> Connection:
        """The channel of a running worker, starting a fresh one if the last one died."""
        if self.status.state == "quarantined":
            raise WorkerGone(
                f"the plugin's worker is quarantined: it {self.status.last_exit} "
                f"{self.options.max_crashes} times within a minute; save the plugin to retry"
            )
        conn = self._conn
        if conn is not None and self._loaded.is_set() and self._hello.get("loaded") is not None:
            return conn
        return await loop.run_in_executor(None, self._restart)

    def _restart(self) -> Connection:
        with self._lock:
            if self._closed:
                raise WorkerGone("the plugin version was retired")
            if self._conn is None:
                crashes = len(self.status.crashes)
                if crashes:  # backoff: a crashing worker must not spin the host
                    time.sleep(min(0.05 * 2 ** (crashes - 1), 2.0))
                self.status.restarts += 1
                self._spawn()
        if not self._loaded.wait(self.options.import_timeout) or "loaded" not in self._hello:
            self._kill("it did not load again")
            raise WorkerGone("the restarted worker did not load the plugin again")
        conn = self._conn
        if conn is None:
            raise WorkerGone("the restarted worker ended at once")
        return conn


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


def load_isolated(
    source: Source,
    cache_dir: Path,
    content_hash: str,
    *,
    hook_timeout: float,
    options: WorkerOptions,
) -> PluginVersion | LoadFailure:
    """Load ``source`` in a new worker process; the version's tools are proxies to it."""
    started = time.perf_counter()
    worker = Worker(source, cache_dir, hook_timeout, options)
    hello = worker.start()
    failed = hello.get("failed")
    if failed is not None or "loaded" not in hello:
        worker.stop()
        failed = failed or {"message": f"the worker {worker.status.last_exit or 'ended'}"}
        return LoadFailure(
            failed.get("message") or "the worker failed to load the plugin",
            failed.get("file") or str(source.path),
            failed.get("line"),
            failed.get("traceback") or "",
        )
    loaded = hello["loaded"]
    definitions, errors = [], []
    for described in loaded["tools"]:
        try:
            definitions.append(_proxy(worker, described))
        except ToolDefinitionError as exc:
            errors.append(exc)
    errors += [_error(e) for e in loaded["errors"]]
    return PluginVersion(
        name=loaded["name"],
        source=source,
        version=loaded["version"],
        content_hash=content_hash,
        definitions=tuple(definitions),
        definition_errors=tuple(errors),
        warnings=tuple(loaded["warnings"]),
        load_ms=(time.perf_counter() - started) * 1000,
        unload_hooks=(worker.stop,),
        isolation="process",
        worker=worker.status,
    )


def _proxy(worker: Worker, described: dict[str, Any]) -> ToolDefinition:
    name = described["name"]

    async def proxy(**arguments: Any) -> Any:
        return await worker.call(name, arguments)

    definition = ToolDefinition.from_schema(
        name,
        described["input_schema"],
        description=described["description"],
        function=proxy,
        **described["options"],
    )
    output = described["output_schema"]
    return replace(
        definition,
        output_schema=freeze(output) if output is not None else None,
        file=described["file"],
        line=described["line"],
        warnings=tuple(described["warnings"]),
    )


def _error(described: dict[str, Any]) -> ToolDefinitionError:
    problems = [
        DefinitionProblem(p["message"], p.get("parameter"), p.get("line"))
        for p in described.get("problems", [])
    ]
    return ToolDefinitionError(
        function=described.get("function") or "?",
        tool=described.get("tool"),
        file=described.get("file"),
        line=described.get("line"),
        problems=problems,
    )
