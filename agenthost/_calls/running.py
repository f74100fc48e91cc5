"""Where an admitted call's tool runs, and how its time limit is kept.

* From sync code (``execute``): a sync tool without a limit runs in the
  caller's thread; with one it runs in the worker pool so the caller can stop
  waiting; an async tool runs on the host's loop thread.
* From async code (``aexecute``): an async tool runs on the caller's loop; a
  sync tool always runs in the worker pool, never on the loop.

A call holds the plugin version it started on until its tool really ends: a
timed-out tool that keeps running keeps holding it, so a reload never pulls
code out from under it and ``on_unload`` waits for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger

from agenthost._authoring.context import ToolContext
from agenthost._calls.boundary import adrain, ainvoke, drain, invoke
from agenthost._calls.metrics import Metrics
from agenthost._calls.outcomes import requires_action, timed_out
from agenthost._calls.results import ToolResult
from agenthost._calls.workers import LoopThread, WorkerPool

__all__ = ["GRACE", "Runner"]

GRACE = 1.0  # seconds a sync caller waits beyond the timeout for the loop to report it


class Runner:
    """The worker pool and the host's loop thread, and running a tool on them in time."""

    def __init__(self, max_workers: int, max_output: int, metrics: Metrics | None) -> None:
        self.pool = WorkerPool(max_workers)
        self.max_output = max_output
        self._metrics = metrics
        self._loop_thread: LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._orphans: set[asyncio.Future[Any]] = set()

    def stop(self) -> None:
        self.pool.shutdown()
        with self._loop_lock:
            if self._loop_thread is not None:
                self._loop_thread.stop()
                self._loop_thread = None

    # --- one call ------------------------------------------------------------------------------
    def run(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        """Run the call's tool from sync code, returning by ``limit`` (None: no limit)."""
        if ctx.tool.function is None or ctx.tool.definition_only:
            return requires_action(ctx)
        job = self._job(ctx)
        if job is None:
            return self._run_on_loop(self._acall(ctx, limit), ctx, limit)
        if limit is None:
            return job()
        return self._in_worker(ctx, job, limit)

    async def arun(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        """:meth:`run` on the running loop."""
        if ctx.tool.function is None or ctx.tool.definition_only:
            return requires_action(ctx)
        job = self._job(ctx)
        if job is None:
            return await self._acall(ctx, limit)
        return await self._in_worker_async(ctx, job, limit)

    def _job(self, ctx: ToolContext) -> Callable[[], ToolResult] | None:
        """The sync work for sync and generator tools (None for async ones)."""
        definition = ctx.tool
        fn = definition.function
        assert fn is not None
        if definition.kind == "generator":
            fn = functools.partial(drain, ctx, fn, self.max_output)
        elif definition.kind != "sync":
            return None
        return functools.partial(invoke, ctx, fn, _with_context(ctx), self.max_output)

    async def _acall(self, ctx: ToolContext, limit: float | None) -> ToolResult:
        """Run an async tool (or async generator) on the current loop, within ``limit``."""
        fn: Callable[..., Awaitable[Any]] | None = ctx.tool.function
        assert fn is not None
        if ctx.tool.kind == "async_generator":
            fn = functools.partial(adrain, ctx, fn, self.max_output)
        work = ainvoke(ctx, fn, _with_context(ctx), self.max_output)
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
            return timed_out(ctx, limit, abandoned=False)
        return task.result()

    # --- the worker pool -----------------------------------------------------------------------
    def _in_worker(
        self, ctx: ToolContext, job: Callable[[], ToolResult], limit: float
    ) -> ToolResult:
        future = self._submit(ctx, job)
        try:
            with self.pool.blocking():
                return future.result(limit)
        except concurrent.futures.TimeoutError:
            return self._timed_out(ctx, future, limit)

    async def _in_worker_async(
        self, ctx: ToolContext, job: Callable[[], ToolResult], limit: float | None
    ) -> ToolResult:
        future = self._submit(ctx, job)
        waiting = asyncio.shield(asyncio.wrap_future(future))
        try:
            with self.pool.blocking():  # a worker's own event loop, waiting for the pool
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
            future = self.pool.submit(task)
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
            return timed_out(ctx, limit, abandoned=False, queued=True)
        if self.pool.abandon(future):
            if self._metrics is not None:
                self._metrics.abandoned_threads += 1
            logger.warning(
                "tool {} ({}) timed out after {:g} s; its thread is abandoned and keeps running",
                ctx.name,
                ctx.call_id,
                limit,
            )
        return timed_out(ctx, limit, abandoned=True)

    # --- the host's loop -----------------------------------------------------------------------
    def loop(self) -> LoopThread:
        """The host's loop thread, started on first use (and again if it died)."""
        with self._loop_lock:
            if self._loop_thread is None or not self._loop_thread.alive:
                self._loop_thread = LoopThread()
            return self._loop_thread

    def on_loop_thread(self) -> bool:
        thread = self._loop_thread
        return thread is not None and thread.is_current

    def _run_on_loop(
        self, coro: Awaitable[ToolResult], ctx: ToolContext, limit: float | None
    ) -> ToolResult:
        """Run an async tool from sync code; return on time even if the loop is stuck."""
        if self.on_loop_thread():  # a tool on the host loop calling execute()
            return _on_a_fresh_loop(coro)
        future = self.loop().submit(_awaited(coro))
        try:
            with self.pool.blocking():
                return future.result(None if limit is None else limit + GRACE)
        except concurrent.futures.TimeoutError:
            future.cancel()
            assert limit is not None
            return timed_out(ctx, limit, abandoned=False)
        except concurrent.futures.CancelledError:  # the host stopped under the call
            return ToolResult.fail(
                "cancelled", f"tool '{ctx.name}' was cancelled: the host stopped"
            )

    def run_coroutine(self, coro: Awaitable[ToolResult]) -> ToolResult:
        """For async interceptors in sync calls."""
        if self.on_loop_thread():
            return _on_a_fresh_loop(coro)
        with self.pool.blocking():
            return self.loop().submit(_awaited(coro)).result()


async def _awaited(awaitable: Awaitable[ToolResult]) -> ToolResult:
    return await awaitable


def _on_a_fresh_loop(coro: Awaitable[ToolResult]) -> ToolResult:
    """Run ``coro`` from the host's loop thread itself, which cannot wait for its own loop."""
    with concurrent.futures.ThreadPoolExecutor(1) as spare:
        return spare.submit(asyncio.run, _awaited(coro)).result()


def _with_context(ctx: ToolContext) -> dict[str, Any]:
    parameter = ctx.tool.context_parameter
    return {**ctx.arguments, parameter: ctx} if parameter else ctx.arguments


def _hold(ctx: ToolContext) -> Callable[[], None]:
    """Take one more hold on the call's version; the returned callable releases it once."""
    owner = ctx._entry.owner if ctx._entry is not None else None
    if owner is None:
        return lambda: None
    owner.retain()
    released = threading.Event()

    def release() -> None:
        if not released.is_set():
            released.set()
            owner.exit()

    return release
