"""Interceptors: an ordered chain around every call (host-wide first, then per call).

An interceptor receives the call's :class:`ToolContext` and a ``proceed``
callable that runs the rest of the chain and the tool. It may return without
proceeding (a cache hit, a rejection via ``ToolResult.fail(code, ...)``), call
``proceed`` more than once (retry), or add ``ctx.attributes``.

Write one as a class with ``intercept`` (for ``execute``) and/or ``aintercept``
(for ``aexecute``), or as a plain function ``(ctx, proceed) -> ToolResult``,
sync or ``async def``. A sync function in an async call runs in a worker
thread; an async function in a sync call runs on the host's loop. The built-in
ones implement both forms natively.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

import pydantic_core
from loguru import logger

from agenthost._authoring.context import ToolContext
from agenthost._calls.results import ToolResult
from agenthost._common.masking import DEFAULT_SECRET_KEYS, jsonable, mask_secrets

__all__ = [
    "AsyncProceed",
    "CachingInterceptor",
    "Interceptor",
    "LoggingInterceptor",
    "Proceed",
    "RetryInterceptor",
    "as_interceptor",
    "masked_arguments",
]

Proceed = Callable[[ToolContext], ToolResult]
AsyncProceed = Callable[[ToolContext], Awaitable[ToolResult]]


class Interceptor:
    """Base class; the default implementations just proceed."""

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        return proceed(ctx)

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        return await proceed(ctx)


class _SyncFunction(Interceptor):
    def __init__(self, fn: Callable[[ToolContext, Proceed], ToolResult]) -> None:
        self.fn = fn

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        return self.fn(ctx, proceed)

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        loop = asyncio.get_running_loop()

        def blocking_proceed(context: ToolContext) -> ToolResult:
            return asyncio.run_coroutine_threadsafe(_awaited(proceed(context)), loop).result()

        return await asyncio.to_thread(self.fn, ctx, blocking_proceed)


class _AsyncFunction(Interceptor):
    def __init__(
        self,
        fn: Callable[[ToolContext, AsyncProceed], Awaitable[ToolResult]],
        run: Callable[[Awaitable[ToolResult]], ToolResult],
    ) -> None:
        self.fn = fn
        self._run = run  # runs a coroutine to completion on the host loop

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        async def async_proceed(context: ToolContext) -> ToolResult:
            return await asyncio.to_thread(proceed, context)

        return self._run(self.fn(ctx, async_proceed))

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        return await self.fn(ctx, proceed)


class _Both(Interceptor):
    def __init__(self, for_sync: Interceptor, for_async: Interceptor) -> None:
        self._sync, self._async = for_sync, for_async

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        return self._sync.intercept(ctx, proceed)

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        return await self._async.aintercept(ctx, proceed)


async def _awaited(awaitable: Awaitable[ToolResult]) -> ToolResult:
    return await awaitable


def as_interceptor(obj: Any, run: Callable[[Awaitable[ToolResult]], ToolResult]) -> Interceptor:
    """An :class:`Interceptor` for ``obj``: an instance, or a sync or async function."""
    if isinstance(obj, Interceptor):
        return obj
    sync, asynchronous = getattr(obj, "intercept", None), getattr(obj, "aintercept", None)
    if sync is not None or asynchronous is not None:  # duck-typed: adapt the missing form
        return _Both(
            _SyncFunction(sync) if sync else _AsyncFunction(asynchronous, run),  # type: ignore[arg-type]
            _AsyncFunction(asynchronous, run) if asynchronous else _SyncFunction(sync),  # type: ignore[arg-type]
        )
    if inspect.iscoroutinefunction(obj):
        return _AsyncFunction(obj, run)
    if callable(obj):
        return _SyncFunction(obj)
    raise TypeError(f"an interceptor must be callable or an Interceptor, not {type(obj).__name__}")


def masked_arguments(ctx: ToolContext, keys: Iterable[str] = DEFAULT_SECRET_KEYS) -> Any:
    """The call's validated arguments as JSON values, secrets masked."""
    return mask_secrets(jsonable(ctx.arguments), keys)


