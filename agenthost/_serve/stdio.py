"""The stdio transport, every line read through ``gate`` before the SDK sees it.

The SDK's ``stdio_server`` parses each line itself: it keeps the last of repeated
keys, says nothing to an id it cannot use or to text nested too deep, and takes
``8`` and ``"8"`` for one request. :func:`gated_stdio` hands it one object as
both its stdin and its stdout: a line that ``gate`` refuses is answered here
and never reaches the SDK, a request whose id collides with one in flight goes
on under an alias, and each answer leaves with its client's own id. Explicit
streams make the SDK skip its claim of fd 0 and fd 1, so it is done here: the
wire moves to private descriptors, and whatever a plugin reads or prints meets
the null device and stderr instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import threading
from collections.abc import AsyncIterator
from typing import Any, BinaryIO, cast

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from agenthost._serve.gate import INVALID_REQUEST, Ids, Refusal, read_message, refusal

__all__ = ["LINE_LIMIT", "gated_stdio"]

LINE_LIMIT = DEFAULT_MAX_REQUEST_BODY_SIZE  # bytes in one message, as over HTTP
# An answer as the SDK writes it (``model_dump_json``: jsonrpc, then id, then the rest):
# the id is read from the line's start, never by parsing a result that may be huge.
_ANSWER = re.compile(r'\{"jsonrpc":"2\.0","id":(-?\d+|"[^"\\]*(?:\\.[^"\\]*)*"),"(?:result|error)"')
_CANCEL = "notifications/cancelled"
_TOO_LONG = refusal(
    INVALID_REQUEST,
    f"Invalid Request: a message is one line of at most {LINE_LIMIT} bytes; this one was longer",
)


class _Wire:
    """Both ends of the wire for the SDK: its stdin (an async iterator of lines) and its stdout."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = Ids()
        self._lock = anyio.Lock()  # a refusal and an SDK answer never interleave
        self.reading = False  # a thread may be blocked on the reader
        self._wanted = threading.Semaphore(0)
        self._line: asyncio.Future[tuple[bytes, bool]] | None = None
        self._thread: threading.Thread | None = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        """The lines the SDK may parse; the rest are answered here."""
        while True:
            line, too_long = await self._next()
            if too_long:
                await self._send(_TOO_LONG.body)
            elif not line:
                return
            elif line.strip():
                passed = self._pass(line)
                if isinstance(passed, Refusal):
                    await self._send(passed.body)
                else:
                    yield passed

    async def _next(self) -> tuple[bytes, bool]:
        """The next line, read by a daemon thread of ours: a thread of a pool, blocked
        on a terminal's stdin, would hold the process open after Ctrl-C."""
        loop = asyncio.get_running_loop()
        self._line = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._read_lines, args=(loop,), name="agenthost-stdin", daemon=True
            )
            self._thread.start()
        self.reading = True  # cleared by the thread itself, when it returns
        self._wanted.release()
        return await self._line

    def _read_lines(self, loop: asyncio.AbstractEventLoop) -> None:
        """The reading thread: one line each time one is wanted, until the input ends."""
        done = False
        while not done:
            self._wanted.acquire()
            try:
                line = self._read_line()
            except (OSError, ValueError):
                line = (b"", False)
            finally:
                self.reading = False
            done = not line[0] and not line[1]
            future = self._line
            if future is None or loop.is_closed():
                return
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_settle, future, line)

    def _read_line(self) -> tuple[bytes, bool]:
        """One line, and whether it was over the limit (then dropped up to its newline);
        ``(b"", False)`` at the end of input."""
        line = self._reader.readline(LINE_LIMIT + 1)
        if len(line) <= LINE_LIMIT or line.endswith(b"\n"):
            return line, False
        while (rest := self._reader.readline(LINE_LIMIT)) and not rest.endswith(b"\n"):
            pass
        return b"", True

    def _pass(self, line: bytes) -> str | Refusal:
        """The line for the SDK, its request id made distinct; or the answer that refuses it."""
        message = read_message(line)
        if isinstance(message, Refusal):
            return message
        changed = False
        if "method" in message and "id" in message:
            used = self._ids.admit(message["id"])
            changed = used is not message["id"]
            message["id"] = used
        params = message.get("params")
        if isinstance(params, dict) and "requestId" in params and message["method"] == _CANCEL:
            target = self._ids.cancelling(params["requestId"])
            changed = changed or target is not params["requestId"]
            params["requestId"] = target
        return json.dumps(message) if changed else line.decode(errors="replace")

    async def write(self, text: str) -> None:
        """One line from the SDK; an answer goes out with the id its client sent."""
        found = _ANSWER.match(text)
        if found is not None:
            used = json.loads(found.group(1))
            original = self._ids.answered(used)
            if original is not used:
                start, end = found.span(1)
                text = f"{text[:start]}{json.dumps(original)}{text[end:]}"
        await self._send(text.encode())

    async def flush(self) -> None:
        """Nothing to do: every line is flushed as it is written."""
        await anyio.lowlevel.checkpoint()

    async def _send(self, line: bytes) -> None:
        if not line.endswith(b"\n"):
            line += b"\n"
        async with self._lock:
            await anyio.to_thread.run_sync(self._write_all, line)

    def _write_all(self, line: bytes) -> None:
        self._writer.write(line)
        self._writer.flush()


def _settle(future: asyncio.Future[tuple[bytes, bool]], line: tuple[bytes, bool]) -> None:
    if not future.done():
        future.set_result(line)


def _claim() -> tuple[int, int]:
    """Private duplicates of fd 0 and fd 1, the wire; then fd 0 reads the null device and
    fd 1 writes to stderr, so no plugin or child process can touch the protocol."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        os.close(wire_in)
        raise
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)
    except OSError:
        _release(wire_in, wire_out, keep_in=False)
        raise
    return wire_in, wire_out


def _release(wire_in: int, wire_out: int, *, keep_in: bool) -> None:
    """Put the wire back on fd 0 and fd 1; keep ``wire_in`` open while a thread may read it,
    since a closed descriptor's number is soon reused by another file."""
    os.dup2(wire_out, 1)
    os.dup2(wire_in, 0)
    os.close(wire_out)
    if not keep_in:
        os.close(wire_in)


@contextlib.asynccontextmanager
async def gated_stdio() -> AsyncIterator[
    tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]
]:
    """The SDK's ``(read_stream, write_stream)`` over stdin and stdout, through the gate."""
    wire_in, wire_out = _claim()
    wire = _Wire(os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False))
    try:
        streams = cast(Any, wire)  # the SDK wants AsyncFile[str]; it uses these three methods
        async with stdio_server(stdin=streams, stdout=streams) as (read, write):
            yield read, write
    finally:
        _release(wire_in, wire_out, keep_in=wire.reading)
