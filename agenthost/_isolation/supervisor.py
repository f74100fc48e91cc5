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

Workers come from interpreters started ahead of need that have already imported
agenthost, so a new one costs the plugin's own import, not a fresh interpreter.
(multiprocessing's fork server was tried and dropped: it re-imports the host's
``__main__`` in every child.)
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import contextlib
import functools
import inspect
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
from typing import Annotated, Any, Literal, Optional

from loguru import logger
from pydantic import Field

from agenthost._authoring.context import current_context
from agenthost._authoring.definition import ToolDefinition
from agenthost._calls.results import Prerendered
from agenthost._common.frozen import freeze, thaw
from agenthost._directory.loader import LoadFailure, PluginVersion
from agenthost._directory.scan import Source
from agenthost._errors import DefinitionProblem, ToolDefinitionError

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


@functools.lru_cache(maxsize=256)
def _remote_error(name: str) -> type[RemoteError]:
    if not name.isidentifier() or len(name) > 100:  # a worker's word, not a class name
        name = "RemoteError"
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


_SPARES = _Spares()
atexit.register(_SPARES.clear)  # spares hang up and exit with the host
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


def _shut(conn: Connection) -> None:
    """End the channel for both sides at once, even with a read in progress, without
    closing the descriptor: only the thread reading it may close it, or a new channel
    could take its number while the old reader still reads from it."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=conn.fileno())
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.detach()


def _hang_up(conn: Connection) -> None:
    """End and close a channel nobody else reads."""
    _shut(conn)
    conn.close()


def _discard(process: subprocess.Popen[bytes], conn: Connection) -> None:
    _hang_up(conn)
    try:
        process.wait(2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


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


class Worker:
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
        process, conn = _SPARES.take(self._env)
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
        _shut(run.conn)  # the reader sees the end and closes the channel
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
        _hang_up(run.conn)
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
                _shut(run.conn)  # its reader sees the end now and kills it if it lingers
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
                    _shut(run.conn)
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


def load_isolated(
    source: Source,
    cache_dir: Path,
    content_hash: str,
    *,
    hook_timeout: float,
    options: WorkerOptions,
    on_quarantine: Callable[[], None] | None = None,
) -> PluginVersion | LoadFailure:
    """Load ``source`` in a new worker process; the version's tools are proxies to it.
    ``on_quarantine`` is told when the worker is quarantined (to publish the status)."""
    started = time.perf_counter()
    worker = Worker(source, cache_dir, hook_timeout, options, on_quarantine)
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
    """The host's definition of a worker's tool: same schema, a function that forwards.

    Where the published schema is made of simple types, the proxy gets the
    annotations that produce exactly that schema, so the host validates with the
    same compiled validator (and the same messages) as for an in-process tool;
    otherwise the schema itself is the validator (``jsonschema``).
    """
    name = described["name"]

    async def proxy(**arguments: Any) -> Any:
        return await worker.call(name, arguments)

    options = {"name": name, "description": described["description"], **described["options"]}
    definition = _typed(proxy, described["input_schema"], options)
    if definition is None:
        definition = ToolDefinition.from_schema(
            name, described["input_schema"], function=proxy, **{
                k: v for k, v in options.items() if k != "name"
            }
        )  # fmt: skip
    output = described["output_schema"]
    return replace(
        definition,
        output_schema=freeze(output) if output is not None else None,
        file=described["file"],
        line=described["line"],
        warnings=tuple(described["warnings"]),
    )


def _typed(
    proxy: Callable[..., Any], schema: Mapping[str, Any], options: dict[str, Any]
) -> ToolDefinition | None:
    if set(schema) - {"type", "properties", "required", "additionalProperties"}:
        return None
    required = set(schema.get("required") or ())
    parameters, annotations = [], {}
    for name, prop in (schema.get("properties") or {}).items():
        annotation = _annotation(prop)
        if annotation is None or not name.isidentifier():
            return None
        if isinstance(prop.get("description"), str):
            annotation = Annotated[annotation, Field(description=prop["description"])]
        if name not in required and "default" not in prop:
            return None
        default = inspect.Parameter.empty if name in required else prop["default"]
        kind = inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(name, kind, default=default))
        annotations[name] = annotation
    forward = _forwarding(proxy)
    forward.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    forward.__annotations__ = annotations
    try:
        definition = ToolDefinition.from_function(forward, **options)
    except ToolDefinitionError:
        return None
    return definition if thaw(definition.input_schema) == thaw(schema) else None


def _forwarding(proxy: Callable[..., Any]) -> Callable[..., Any]:
    async def forward(**arguments: Any) -> Any:
        return await proxy(**arguments)

    return forward


def _annotation(prop: Mapping[str, Any]) -> Any:
    """The Python type whose schema is ``prop`` (descriptions and defaults aside), if simple."""
    extra = set(prop) - {"type", "description", "default", "enum", "items", "anyOf"}
    if extra:
        return None
    variants = prop.get("anyOf")
    if variants is not None:
        others = [v for v in variants if v != {"type": "null"}]
        if len(others) != 1 or len(variants) != 2:
            return None
        inner = _annotation(others[0])
        return None if inner is None else Optional[inner]  # noqa: UP045 - built at run time
    kind = prop.get("type")
    if "enum" in prop:
        values = prop["enum"]
        if kind != "string" or not values or not all(isinstance(v, str) for v in values):
            return None
        return Literal[tuple(values)]
    if kind == "array":
        items = prop.get("items")
        inner = _annotation(items) if isinstance(items, Mapping) else None
        return None if inner is None else list[inner]  # type: ignore[valid-type]
    return _SIMPLE.get(kind) if isinstance(kind, str) else None


_SIMPLE: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}


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