class LoggingInterceptor(Interceptor):
    """Logs each call and its outcome through loguru, with secrets masked.

    The library's logger is disabled until the application calls
    ``logger.enable("agenthost")``; masking only runs for messages emitted.
    """

    def __init__(
        self, *, level: str = "INFO", secret_keys: Iterable[str] = DEFAULT_SECRET_KEYS
    ) -> None:
        self.level = level
        self.secret_keys = tuple(secret_keys)
        # Built once: opt() and bind() on every call would cost more than the call itself.
        self._log = logger.opt(lazy=True)

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        self._before(ctx)
        started = time.perf_counter()
        result = proceed(ctx)
        self._after(ctx, result, started)
        return result

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        self._before(ctx)
        started = time.perf_counter()
        result = await proceed(ctx)
        self._after(ctx, result, started)
        return result

    def _before(self, ctx: ToolContext) -> None:
        self._log.log(
            self.level,
            "tool call {} {} session={} arguments={}",
            lambda: ctx.name,
            lambda: ctx.call_id,
            lambda: ctx.session,
            lambda: json.dumps(masked_arguments(ctx, self.secret_keys), default=str),
        )

    def _after(self, ctx: ToolContext, result: ToolResult, started: float) -> None:
        elapsed = (time.perf_counter() - started) * 1000
        self._log.log(
            self.level,
            "tool call {} {} -> {} in {:.2f} ms",
            lambda: ctx.name,
            lambda: ctx.call_id,
            lambda: (
                "ok" if result.error is None else f"{result.error.code}: {result.error.message}"
            ),
            lambda: elapsed,
        )


class CachingInterceptor(Interceptor):
    """Caches successful results of tools that opt in with ``@tool(cache_ttl=seconds)``.

    Keyed by the tool version, the session (unless ``per_session=False``) and
    the canonical JSON of the validated arguments; a reload never serves the old
    code's answers. Hits set ``ctx.attributes["cache"] = "hit"``.
    """

    def __init__(
        self,
        *,
        max_entries: int = 1024,
        per_session: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.per_session = per_session
        self._clock = clock
        self._entries: OrderedDict[Any, tuple[float, ToolResult]] = OrderedDict()
        self._lock = threading.Lock()

    def _key(self, ctx: ToolContext) -> Any:
        try:
            arguments = pydantic_core.to_json(ctx.arguments, by_alias=True).decode()
            canonical = json.dumps(json.loads(arguments), sort_keys=True)
        except (pydantic_core.PydanticSerializationError, ValueError):
            return None
        return (ctx.tool, ctx.session if self.per_session else None, canonical)

    def _lookup(self, ctx: ToolContext) -> tuple[Any, ToolResult | None]:
        if ctx.tool.cache_ttl is None:
            return None, None
        key = self._key(ctx)
        if key is None:
            return None, None
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found[0] > self._clock():
                self._entries.move_to_end(key)
                ctx.attributes["cache"] = "hit"
                return key, replace(found[1], call_id="")
            self._entries.pop(key, None)
        ctx.attributes["cache"] = "miss"
        return key, None

    def _store(self, ctx: ToolContext, key: Any, result: ToolResult) -> None:
        if key is None or not result.success or ctx.tool.cache_ttl is None:
            return
        with self._lock:
            self._entries[key] = (self._clock() + ctx.tool.cache_ttl, replace(result))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        key, hit = self._lookup(ctx)
        if hit is not None:
            return hit
        result = proceed(ctx)
        self._store(ctx, key, result)
        return result

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        key, hit = self._lookup(ctx)
        if hit is not None:
            return hit
        result = await proceed(ctx)
        self._store(ctx, key, result)
        return result

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class RetryInterceptor(Interceptor):
    """Retries failed calls of tools marked ``idempotent=True`` that ask for ``retries=n``.

    Only failures whose code is in ``retry_on`` are retried, after an
    exponential backoff with jitter. ``ctx.attributes["attempts"]`` says how
    many runs it took.
    """

    def __init__(
        self,
        *,
        retry_on: Iterable[str] = ("tool_error", "timeout"),
        backoff: float = 0.1,
        factor: float = 2.0,
        max_backoff: float = 5.0,
        jitter: float = 0.1,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.retry_on = frozenset(retry_on)
        self.backoff, self.factor, self.max_backoff, self.jitter = (
            backoff,
            factor,
            max_backoff,
            jitter,
        )
        self._sleep, self._async_sleep = sleep, async_sleep

    def _retries(self, ctx: ToolContext) -> int:
        tool = ctx.tool
        return tool.retries if tool.hints.idempotent else 0

    def _delay(self, attempt: int) -> float:
        base = min(self.max_backoff, self.backoff * self.factor**attempt)
        return base * (1 + random.uniform(-self.jitter, self.jitter))

    def _again(self, result: ToolResult, attempt: int, retries: int) -> bool:
        return result.error is not None and result.error.code in self.retry_on and attempt < retries

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        retries = self._retries(ctx)
        attempt = 0
        result = proceed(ctx)
        while self._again(result, attempt, retries):
            self._sleep(self._delay(attempt))
            attempt += 1
            result = proceed(ctx)
        ctx.attributes["attempts"] = attempt + 1
        return result

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        retries = self._retries(ctx)
        attempt = 0
        result = await proceed(ctx)
        while self._again(result, attempt, retries):
            await self._async_sleep(self._delay(attempt))
            attempt += 1
            result = await proceed(ctx)
        ctx.attributes["attempts"] = attempt + 1
        return result
