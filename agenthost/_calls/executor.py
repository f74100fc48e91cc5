"""The executor: a tool name and the model's arguments in, a ``ToolResult`` out, always.

Order of a call (``execute`` and ``aexecute`` take the same steps): look up
the tool in the current snapshot, check permissions (before the arguments are
even parsed), validate the arguments once, run the interceptor chain, run the
tool under its timeout, normalise the return value, finish the result. Every
failure along the way becomes a result with an error code; nothing a tool or
its input does raises out of any call API. A plain tool (no permissions, no
injected context, no timeout, no interceptors) takes the first branch: the
same steps with nothing around the tool.

Tool code is entered at exactly one place per kind of call: :meth:`_invoke`
for sync functions and generators, :meth:`_ainvoke` for coroutines and async
generators. Each turns anything the tool raises, ``BaseException`` included,
into a result before it can reach a worker thread or the event loop.

Where a tool runs:

* ``execute``: a sync tool without a timeout runs inline in the caller's
  thread (the first branch: nothing else to do); with a timeout it runs in the
  worker pool so the caller can stop waiting; async tools run on the host's
  loop thread.
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
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from time import perf_counter
from typing import Any

from loguru import logger

from agenthost._authoring.context import ToolContext, _current, _sink
from agenthost._authoring.definition import ToolDefinition
from agenthost._calls.interceptors import Interceptor, as_interceptor
from agenthost._calls.metrics import Metrics
from agenthost._calls.permissions import Permissions
from agenthost._calls.reading import Call, read_call
from agenthost._calls.results import ToolResult, render
from agenthost._calls.streaming import Streaming
from agenthost._calls.workers import LoopThread, WorkerPool
from agenthost._common.masking import jsonable, redact, secret_values
from agenthost._common.text import describe, exception_text, type_name
from agenthost._directory.registry import Entry, Registry, Snapshot, ToolInfo
from agenthost._directory.scan import defines
from agenthost._errors import InvalidArgumentsError

__all__ = ["Executor"]

GRACE = 1.0  # seconds a sync caller waits beyond the timeout for the loop to report it
UNKNOWN = "(unknown)"  # metrics key for calls to tools that do not exist


class Executor:
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
        # call_<pid>_1, call_<pid>_2, ...: next() on a count is atomic, so safe across threads
        self._ids = itertools.count(1)
        self._prefix = f"call_{os.getpid():x}_"
        self._orphans: set[asyncio.Future[Any]] = set()
        self._stopped = False
        self._plain = not self._interceptors  # no host-wide interceptors, not stopped
        self.streams = Streaming(
            self.aexecute, refused=self._refused, new_id=self._new_id, loop=self._loop,
            pool=self._pool,
        )  # fmt: skip

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
        self.refuse_calls()
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
        try:
            try:
                entry = self._registry.snapshot.tools.get(name)
            except TypeError:  # an unhashable "name" from a hostile caller
                entry = None
            if entry is None or self._stopped or entry.permissions:
                refused = self._screen(entry, name, session)
                if refused is not None:
                    return self._finish(refused, name, None, cid, started)
                assert entry is not None  # only a known tool passes the screen
            try:
                kwargs = entry.validate(arguments)
            except InvalidArgumentsError as exc:
                return self._finish(_invalid(exc), name, None, cid, started)
            owner = entry.owner
            if owner is not None and not owner.enter():  # that version just retired
                return self.execute(name, arguments, session=session, timeout=timeout,
                                    interceptors=interceptors, call_id=cid)  # fmt: skip
            info = entry.info
            ctx = ToolContext(info.definition, cid, session, arguments, kwargs, {},
                              info.plugin, info.version, owner)  # fmt: skip
            try:
                if (
                    entry.inline is not None
                    and self._plain
                    and timeout is None
                    and not interceptors
                ):  # the first branch: a plain sync tool, nothing to do around it
                    result = self._invoke(ctx, entry.inline, kwargs, name, info, cid)
                else:
                    limit = self._limit(info.definition, timeout)
                    chain = self._chain(interceptors)
                    if chain:
                        result = self._through(chain, 0, ctx, lambda c: self._run(c, limit))
                    else:
                        result = self._run(ctx, limit)
            finally:
                if owner is not None:
                    owner.exit()
            if result.call_id != cid:  # not made for this call by the boundary
                return self._finish(result, name, info, cid, started)
            result.duration_ms = duration = (perf_counter() - started) * 1000
            if self.metrics is not None:
                self.metrics.record(
                    name, duration, None if result.error is None else result.error.code
                )
            return result
        except Exception as exc:  # noqa: BLE001 - the promise: a result, even for our own bugs
            return self._internal_error(exc, name, cid, started)

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
        if self._stopped or self._on_loop_thread():  # from a tool on the host loop: no waiting
            return [self._execute_spec(c, session, timeout, interceptors) for c in calls]
        coro = self.aexecute_many(
            calls, session=session, timeout=timeout, interceptors=interceptors
        )
        try:
            with self._pool.blocking():
                return self._loop().submit(coro).result()
        except concurrent.futures.CancelledError:  # the host stopped under the batch
            return [ToolResult.fail("cancelled", "the host stopped while the batch ran")] * len(
                calls
            )

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
        """Run one call on the running event loop (sync tools go to worker threads).

        The same steps as :meth:`execute`, awaiting where that one waits.
        """
        started = perf_counter()
        cid = call_id or f"{self._prefix}{next(self._ids)}"
        try:
            try:
                entry = self._registry.snapshot.tools.get(name)
            except TypeError:  # an unhashable "name" from a hostile caller
                entry = None
            if entry is None or self._stopped or entry.permissions:
                refused = self._screen(entry, name, session)
                if refused is not None:
                    return self._finish(refused, name, None, cid, started)
                assert entry is not None  # only a known tool passes the screen
            try:
                kwargs = entry.validate(arguments)
            except InvalidArgumentsError as exc:
                return self._finish(_invalid(exc), name, None, cid, started)
            owner = entry.owner
            if owner is not None and not owner.enter():  # that version just retired
                return await self.aexecute(name, arguments, session=session, timeout=timeout,
                                           interceptors=interceptors, call_id=cid)  # fmt: skip
            info = entry.info
            ctx = ToolContext(info.definition, cid, session, arguments, kwargs, {},
                              info.plugin, info.version, owner, _sink.get())  # fmt: skip
            try:
                if (
                    entry.inline_async is not None
                    and self._plain
                    and timeout is None
                    and not interceptors
                ):  # the first branch: a plain async tool, awaited right here
                    result = await self._ainvoke(ctx, entry.inline_async, kwargs, name, info, cid)
                else:
                    limit = self._limit(info.definition, timeout)
                    chain = self._chain(interceptors)
                    if chain:
                        result = await self._athrough(chain, 0, ctx, lambda c: self._arun(c, limit))
                    else:
                        result = await self._arun(ctx, limit)
            finally:
                if owner is not None:
                    owner.exit()
            if result.call_id != cid:  # not made for this call by the boundary
                return self._finish(result, name, info, cid, started)
            result.duration_ms = duration = (perf_counter() - started) * 1000
            if self.metrics is not None:
                self.metrics.record(
                    name, duration, None if result.error is None else result.error.code
                )
            return result
        except Exception as exc:  # noqa: BLE001 - the promise: a result, even for our own bugs
            return self._internal_error(exc, name, cid, started)

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
            jobs.append(
                self.aexecute(
                    name,
                    arguments,
                    session=session,
                    timeout=timeout,
                    interceptors=interceptors,
                    call_id=cid,
                )
            )
        return list(await asyncio.gather(*jobs))

    async def _refused(self, result: ToolResult) -> ToolResult:
        return self._finish(result, "", None, self._new_id(), perf_counter())

    def _new_id(self) -> str:
        return f"{self._prefix}{next(self._ids)}"

    # --- admission and finishing --------------------------------------------------------------
    # execute() and aexecute() admit a call in the same order: look the tool up, screen it
    # (host stopped, unknown tool, missing permissions), validate the arguments once, and
    # hold the tool's version for the call. The uncommon outcomes are worked out here.

    def _screen(self, entry: Entry | None, name: Any, session: str | None) -> ToolResult | None:
        """Why the call is refused before its arguments are read, or None."""
        if self._stopped:
            return ToolResult.fail("unavailable", "the tool host is stopped; no calls are taken")
        if entry is None:
            if not isinstance(name, str):
                return ToolResult.fail(
                    "unknown_tool",
                    f"a tool name is a string, not {type_name(name)}",
                    suggestions=[],
                )
            return _unknown(name, self._registry.snapshot)
        missing = self.permissions.missing(session, entry.permissions)
        return _denied(name, session, missing) if missing else None

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
        self, result: ToolResult, name: Any, info: ToolInfo | None, cid: str, started: float
    ) -> ToolResult:
        """Stamp the call's identity and duration on a result made elsewhere (a refusal, an
        interceptor's, a failure), and count it. A result the boundary made for this call
        already carries its identity: the callers stamp only its duration."""
        if result.call_id:  # handed out before (a cached result): never change it
            result = replace(result)
        result.tool = name if isinstance(name, str) else ""
        result.call_id = cid
        if info is not None:
            result.plugin, result.version = info.plugin, info.version
        result.duration_ms = duration = (perf_counter() - started) * 1000
        if self.metrics is not None:
            error = result.error
            key = UNKNOWN if error is not None and error.code == "unknown_tool" else result.tool
            self.metrics.record(key, duration, error.code if error is not None else None)
        return result

    def _internal_error(self, exc: Exception, name: Any, cid: str, started: float) -> ToolResult:
        """A result for a failure of agenthost itself (a bug): logged with its traceback."""
        logger.opt(lazy=True).error(
            "agenthost failed while running call {} of {}:\n{}",
            lambda: cid,
            lambda: describe(name),
            lambda: _traceback(exc),
        )
        message = f"agenthost failed to run the call: {exception_text(exc)}"
        return self._finish(ToolResult.fail("tool_error", message), name, None, cid, started)

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
        except BaseException as exc:  # noqa: BLE001 - an interceptor's failure becomes a result
            return _interceptor_failed(ctx, interceptor, exc)
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
        except asyncio.CancelledError:
            if _cancelling():
                raise
            return _cancelled(ctx)
        except BaseException as exc:  # noqa: BLE001 - an interceptor's failure becomes a result
            return _interceptor_failed(ctx, interceptor, exc)
        return _checked_result(interceptor, result)

    # --- entering tool code: the two boundaries ---------------------------------------------
    def _invoke(
        self,
        ctx: ToolContext,
        fn: Callable[..., Any],
        kwargs: dict[str, Any],
        name: str,
        info: ToolInfo | ToolContext,
        cid: str,
    ) -> ToolResult:
        """Run sync tool code (a function, or a generator drained) and render what it returns.

        ``name``, ``info`` (its ``plugin`` and ``version``) and ``cid`` are the call's
        identity, stamped on the result.
        """
        token = _current.set(ctx)
        try:
            output, data, truncated = render(fn(**kwargs), self.max_output)
        except BaseException as exc:  # noqa: BLE001 - the one boundary of sync tool code
            return _tool_error(ctx, exc)
        finally:
            _current.reset(token)
        return ToolResult(True, output, data, None, name, info.plugin, info.version, cid, 0.0,
                          truncated)  # fmt: skip

    async def _ainvoke(
        self,
        ctx: ToolContext,
        fn: Callable[..., Awaitable[Any]],
        kwargs: dict[str, Any],
        name: str,
        info: ToolInfo | ToolContext,
        cid: str,
    ) -> ToolResult:
        """Await async tool code (a coroutine, or an async generator drained) and render it."""
        token = _current.set(ctx)
        try:
            output, data, truncated = render(await fn(**kwargs), self.max_output)
        except asyncio.CancelledError:
            if _cancelling():
                raise  # our caller is being cancelled: let it
            return _cancelled(ctx)
        except BaseException as exc:  # noqa: BLE001 - the one boundary of async tool code
            return _tool_error(ctx, exc)
        finally:
            _current.reset(token)
        return ToolResult(True, output, data, None, name, info.plugin, info.version, cid, 0.0,
                          truncated)  # fmt: skip

    # --- running the tool ---------------------------------------------------------------------
    def _job(self, ctx: ToolContext) -> Callable[[], ToolResult] | None:
        """The sync work for sync and generator tools (None for async ones)."""
        definition = ctx.tool
        fn = definition.function
        assert fn is not None
        kwargs = _with_context(ctx)
        if definition.kind == "sync":
            return functools.partial(self._invoke, ctx, fn, kwargs, ctx.name, ctx, ctx.call_id)
        if definition.kind == "generator":
            drain = functools.partial(self._drain, ctx, fn)
            return functools.partial(self._invoke, ctx, drain, kwargs, ctx.name, ctx, ctx.call_id)
        return None

    def _run(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        definition = ctx.tool
        if definition.function is None or definition.definition_only:
            return _requires_action(ctx)
        job = self._job(ctx)
        if job is None:
            return self._run_on_loop(self._acall(ctx, limit), ctx, limit)
        if limit is None:
            return job()
        return self._in_worker(ctx, job, limit)

    async def _arun(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        if ctx.tool.function is None or ctx.tool.definition_only:
            return _requires_action(ctx)
        job = self._job(ctx)
        if job is None:
            return await self._acall(ctx, limit)
        return await self._in_worker_async(ctx, job, limit)

    def _drain(self, ctx: ToolContext, fn: Callable[..., Iterable[Any]], /, **kwargs: Any) -> str:
        collected = _Collector(ctx, self.max_output)
        for chunk in fn(**kwargs):
            collected.add(chunk)
        return collected.text()

    async def _adrain(self, ctx: ToolContext, fn: Callable[..., Any], /, **kwargs: Any) -> str:
        collected = _Collector(ctx, self.max_output)
        async for chunk in fn(**kwargs):
            collected.add(chunk)
        return collected.text()

    async def _acall(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        """Run an async tool (or async generator) on the current loop, within ``limit``."""
        fn: Callable[..., Awaitable[Any]] | None = ctx.tool.function
        assert fn is not None
        if ctx.tool.kind == "async_generator":
            fn = functools.partial(self._adrain, ctx, fn)
        kwargs = _with_context(ctx)
        work = self._ainvoke(ctx, fn, kwargs, ctx.name, ctx, ctx.call_id)
        if limit is None:
            return await work
        release = _hold(ctx)
        task = asyncio.ensure_future(work)
        task.add_done_callback(lambda _: release())
        try:
            done, _ = await asyncio.wait((task,), timeout=limit)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.cancel()
            self._orphans.add(task)  # let it finish cancelling; keep a reference
            task.add_done_callback(self._orphans.discard)
            return _timeout(ctx, limit, abandoned=False)
        return task.result()

    def _in_worker(
        self, ctx: ToolContext, job: Callable[[], ToolResult], limit: float
    ) -> ToolResult:
        future = self._submit(ctx, job)
        try:
            with self._pool.blocking():
                return future.result(limit)
        except concurrent.futures.TimeoutError:
            return self._timed_out(ctx, future, limit)

    async def _in_worker_async(
        self, ctx: ToolContext, job: Callable[[], ToolResult], limit: float | None
    ) -> ToolResult:
        future = self._submit(ctx, job)
        waiting = asyncio.shield(asyncio.wrap_future(future))
        try:
            with self._pool.blocking():  # a worker's own event loop, waiting for the pool
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
            if self._loop_thread is None or not self._loop_thread.alive:
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
            with self._pool.blocking():
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
        with self._pool.blocking():
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
        text = chunk if isinstance(chunk, str) else render(chunk, self._max)[0] + "\n"
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
    failed = [
        p for p in snapshot.plugins.values() if p.status == "failed" and defines(p.path, name)
    ]
    if failed:  # the tool exists on disk; its plugin did not load
        plugin = failed[0]
        return ToolResult.fail(
            "unknown_tool",
            f"unknown tool {describe(name)!r}: plugin '{plugin.name}' ({plugin.path}) defines "
            f"it but failed to load: {plugin.error}",
            failed_plugin=plugin.name,
        )
    suggestions = difflib.get_close_matches(name, list(snapshot.tools), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
    return ToolResult.fail(
        "unknown_tool", f"unknown tool {describe(name)!r}{hint}", suggestions=suggestions
    )


def _denied(name: str, session: str | None, missing: list[str]) -> ToolResult:
    listed = ", ".join(repr(p) for p in missing)
    who = f"session {session!r}" if session is not None else "calls without a session"
    message = (
        f"tool {name!r} needs {listed}, not granted to {who}; grant with "
        f"host.permissions.grant({session!r}, {listed}) or PluginHost(default_permissions=...)"
    )
    return ToolResult.fail("permission_denied", message, missing=missing, session=session)


def _invalid(exc: InvalidArgumentsError) -> ToolResult:
    problems = [p.as_dict() for p in exc.problems]
    return ToolResult.fail("invalid_arguments", str(exc), errors=problems, error_count=exc.total)


def _requires_action(ctx: ToolContext) -> ToolResult:
    call = {"id": ctx.call_id, "name": ctx.name, "arguments": jsonable(ctx.arguments)}
    message = f"tool '{ctx.name}' is run by the client; the call is handed back to it"
    return ToolResult.fail("requires_action", message, call=call)


def _cancelled(ctx: ToolContext) -> ToolResult:
    return ToolResult.fail("cancelled", f"tool '{ctx.name}' was cancelled")


def _secrets(ctx: ToolContext) -> tuple[str, ...]:
    return secret_values(jsonable(ctx.arguments))


def _tool_error(ctx: ToolContext, exc: BaseException) -> ToolResult:
    """The result of a tool that raised; its traceback goes to the log, secrets masked."""
    secrets = _secrets(ctx)
    message = redact(exception_text(exc), secrets)
    logger.opt(lazy=True).warning(
        "tool {} ({}) raised {}\n{}",
        lambda: ctx.name,
        lambda: ctx.call_id,
        lambda: message,
        lambda: redact(_traceback(exc), secrets),
    )
    return ToolResult.fail("tool_error", message, type=type_name(exc))


def _traceback(exc: BaseException) -> str:
    """The traceback as text: frames and source lines, never local variables' values."""
    try:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    except BaseException:  # noqa: BLE001 - a hostile exception must not break the report
        return f"(the traceback of {type_name(exc)} cannot be shown)"


