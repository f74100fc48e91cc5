"""Streaming calls: events as a call runs, and concurrent calls delivered one at a time.

``astream`` yields ``started``, a ``delta`` for every chunk a generator tool
yields (the whole output at once for other tools) and ``completed`` with the
result. ``astream_many`` runs its calls concurrently but hands out each call's
events whole and in input order, so outputs never interleave, as a single
speaker would. The sync forms bridge from the host's loop thread.

Nothing is read far ahead of a reader that stops: a sink gets an
acknowledgement with each chunk, called when the reader takes it (a worker's
stream waits for it, see ``_isolation.supervisor``); an in-process generator
running in a thread pauses once its reader is :data:`MAX_AHEAD` bytes behind,
and one running on an event loop, which cannot pause, is stopped with an error
result; the sync forms fetch one event at a time; and the calls a reader has
not reached yet buffer at most :data:`AHEAD` events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

from agenthost._authoring.context import _sink
from agenthost._calls.reading import Call, read_call
from agenthost._calls.results import ToolResult
from agenthost._calls.workers import LoopThread, WorkerPool

__all__ = ["AHEAD", "MAX_AHEAD", "StreamEvent", "Streaming"]

AHEAD = 64  # events a call of stream_many buffers before its reader gets to it
MAX_AHEAD = 1 << 20  # bytes of output an in-process generator may run ahead of its reader


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a streamed call: ``started``, then ``delta`` texts, then ``completed``."""

    kind: Literal["started", "delta", "completed"]
    call_id: str
    tool: str
    text: str = ""
    result: ToolResult | None = None
    index: int = 0


_DONE = object()


