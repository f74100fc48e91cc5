"""The executor: a tool name and the model's arguments in, a ``ToolResult`` out, always.

Order of a call: look up the tool in the current snapshot, check permissions
(before the arguments are even parsed), validate the arguments, run the
interceptor chain, run the tool under its timeout, normalise the return value.
Every failure along the way becomes a result with an error code; nothing a
tool or its input does raises out of ``execute``.

Where a tool runs:

* ``execute``: a sync tool without a timeout runs inline in the caller's
  thread; with a timeout it runs in the worker pool so the caller can stop
  waiting; async tools run on the host's loop thread.
* ``aexecute``: async tools run on the caller's loop; sync tools always run in
  the worker pool, never on the loop.

A call holds the plugin version it started on until it ends (a timed-out tool
that keeps running keeps holding it), so reloads never pull code out from
under a running call, and ``on_unload`` waits for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import difflib
import functools
import itertools
import math
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from time import perf_counter
from typing import Any

import pydantic_core
from loguru import logger
from pydantic import ValidationError

from agenthost._calls import Call, read_call
from agenthost._context import ToolContext, _current, current_context
from agenthost._definition import ToolDefinition
from agenthost._errors import InvalidArgumentsError
from agenthost._interceptors import Interceptor, as_interceptor
from agenthost._metrics import Metrics
from agenthost._permissions import Permissions
from agenthost._registry import Entry, Registry, Snapshot, ToolInfo
from agenthost._results import ToolResult, normalise, render
from agenthost._runtime import LoopThread, WorkerPool
from agenthost._streaming import Streaming

__all__ = ["Executor"]

GRACE = 1.0  # seconds a sync caller waits beyond the timeout for the loop to report it
UNKNOWN = "(unknown)"  # metrics key for calls to tools that do not exist


class Executor(Streaming):
    """Runs calls against the registry's current snapshot."""

    def __init__(
        self,
        registry: Registry,
        *,
        permissions: Permissions,
        default_timeout: float | None,
        max_workers: int,
        max_output: int,
        metrics: bool,
        interceptors: Iterable[Any] = (),
    ) -> None:
        self._registry = registry
        self.permissions = permissions
        self.default_timeout = default_timeout
        self.max_output = max_output
        self.metrics = Metrics() if metrics else None
        self._pool = WorkerPool(max_workers)
        self._loop_thread: LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._interceptors: tuple[Interceptor, ...] = tuple(map(self._adapt, interceptors))
        self._ids = itertools.count(1)
        self._prefix = f"call_{os.getpid():x}_"
        self._orphans: set[asyncio.Task[Any]] = set()
        self._stopped = False
        self._plain = not self._interceptors  # no host-wide interceptors, not stopped

    # --- configuration -----------------------------------------------------------------------
    def add_interceptor(self, interceptor: Any) -> Callable[[], None]:
        """Append a host-wide interceptor; returns an undo callable."""
        adapted = self._adapt(interceptor)
        self._interceptors = (*self._interceptors, adapted)
        self._plain = False

        def undo() -> None:
            self._interceptors = tuple(i for i in self._interceptors if i is not adapted)
            self._plain = not (self._interceptors or self._stopped)

        return undo

    def _adapt(self, interceptor: Any) -> Interceptor:
        return as_interceptor(interceptor, self._run_coroutine)

    def refuse_calls(self) -> None:
        """From now on every call is ``unavailable`` (calls already running finish)."""
        self._stopped = True
        self._plain = False

    def stop(self) -> None:
        self._stopped = True
        self._plain = False
        self._pool.shutdown()
        with self._loop_lock:
            if self._loop_thread is not None:
                self._loop_thread.stop()
                self._loop_thread = None

    # --- sync calls ---------------------------------------------------------------------------
    def execute(
        self,
        name: str,
        arguments: Any = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> ToolResult:
        """Run one call synchronously (from any thread) and return its result."""
        started = perf_counter()
        cid = call_id or f"{self._prefix}{next(self._ids)}"
        entry = self._registry.snapshot.tools.get(name)
        if (
            entry is None
            or entry.direct is None
            or interceptors
            or timeout is not None
            or not self._plain
        ):
            return self._execute(name, arguments, session, timeout, interceptors, cid, started)
        # The fast path: a plain sync tool with its timeout off runs right here. It is
        # the general path (_execute) with every step that does not apply left out;
        # anything unusual, such as arguments that need a second look, goes there.
        info = entry.info
        try:  # as _admit() does, for plain JSON text straight through pydantic-core
            if entry.validate_json is not None and type(arguments) is str and arguments[:1] == "{":
                kwargs = entry.validate_json(arguments, strict=True)
            else:
                kwargs = info.definition.validator.validate(arguments)
        except (ValidationError, InvalidArgumentsError):  # the general path explains the error
            return self._execute(name, arguments, session, timeout, interceptors, cid, started)
        owner = entry.owner
        if owner is not None and not owner.enter():
            return self._execute(name, arguments, session, timeout, interceptors, cid, started)
        token = _current.set((info.definition, cid, session, arguments, kwargs, {},
                              info.plugin, info.version, owner))  # fmt: skip
        try:
            output, data, truncated = render(entry.direct(**kwargs), self.max_output)
        except Exception as exc:  # noqa: BLE001 - the one boundary where tool errors become results
            return self._finish(_tool_error(current_context(), exc), name, info, cid, started)
        except SystemExit as exc:
            return self._finish(_tool_error(current_context(), exc), name, info, cid, started)
        finally:
            _current.reset(token)
            if owner is not None:
                owner.exit()
        duration = (perf_counter() - started) * 1000
        if self.metrics is not None:
            self.metrics.record(name, duration, None)
        return ToolResult(True, output, data, None, name, info.plugin, info.version, cid, duration,
                          truncated)  # fmt: skip

    def _execute(
        self,
        name: str,
        arguments: Any,
        session: str | None,
        timeout: float | None,
        interceptors: Iterable[Any],
        cid: str,
        started: float,
    ) -> ToolResult:
        admitted = self._admit(name, arguments, session)
        if isinstance(admitted, ToolResult):
            return self._finish(admitted, name, None, cid, started)
        entry, kwargs = admitted
        info = entry.info
        owner = entry.owner
        ctx = ToolContext(info.definition, cid, session, arguments, kwargs, {}, info.plugin,
                          info.version, owner)  # fmt: skip
        try:
            limit = self._limit(info.definition, timeout)
            chain = self._chain(interceptors)
            if chain:
                result = self._through(chain, 0, ctx, lambda c: self._run(c, limit))
            else:
                result = self._run(ctx, limit)
        finally:
            if owner is not None:
                owner.exit()
        return self._finish(result, name, info, cid, started)

    def execute_many(
        self,
        calls: Iterable[Call],
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
    ) -> list[ToolResult]:
        """Run a batch concurrently (as when a model returns parallel tool calls), in order."""
        calls = list(calls)
        if self._on_loop_thread():  # called from a tool on the host loop: no nested waiting
            return [self._execute_spec(c, session, timeout, interceptors) for c in calls]
        coro = self.aexecute_many(
            calls, session=session, timeout=timeout, interceptors=interceptors
        )
        return self._loop().submit(coro).result()

    def _execute_spec(
        self, call: Call, session: str | None, timeout: float | None, interceptors: Iterable[Any]
    ) -> ToolResult:
        spec = read_call(call)
        if isinstance(spec, ToolResult):
            return self._finish(spec, "", None, self._new_id(), perf_counter())
        name, arguments, cid = spec
        return self.execute(
            name,
            arguments,
            session=session,
            timeout=timeout,
            interceptors=interceptors,
            call_id=cid,
        )

    # --- async calls --------------------------------------------------------------------------
    async def aexecute(
        self,
        name: str,
        arguments: Any = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> ToolResult:
        """Run one call on the running event loop (sync tools go to worker threads)."""
        entry = self._registry.snapshot.tools.get(name)
        if (
            entry is None
            or entry.direct_async is None
            or interceptors
            or timeout is not None
            or not self._plain
        ):
            return await self._aexecute(
                name, arguments, session, timeout, interceptors, call_id, None
            )
        # The async fast path, as in execute(): a plain async tool awaited right here.
        started = perf_counter()
        cid = call_id or f"{self._prefix}{next(self._ids)}"
        info = entry.info
        try:  # as in execute()
            if entry.validate_json is not None and type(arguments) is str and arguments[:1] == "{":
                kwargs = entry.validate_json(arguments, strict=True)
            else:
                kwargs = info.definition.validator.validate(arguments)
        except (ValidationError, InvalidArgumentsError):
            return await self._aexecute(name, arguments, session, timeout, interceptors, cid, None)
        owner = entry.owner
        if owner is not None and not owner.enter():
            return await self._aexecute(name, arguments, session, timeout, interceptors, cid, None)
        token = _current.set((info.definition, cid, session, arguments, kwargs, {},
                              info.plugin, info.version, owner))  # fmt: skip
        try:
            output, data, truncated = render(await entry.direct_async(**kwargs), self.max_output)
        except asyncio.CancelledError:
            if _cancelling():
                raise
            cancelled = ToolResult.fail("cancelled", f"tool '{name}' was cancelled")
            return self._finish(cancelled, name, info, cid, started)
        except Exception as exc:  # noqa: BLE001 - the one boundary where tool errors become results
            return self._finish(_tool_error(current_context(), exc), name, info, cid, started)
        finally:
            _current.reset(token)
            if owner is not None:
                owner.exit()
        duration = (perf_counter() - started) * 1000
        if self.metrics is not None:
            self.metrics.record(name, duration, None)
        return ToolResult(True, output, data, None, name, info.plugin, info.version, cid, duration,
                          truncated)  # fmt: skip

    async def _aexecute(
        self,
        name: str,
        arguments: Any,
        session: str | None,
        timeout: float | None,
        interceptors: Iterable[Any],
        call_id: str | None,
        sink: Callable[[str], None] | None,
    ) -> ToolResult:
        started = perf_counter()
        cid = call_id or f"{self._prefix}{next(self._ids)}"
        admitted = self._admit(name, arguments, session)
        if isinstance(admitted, ToolResult):
            return self._finish(admitted, name, None, cid, started)
        entry, kwargs = admitted
        info = entry.info
        ctx = ToolContext(info.definition, cid, session, arguments, kwargs, {}, info.plugin,
                          info.version, entry.owner, sink)  # fmt: skip
        try:
            limit = self._limit(info.definition, timeout)
            chain = self._chain(interceptors)
            if chain:
                result = await self._athrough(chain, 0, ctx, lambda c: self._arun(c, limit))
            else:
                result = await self._arun(ctx, limit)
        finally:
            if entry.owner is not None:
                entry.owner.exit()
        return self._finish(result, name, info, cid, started)

    async def aexecute_many(
        self,
        calls: Iterable[Call],
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
    ) -> list[ToolResult]:
        """Run a batch concurrently on the running loop; results in input order."""
        jobs = []
        for call in calls:
            spec = read_call(call)
            if isinstance(spec, ToolResult):
                jobs.append(self._refused(spec))
                continue
            name, arguments, cid = spec
            jobs.append(self._aexecute(name, arguments, session, timeout, interceptors, cid, None))
        return list(await asyncio.gather(*jobs))

    async def _refused(self, result: ToolResult) -> ToolResult:
        return self._finish(result, "", None, self._new_id(), perf_counter())

    def _new_id(self) -> str:
        return f"{self._prefix}{next(self._ids)}"

    # --- admission ---------------------------------------------------------------------------
    def _admit(
        self, name: str, arguments: Any, session: str | None
    ) -> tuple[Entry, dict[str, Any]] | ToolResult:
        """Lookup, permissions, validation; on success the call holds the tool's version."""
        if self._stopped:
            return ToolResult.fail("unavailable", "the tool host is stopped; no calls are taken")
        snapshot = self._registry.snapshot
        entry = snapshot.tools.get(name)
        if entry is None:
            return _unknown(name, snapshot)
        definition = entry.info.definition
        if definition.permissions:
            missing = self.permissions.missing(session, definition.permissions)
            if missing:
                return _denied(name, session, missing)
        try:
            kwargs = definition.validator.validate(arguments)
        except InvalidArgumentsError as exc:
            return ToolResult.fail(
                "invalid_arguments", str(exc), errors=[p.as_dict() for p in exc.problems]
            )
        owner = entry.owner
        if owner is not None and not owner.enter():
            return self._admit(
                name, arguments, session
            )  # that version just closed: use the new one
        return entry, kwargs

    def _limit(self, definition: ToolDefinition, timeout: float | None) -> float | None:
        limit = timeout if timeout is not None else definition.timeout
        if limit is None:
            limit = self.default_timeout
        return None if limit is None or math.isinf(limit) else limit

    def _chain(self, per_call: Iterable[Any]) -> tuple[Interceptor, ...]:
        if not per_call:
            return self._interceptors
        return self._interceptors + tuple(map(self._adapt, per_call))

    def _finish(
        self, result: ToolResult, name: str, info: ToolInfo | None, cid: str, started: float
    ) -> ToolResult:
        if result.call_id:  # handed out before (a cached result): never change a shared record
            result = replace(result)
        result.tool, result.call_id = name, cid
        if info is not None:
            result.plugin, result.version = info.plugin, info.version
        result.duration_ms = duration = (perf_counter() - started) * 1000
        if self.metrics is not None:
            error = result.error
            key = UNKNOWN if error is not None and error.code == "unknown_tool" else name
            self.metrics.record(key, duration, error.code if error is not None else None)
        return result

    # --- interceptor chains -----------------------------------------------------------------
    def _through(
        self,
        chain: tuple[Interceptor, ...],
        index: int,
        ctx: ToolContext,
        final: Callable[[ToolContext], ToolResult],
    ) -> ToolResult:
        if index == len(chain):
            return final(ctx)
        interceptor = chain[index]
        try:
            result = interceptor.intercept(ctx, lambda c: self._through(chain, index + 1, c, final))
        except Exception as exc:  # noqa: BLE001 - an interceptor's bug becomes a result
            return _interceptor_failed(interceptor, exc)
        return _checked_result(interceptor, result)

    async def _athrough(
        self,
        chain: tuple[Interceptor, ...],
        index: int,
        ctx: ToolContext,
        final: Callable[[ToolContext], Awaitable[ToolResult]],
    ) -> ToolResult:
        if index == len(chain):
            return await final(ctx)
        interceptor = chain[index]

        async def proceed(c: ToolContext) -> ToolResult:
            return await self._athrough(chain, index + 1, c, final)

        try:
            result = await interceptor.aintercept(ctx, proceed)
        except Exception as exc:  # noqa: BLE001 - an interceptor's bug becomes a result
            return _interceptor_failed(interceptor, exc)
        return _checked_result(interceptor, result)

    # --- running the tool ---------------------------------------------------------------------
    def _job(self, ctx: ToolContext) -> Callable[[], ToolResult] | None:
        """The sync work for sync and generator tools (None for async ones)."""
        definition = ctx.tool
        fn = definition.function
        assert fn is not None
        kwargs = _with_context(ctx)
        if definition.kind == "sync":
            return functools.partial(self._invoke, ctx, fn, kwargs)
        if definition.kind == "generator":
            return functools.partial(
                self._invoke, ctx, functools.partial(self._drain, ctx, fn), kwargs
            )
        return None

    def _run(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        definition = ctx.tool
        fn = definition.function
        if fn is None or definition.definition_only:
            return _requires_action(ctx)
        if limit is None and definition.kind == "sync":  # the inline fast path
            return self._invoke(ctx, fn, _with_context(ctx))
        job = self._job(ctx)
        if job is None:
            return self._run_on_loop(self._coroutine(ctx, limit), ctx, limit)
        if limit is None:
            return job()
        return self._in_worker(ctx, job, limit)

    async def _arun(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        if ctx.tool.function is None or ctx.tool.definition_only:
            return _requires_action(ctx)
        job = self._job(ctx)
        if job is None:
            return await self._coroutine(ctx, limit)
        return await self._in_worker_async(ctx, job, limit)

    def _invoke(
        self, ctx: ToolContext, fn: Callable[..., Any], kwargs: dict[str, Any]
    ) -> ToolResult:
        token = _current.set(ctx)
        try:
            value = fn(**kwargs)
        except Exception as exc:  # noqa: BLE001 - the one boundary where tool errors become results
            return _tool_error(ctx, exc)
        except SystemExit as exc:
            return _tool_error(ctx, exc)
        finally:
            _current.reset(token)
        return normalise(value, self.max_output)

    def _drain(self, ctx: ToolContext, fn: Callable[..., Iterable[Any]], /, **kwargs: Any) -> str:
        collected = _Collector(ctx, self.max_output)
        for chunk in fn(**kwargs):
            collected.add(chunk)
        return collected.text()

    async def _adrain(
        self, ctx: ToolContext, fn: Callable[..., Any], kwargs: dict[str, Any]
    ) -> str:
        collected = _Collector(ctx, self.max_output)
        async for chunk in fn(**kwargs):
            collected.add(chunk)
        return collected.text()

    async def _coroutine(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        """Run an async tool (or async generator) on the current loop, within ``limit``."""
        fn = ctx.tool.function
        assert fn is not None
        kwargs = _with_context(ctx)
        release = _hold(ctx)
        token = _current.set(ctx)
        task: asyncio.Future[Any] | None = None
        try:
            if ctx.tool.kind == "async_generator":
                work: Awaitable[Any] = self._adrain(ctx, fn, kwargs)
            else:
                work = fn(**kwargs)
            if limit is None:
                value = await work
            else:
                task = asyncio.ensure_future(work)
                task.add_done_callback(lambda _: release())
                done, _ = await asyncio.wait((task,), timeout=limit)
                if not done:
                    task.cancel()
                    self._orphans.add(task)  # let it finish cancelling; keep a reference
                    task.add_done_callback(self._orphans.discard)
                    return _timeout(ctx, limit, abandoned=False)
                value = task.result()
        except asyncio.CancelledError:
            if _cancelling():
                raise  # our caller is being cancelled: let it
            return ToolResult.fail("cancelled", f"tool '{ctx.name}' was cancelled")
        except Exception as exc:  # noqa: BLE001 - the one boundary where tool errors become results
            return _tool_error(ctx, exc)
        finally:
            _current.reset(token)
            if task is None:
                release()
        return normalise(value, self.max_output)

    def _in_worker(
        self, ctx: ToolContext, job: Callable[[], ToolResult], limit: float
    ) -> ToolResult:
        future = self._submit(ctx, job)
        try:
            return future.result(limit)
        except concurrent.futures.TimeoutError:
            return self._timed_out(ctx, future, limit)

    async def _in_worker_async(
        self, ctx: ToolContext, job: Callable[[], ToolResult], limit: float | None
    ) -> ToolResult:
        future = self._submit(ctx, job)
        waiting = asyncio.shield(asyncio.wrap_future(future))
        try:
            return await (waiting if limit is None else asyncio.wait_for(waiting, limit))
        except asyncio.TimeoutError:
            assert limit is not None
            return self._timed_out(ctx, future, limit)

    def _submit(
        self, ctx: ToolContext, job: Callable[[], ToolResult]
    ) -> concurrent.futures.Future[ToolResult]:
        """Queue ``job`` for a worker; the job holds the tool's version until it really ends."""
        release = _hold(ctx)
        context = contextvars.copy_context()

        def task() -> ToolResult:
            try:
                return context.run(job)
            finally:
                release()

        try:
            future = self._pool.submit(task)
        except RuntimeError:  # the host stopped between admission and now
            release()
            future = concurrent.futures.Future()
            future.set_result(ToolResult.fail("unavailable", "the tool host is stopped"))
            return future
        future.add_done_callback(lambda f: release() if f.cancelled() else None)
        return future

    def _timed_out(
        self, ctx: ToolContext, future: concurrent.futures.Future[Any], limit: float
    ) -> ToolResult:
        if future.cancel():
            return _timeout(ctx, limit, abandoned=False, queued=True)
        if self._pool.abandon(future):
            if self.metrics is not None:
                self.metrics.abandoned_threads += 1
            logger.warning(
                "tool {} ({}) timed out after {:g} s; its thread is abandoned and keeps running",
                ctx.name,
                ctx.call_id,
                limit,
            )
        return _timeout(ctx, limit, abandoned=True)

    # --- the host's loop ----------------------------------------------------------------------
    def _loop(self) -> LoopThread:
        with self._loop_lock:
            if self._loop_thread is None:
                self._loop_thread = LoopThread()
            return self._loop_thread

    def _on_loop_thread(self) -> bool:
        thread = self._loop_thread
        return thread is not None and thread.is_current

    def _run_on_loop(
        self, coro: Awaitable[ToolResult], ctx: ToolContext, limit: float | None
    ) -> ToolResult:
        """Run an async tool from sync code; return on time even if the loop is stuck."""
        if self._on_loop_thread():  # a tool on the host loop calling execute(): use a fresh loop
            with concurrent.futures.ThreadPoolExecutor(1) as spare:
                return spare.submit(asyncio.run, _awaited(coro)).result()
        future = self._loop().submit(_awaited(coro))
        try:
            return future.result(None if limit is None else limit + GRACE)
        except concurrent.futures.TimeoutError:
            future.cancel()
            assert limit is not None
            return _timeout(ctx, limit, abandoned=False)
        except concurrent.futures.CancelledError:  # the host stopped under the call
            return ToolResult.fail(
                "cancelled", f"tool '{ctx.name}' was cancelled: the host stopped"
            )

    def _run_coroutine(self, coro: Awaitable[ToolResult]) -> ToolResult:
        """For async interceptors in sync calls."""
        if self._on_loop_thread():
            with concurrent.futures.ThreadPoolExecutor(1) as spare:
                return spare.submit(asyncio.run, _awaited(coro)).result()
        return self._loop().submit(_awaited(coro)).result()


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (always assumed before 3.11)."""
    current = asyncio.current_task()
    return current is None or bool(getattr(current, "cancelling", lambda: 1)())


async def _awaited(awaitable: Awaitable[ToolResult]) -> ToolResult:
    return await awaitable


class _Collector:
    """Joins a generator's chunks (strings as they are, other values as JSON lines)."""

    def __init__(self, ctx: ToolContext, max_output: int) -> None:
        self._sink = ctx._sink
        self._parts: list[str] = []
        self._size = 0
        self._max = max_output

    def add(self, chunk: Any) -> None:
        text = chunk if isinstance(chunk, str) else normalise(chunk, self._max).output + "\n"
        if self._sink is not None:
            self._sink(text)
        if self._size <= self._max:
            self._parts.append(text)
            self._size += len(text)

    def text(self) -> str:
        return "".join(self._parts)


def _with_context(ctx: ToolContext) -> dict[str, Any]:
    parameter = ctx.tool.context_parameter
    return {**ctx.arguments, parameter: ctx} if parameter else ctx.arguments


def _hold(ctx: ToolContext) -> Callable[[], None]:
    """Take one more hold on the call's version; the returned callable releases it once."""
    owner = ctx._owner
    if owner is None:
        return lambda: None
    owner.retain()
    released = threading.Event()

    def release() -> None:
        if not released.is_set():
            released.set()
            owner.exit()

    return release


def _unknown(name: str, snapshot: Snapshot) -> ToolResult:
    suggestions = difflib.get_close_matches(str(name), list(snapshot.tools), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
    return ToolResult.fail("unknown_tool", f"unknown tool {name!r}{hint}", suggestions=suggestions)


def _denied(name: str, session: str | None, missing: list[str]) -> ToolResult:
    listed = ", ".join(repr(p) for p in missing)
    who = f"session {session!r}" if session is not None else "calls without a session"
    message = (
        f"tool {name!r} needs {listed}, not granted to {who}; grant with "
        f"host.permissions.grant({session!r}, {listed}) or PluginHost(default_permissions=...)"
    )
    return ToolResult.fail("permission_denied", message, missing=missing, session=session)


def _requires_action(ctx: ToolContext) -> ToolResult:
    try:
        arguments = pydantic_core.to_jsonable_python(ctx.arguments, fallback=str)
    except (pydantic_core.PydanticSerializationError, ValueError):
        arguments = {key: str(value) for key, value in ctx.arguments.items()}
    call = {"id": ctx.call_id, "name": ctx.name, "arguments": arguments}
    message = f"tool '{ctx.name}' is run by the client; the call is handed back to it"
    return ToolResult.fail("requires_action", message, call=call)


def _tool_error(ctx: ToolContext | None, exc: BaseException) -> ToolResult:
    where = f"{ctx.name} ({ctx.call_id})" if ctx is not None else "?"
    logger.opt(exception=exc).warning("tool {} raised {}", where, type(exc).__name__)
    text = str(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return ToolResult.fail("tool_error", message, type=type(exc).__name__)


def _timeout(
    ctx: ToolContext, limit: float, *, abandoned: bool, queued: bool = False
) -> ToolResult:
    message = f"tool '{ctx.name}' did not finish within {limit:g} s"
    if queued:
        message += " (it waited for a free worker and never started)"
    elif abandoned:
        message += "; its thread keeps running (only process isolation can stop it)"
    return ToolResult.fail("timeout", message, timeout=limit, abandoned=abandoned)


def _interceptor_failed(interceptor: Interceptor, exc: Exception) -> ToolResult:
    name = getattr(interceptor, "fn", interceptor)
    logger.opt(exception=exc).error("interceptor {!r} raised", name)
    return ToolResult.fail(
        "tool_error", f"interceptor {type(name).__name__} failed: {type(exc).__name__}: {exc}"
    )


def _checked_result(interceptor: Interceptor, result: Any) -> ToolResult:
    if isinstance(result, ToolResult):
        return result
    return ToolResult.fail(
        "tool_error",
        f"interceptor {type(interceptor).__name__} returned {type(result).__name__}, "
        "not a ToolResult; return proceed(ctx) or ToolResult.fail(...)",
    )