def _timeout(
    ctx: ToolContext, limit: float, *, abandoned: bool, queued: bool = False
) -> ToolResult:
    message = f"tool '{ctx.name}' did not finish within {limit:g} s"
    if queued:
        message += " (it waited for a free worker and never started)"
    elif abandoned:
        message += "; its thread keeps running (only process isolation can stop it)"
    return ToolResult.fail("timeout", message, timeout=limit, abandoned=abandoned)


def _interceptor_failed(
    ctx: ToolContext, interceptor: Interceptor, exc: BaseException
) -> ToolResult:
    name = type_name(getattr(interceptor, "fn", interceptor))
    secrets = _secrets(ctx)
    message = f"interceptor {name} failed: {redact(exception_text(exc), secrets)}"
    logger.opt(lazy=True).error(
        "{} in call {}\n{}",
        lambda: message,
        lambda: ctx.call_id,
        lambda: redact(_traceback(exc), secrets),
    )
    return ToolResult.fail("tool_error", message)


def _checked_result(interceptor: Interceptor, result: Any) -> ToolResult:
    if isinstance(result, ToolResult):
        return result
    return ToolResult.fail(
        "tool_error",
        f"interceptor {type_name(interceptor)} returned {type_name(result)}, "
        "not a ToolResult; return proceed(ctx) or ToolResult.fail(...)",
    )