class Streaming:
    """Streams calls that ``run`` executes.

    ``run`` is the executor's ``aexecute``; ``refused`` stamps and counts the result
    for a call that could not even be read; ``new_id`` names a call; ``loop`` is the
    host's event loop thread, which the sync forms pump from; waits for it are
    ``pool.blocking()`` so a tool streaming a nested call never starves the pool.
    """

    def __init__(
        self,
        run: Callable[..., Awaitable[ToolResult]],
        *,
        refused: Callable[[ToolResult], Awaitable[ToolResult]],
        new_id: Callable[[], str],
        loop: Callable[[], LoopThread],
        pool: WorkerPool,
    ) -> None:
        self._run = run
        self._refused = refused
        self._new_id = new_id
        self._loop = loop
        self._pool = pool

    async def astream(
        self,
        name: str,
        arguments: Any = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one call: ``started``, output ``delta`` events, then ``completed``."""
        cid = call_id or self._new_id()
        pipe = _Pipe(asyncio.get_running_loop(), cid, name)
        token = _sink.set(pipe.sink)  # the task below starts with a copy of this context
        try:
            task = pipe.task = asyncio.ensure_future(
                self._run(
                    name,
                    arguments,
                    session=session,
                    timeout=timeout,
                    interceptors=interceptors,
                    call_id=cid,
                )
            )
        finally:
            _sink.reset(token)
        task.add_done_callback(lambda _: pipe.events.put_nowait(_DONE))
        streamed = False
        try:
            yield StreamEvent("started", cid, name)
            while (item := await pipe.events.get()) is not _DONE:
                event, ack = item
                pipe.took(event, ack)
                streamed = True
                yield event
            result = pipe.overran() or task.result()
            if not streamed and result.success and result.output:
                yield StreamEvent("delta", cid, name, result.output)
            yield StreamEvent("completed", cid, name, result=result)
        finally:
            pipe.close()
            if not task.done():
                task.cancel()

    async def astream_many(
        self,
        calls: Iterable[Call],
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
    ) -> AsyncIterator[StreamEvent]:
        """Run calls concurrently; deliver each call's events whole, in input order."""
        specs = [read_call(call) for call in calls]
        queues: list[asyncio.Queue[StreamEvent]] = [asyncio.Queue(AHEAD) for _ in specs]

        async def run(index: int, spec: Any) -> None:
            if isinstance(spec, ToolResult):
                result = await self._refused(spec)
                await queues[index].put(StreamEvent("started", result.call_id, "", index=index))
                done = StreamEvent("completed", result.call_id, "", result=result, index=index)
                await queues[index].put(done)
                return
            name, arguments, cid = spec
            async for event in self.astream(
                name,
                arguments,
                session=session,
                timeout=timeout,
                interceptors=interceptors,
                call_id=cid,
            ):
                await queues[index].put(replace(event, index=index))

        tasks = [asyncio.ensure_future(run(i, spec)) for i, spec in enumerate(specs)]
        try:
            for events in queues:
                while True:
                    event = await events.get()
                    yield event
                    if event.kind == "completed":
                        break
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()

    def stream(self, name: str, arguments: Any = None, **options: Any) -> Iterator[StreamEvent]:
        """The sync form of :meth:`astream`: iterate events from any thread."""
        return self._bridge(self.astream(name, arguments, **options))

    def stream_many(self, calls: Iterable[Call], **options: Any) -> Iterator[StreamEvent]:
        """The sync form of :meth:`astream_many`."""
        return self._bridge(self.astream_many(list(calls), **options))

    def _bridge(self, events: AsyncIterator[StreamEvent]) -> Iterator[StreamEvent]:
        """Each event fetched from the host's loop when the reader asks for it."""
        loop = self._loop()
        try:
            while True:
                future = loop.submit(_next(events))
                with self._pool.blocking():  # a tool streaming a nested call
                    event = future.result()
                if event is _DONE:
                    break
                yield event
        except concurrent.futures.CancelledError:
            pass  # the host stopped under the stream
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone already
                loop.submit(_close(events))


async def _next(events: AsyncIterator[StreamEvent]) -> Any:
    try:
        return await events.__anext__()
    except StopAsyncIteration:
        return _DONE


async def _close(events: AsyncIterator[StreamEvent]) -> None:
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


class _Pipe:
    """A streamed call's deltas on their way to its reader, and how far the reader is behind:
    a generator's thread waits while it is :data:`MAX_AHEAD` bytes ahead."""

    def __init__(self, loop: asyncio.AbstractEventLoop, call_id: str, tool: str) -> None:
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.task: asyncio.Future[ToolResult] | None = None
        self._loop = loop
        self._call_id = call_id
        self._tool = tool
        self._unread = 0
        self._closed = False
        self._overrun = False
        self._changed = threading.Condition()

    def sink(self, text: str, ack: Callable[[], None] | None = None) -> None:
        """Called by the tool, in any thread, with each chunk (``ack`` from a worker's stream)."""
        if self._closed or self._overrun:
            return  # the reader is gone, or the call is being stopped
        event = StreamEvent("delta", self._call_id, self._tool, text)
        self._loop.call_soon_threadsafe(self.events.put_nowait, (event, ack))
        if ack is None and not self._wait(len(text)) and self.task is not None:
            self._loop.call_soon_threadsafe(self.task.cancel)  # on a loop: it cannot wait

    def _wait(self, size: int) -> bool:
        """Count ``size`` more bytes; wait while over :data:`MAX_AHEAD`. False when over on a
        thread that runs an event loop (waiting would stall it): the call must stop."""
        with self._changed:
            self._unread += size
            if self._unread <= MAX_AHEAD or self._closed:
                return True
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                self._changed.wait_for(lambda: self._unread <= MAX_AHEAD or self._closed)
                return True
            self._overrun = True
            return False

    def took(self, event: StreamEvent, ack: Callable[[], None] | None) -> None:
        """The reader took ``event``: the tool may send that much more."""
        if ack is not None:
            ack()
            return
        with self._changed:
            self._unread -= len(event.text)
            self._changed.notify_all()

    def close(self) -> None:
        """The reader is gone: nothing waits for it any more."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def overran(self) -> ToolResult | None:
        if not self._overrun:
            return None
        return ToolResult.fail(
            "cancelled",
            f"tool {self._tool!r} was stopped: it ran more than {MAX_AHEAD // 1024} kB of "
            "output ahead of its reader, and on an event loop it cannot be paused",
        )
