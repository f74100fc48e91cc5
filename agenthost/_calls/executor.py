"""The executor: a tool name and the model's arguments in, a ``ToolResult`` out, always.

``execute`` and ``aexecute`` take the same steps and share every one but the
waiting: :meth:`Executor._admit` looks the tool up in the current snapshot,
checks permissions (before the arguments are even parsed), validates the
arguments once and holds the tool's version, giving either the call's
``ToolContext`` or the result that refuses it. Then the interceptor chain runs
around the tool (see ``chain``), the tool runs where it belongs under its
limit (see ``running``), and the result gets its duration and is counted. A
plain tool (no permissions, no injected context, no timeout, no interceptors)
takes the first branch: the tool is entered right there, with nothing around
it. Tool code is entered only through ``boundary``; every failure along the way
becomes a result, and nothing a tool or its input does raises out of any call API.

The first branch is most calls' whole cost, so the two methods write out their
last few lines rather than share them through another call (which costs about
1% of an inline call); ``PluginHost`` passes their arguments by position for the
same reason.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from time import perf_counter
from typing import Any

from loguru import logger

from agenthost._authoring.context import ToolContext, _sink
from agenthost._authoring.definition import ToolDefinition
from agenthost._calls.boundary import ainvoke, invoke, traceback_text
from agenthost._calls.chain import athrough, through
from agenthost._calls.interceptors import Interceptor, as_interceptor
from agenthost._calls.metrics import Metrics
from agenthost._calls.outcomes import denied, invalid, stopped, unknown
from agenthost._calls.permissions import Permissions
from agenthost._calls.reading import Call, read_call
from agenthost._calls.results import ToolResult
from agenthost._calls.running import Runner
from agenthost._calls.streaming import Streaming
from agenthost._common.text import describe, exception_text
from agenthost._directory.records import Entry
from agenthost._directory.registry import Registry
from agenthost._errors import InvalidArgumentsError

__all__ = ["Executor"]

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
        self._runner = Runner(max_workers, max_output, self.metrics)
        self._interceptors: tuple[Interceptor, ...] = tuple(map(self._adapt, interceptors))
        # call_<pid>_1, call_<pid>_2, ...: next() on a count is atomic, so safe across threads
        self._ids = itertools.count(1)
        self._prefix = f"call_{os.getpid():x}_"
        self._stopped = False
        self._plain = not self._interceptors  # no host-wide interceptors, not stopped
        self.streams = Streaming(
            self.aexecute, refused=self._refused, new_id=self._new_id,
            loop=self._runner.loop, pool=self._runner.pool,
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
        return as_interceptor(interceptor, self._runner.run_coroutine)

    def refuse_calls(self) -> None:
        """From now on every call is ``unavailable`` (calls already running finish)."""
        self._stopped = True
        self._plain = False

    def stop(self) -> None:
        self.refuse_calls()
        self._runner.stop()

    # --- one call ------------------------------------------------------------------------------
    def execute(
        self,
        name: str,
        arguments: Any = None,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> ToolResult:
        """Run one call synchronously (from any thread) and return its result."""
        started = perf_counter()
        cid = call_id or f"{self._prefix}{next(self._ids)}"
        try:
            ctx = self._admit(name, arguments, session, cid, None)
            if type(ctx) is ToolResult:
                return self._finish(ctx, name, None, cid, started)
            entry: Entry = ctx._entry
            try:
                fn = entry.inline
                if fn is not None and self._plain and timeout is None and not interceptors:
                    result = invoke(ctx, fn, ctx.arguments, self.max_output)  # the first branch
                else:
                    result = self._run(ctx, timeout, interceptors)
            finally:
                if entry.owner is not None:
                    entry.owner.exit()
            if result.call_id != cid:  # made elsewhere (an interceptor, a refusal)
                return self._finish(result, name, ctx, cid, started)
            result.duration_ms = duration = (perf_counter() - started) * 1000
            if self.metrics is not None:
                self.metrics.record(
                    name, duration, None if result.error is None else result.error.code
                )
            return result
        except Exception as exc:  # noqa: BLE001 - the promise: a result, even for our own bugs
            return self._internal_error(exc, name, cid, started)

    async def aexecute(
        self,
        name: str,
        arguments: Any = None,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> ToolResult:
        """Run one call on the running event loop (sync tools go to worker threads)."""
        started = perf_counter()
        cid = call_id or f"{self._prefix}{next(self._ids)}"
        try:
            ctx = self._admit(name, arguments, session, cid, _sink.get())
            if type(ctx) is ToolResult:
                return self._finish(ctx, name, None, cid, started)
            entry: Entry = ctx._entry
            try:
                fn = entry.inline_async
                if fn is not None and self._plain and timeout is None and not interceptors:
                    result = await ainvoke(ctx, fn, ctx.arguments, self.max_output)  # likewise
                else:
                    result = await self._arun(ctx, timeout, interceptors)
            finally:
                if entry.owner is not None:
                    entry.owner.exit()
            if result.call_id != cid:  # made elsewhere (an interceptor, a refusal)
                return self._finish(result, name, ctx, cid, started)
            result.duration_ms = duration = (perf_counter() - started) * 1000
            if self.metrics is not None:
                self.metrics.record(
                    name, duration, None if result.error is None else result.error.code
                )
            return result
        except Exception as exc:  # noqa: BLE001 - the promise: a result, even for our own bugs
            return self._internal_error(exc, name, cid, started)

    def _run(
        self, ctx: ToolContext, timeout: float | None, interceptors: Iterable[Any]
    ) -> ToolResult:
        """Through the interceptors, then the tool where it belongs, under its limit."""
        limit = self._limit(ctx.tool, timeout)
        chain = self._chain(interceptors)
        if chain:
            return through(chain, ctx, lambda c: self._runner.run(c, limit))
        return self._runner.run(ctx, limit)

    async def _arun(
        self, ctx: ToolContext, timeout: float | None, interceptors: Iterable[Any]
    ) -> ToolResult:
        limit = self._limit(ctx.tool, timeout)
        chain = self._chain(interceptors)
        if chain:
            return await athrough(chain, ctx, lambda c: self._runner.arun(c, limit))
        return await self._runner.arun(ctx, limit)

    # --- batches -------------------------------------------------------------------------------
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
        if self._stopped or self._runner.on_loop_thread():  # from a tool on the host loop
            return [self._execute_read(c, session, timeout, interceptors) for c in calls]
        coro = self.aexecute_many(
            calls, session=session, timeout=timeout, interceptors=interceptors
        )
        try:
            with self._runner.pool.blocking():
                return self._runner.loop().submit(coro).result()
        except concurrent.futures.CancelledError:  # the host stopped under the batch
            failed = ToolResult.fail("cancelled", "the host stopped while the batch ran")
            return [failed] * len(calls)

    def _execute_read(
        self, call: Call, session: str | None, timeout: float | None, interceptors: Iterable[Any]
    ) -> ToolResult:
        read = read_call(call)
        if isinstance(read, ToolResult):
            return self._finish(read, "", None, self._new_id(), perf_counter())
        name, arguments, cid = read
        return self.execute(name, arguments, session=session, timeout=timeout,
                            interceptors=interceptors, call_id=cid)  # fmt: skip

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
            read = read_call(call)
            if isinstance(read, ToolResult):
                jobs.append(self._refused(read))
                continue
            name, arguments, cid = read
            jobs.append(self.aexecute(name, arguments, session=session, timeout=timeout,
                                      interceptors=interceptors, call_id=cid))  # fmt: skip
        return list(await asyncio.gather(*jobs))

    async def _refused(self, result: ToolResult) -> ToolResult:
        return self._finish(result, "", None, self._new_id(), perf_counter())

    def _new_id(self) -> str:
        return f"{self._prefix}{next(self._ids)}"

    # --- admission -----------------------------------------------------------------------------
    def _admit(
        self,
        name: Any,
        arguments: Any,
        session: str | None,
        cid: str,
        sink: Callable[[str], None] | None,
    ) -> ToolContext | ToolResult:
        """The call's context, its tool's version held; or the result that refuses it.

        In order: look the tool up, screen it (host stopped, unknown tool, missing
        permissions) before its arguments are read, validate them once, and hold the
        version; a version retired between the lookup and the hold is looked up again.
        """
        while True:
            try:
                entry = self._registry.snapshot.tools.get(name)
            except TypeError:  # an unhashable "name" from a hostile caller
                entry = None
            if entry is None or self._stopped or entry.permissions:
                refused = self._screen(entry, name, session)
                if refused is not None:
                    return refused
                assert entry is not None  # only a known tool passes the screen
            try:
                kwargs = entry.validate(arguments)
            except InvalidArgumentsError as exc:
                return invalid(exc)
            owner = entry.owner
            if owner is None or owner.enter():
                info = entry.info
                return ToolContext(info.definition, cid, session, arguments, kwargs, {},
                                   info.plugin, info.version, entry, sink)  # fmt: skip

    def _screen(self, entry: Entry | None, name: Any, session: str | None) -> ToolResult | None:
        """Why the call is refused before its arguments are read, or None."""
        if self._stopped:
            return stopped()
        if entry is None:
            return unknown(name, self._registry.snapshot)
        missing = self.permissions.missing(session, entry.permissions)
        return denied(name, session, missing) if missing else None

    def _limit(self, definition: ToolDefinition, timeout: float | None) -> float | None:
        limit = timeout if timeout is not None else definition.timeout
        if limit is None:
            limit = self.default_timeout
        # beyond what the system's clocks can wait for (292 years): no limit, not an error
        return None if limit is None or limit >= threading.TIMEOUT_MAX else limit

    def _chain(self, per_call: Iterable[Any]) -> tuple[Interceptor, ...]:
        if not per_call:
            return self._interceptors
        return self._interceptors + tuple(map(self._adapt, per_call))

    # --- finishing -----------------------------------------------------------------------------
    def _finish(
        self, result: ToolResult, name: Any, ctx: ToolContext | None, cid: str, started: float
    ) -> ToolResult:
        """Stamp the call's identity and duration on a result made elsewhere (a refusal, an
        interceptor's, a failure), and count it."""
        if result.call_id:  # handed out before (a cached result): never change it
            result = replace(result)
        result.tool = name if isinstance(name, str) else ""
        result.call_id = cid
        if ctx is not None:
            result.plugin, result.version = ctx.plugin, ctx.version
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
            lambda: traceback_text(exc),
        )
        message = f"agenthost failed to run the call: {exception_text(exc)}"
        return self._finish(ToolResult.fail("tool_error", message), name, None, cid, started)
