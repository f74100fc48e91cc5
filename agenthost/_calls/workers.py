"""Where tools run when not inline: a bounded worker pool and the host's event loop thread.

A Python thread cannot be killed. When a sync tool outlives its timeout the
caller stops waiting and the worker is *abandoned*: it is no longer counted
against the pool, so a fresh worker takes its place and one hung tool cannot
starve every later call. The abandoned thread ends whenever the tool returns;
only the process isolation level can stop it for real.

A tool may itself call the host (an agent exposed as a tool, a tool composing
others). A worker waiting for such a nested call is not counted either while
it waits (:meth:`WorkerPool.blocking`), so a chain of nested calls deeper than
``max_workers`` never starves the pool; the pool shrinks back to its bound as
those workers finish.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from queue import SimpleQueue
from typing import Any, TypeVar

from loguru import logger

__all__ = ["LoopThread", "WorkerPool"]

T = TypeVar("T")


class _Task:
    __slots__ = ("abandoned", "fn", "future")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.abandoned = False


class _Worker(threading.local):
    pool: WorkerPool | None = None  # the pool this thread works for
    waiting: bool = False  # inside blocking()


_worker = _Worker()
_NOTHING = contextlib.nullcontext()


class WorkerPool:
    """At most ``max_workers`` threads run tools; abandoned and waiting ones are replaced."""

    def __init__(self, max_workers: int) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self._queue: SimpleQueue[_Task | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._workers = 0  # counted workers (abandoned and waiting ones are not)
        self._idle = 0  # workers waiting for a task
        self._pending = 0  # tasks queued but not picked up
        self._tasks: dict[concurrent.futures.Future[Any], _Task] = {}
        self._closed = False

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        task = _Task(fn)
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down")
            self._tasks[task.future] = task
            self._pending += 1
            self._grow()
        self._queue.put(task)
        return task.future

    def abandon(self, future: concurrent.futures.Future[Any]) -> bool:
        """Stop counting the worker that runs ``future``; it exits once the tool returns."""
        with self._lock:
            task = self._tasks.get(future)
            if task is None or task.abandoned or future.done():
                return False
            task.abandoned = True
            self._workers -= 1
            self._grow()
            return True

    def blocking(self) -> contextlib.AbstractContextManager[None]:
        """Around a wait by one of this pool's workers for a call that may need a worker."""
        if _worker.pool is not self or _worker.waiting:
            return _NOTHING  # not one of ours: the common case, kept cheap
        return self._waiting()

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        with self._lock:
            self._workers -= 1
            self._grow()
        _worker.waiting = True
        try:
            yield
        finally:
            _worker.waiting = False
            with self._lock:
                self._workers += 1

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            workers = self._workers
        for _ in range(workers):
            self._queue.put(None)

    def _grow(self) -> None:
        if self._pending > self._idle and self._workers < self.max_workers:
            self._workers += 1
            threading.Thread(target=self._work, name="agenthost-worker", daemon=True).start()

    def _work(self) -> None:
        _worker.pool = self
        while True:
            with self._lock:
                self._idle += 1
            task = self._queue.get()
            with self._lock:
                self._idle -= 1
                if task is not None:
                    self._pending -= 1
            if task is None:
                return
            if task.future.set_running_or_notify_cancel():
                try:
                    task.future.set_result(task.fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                    task.future.set_exception(exc)
            with self._lock:
                self._tasks.pop(task.future, None)
                if task.abandoned:
                    return  # a replacement was allowed to start in its place
                if self._workers > self.max_workers:
                    self._workers -= 1  # one more than the bound since a nested wait ended
                    return


class LoopThread:
    """The host's own asyncio loop, in a daemon thread, for async tools called from sync code.

    Tool code runs inside the executor's boundary, but should anything else
    raise ``SystemExit`` or ``KeyboardInterrupt`` out of a task (asyncio lets
    those escape the loop), the loop is run again rather than lost with its
    thread, so every later call still has a loop.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="agenthost-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        while not self.loop.is_closed():
            try:
                self.loop.run_forever()
                return  # stopped on purpose
            except BaseException as exc:  # noqa: BLE001 - keep the loop alive for later calls
                logger.error("agenthost's event loop caught {}; it keeps running", repr(exc))

    @property
    def is_current(self) -> bool:
        return threading.current_thread() is self._thread

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        """Cancel what still runs on the loop (callers get ``cancelled``), then stop it."""
        if self.loop.is_closed():
            return

        async def finish() -> None:
            current = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not current]
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=1) if pending else None
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(finish(), self.loop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()
