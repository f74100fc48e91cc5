"""The boundary of tool code: the one place per kind of call where a tool is entered.

:func:`invoke` runs sync tool code (a function, or a generator drained),
:func:`ainvoke` awaits async tool code (a coroutine, or an async generator
drained). Each sets the call's context for :func:`current_context`, renders
what the tool returns, and turns anything it raises, ``BaseException``
included, into a ``tool_error`` result (its traceback logged, secrets masked)
before it can reach a worker thread or the event loop. The traceback logged is
the tool's own: the host's frames above the tool's are left out. A failure that
happened elsewhere (in a worker process) arrives as :class:`Relayed`, already
told: its message as the model sees it, and the tool's frames as text.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from loguru import logger

from agenthost._authoring.context import ToolContext, _current
from agenthost._calls.results import ToolResult, render
from agenthost._common.masking import jsonable, redact, secret_values
from agenthost._common.text import exception_text, type_name

__all__ = [
    "Relayed",
    "adrain",
    "ainvoke",
    "cancelled",
    "cancelling",
    "drain",
    "invoke",
    "secrets_of",
    "tool_error",
    "tool_frames",
    "traceback_text",
]

# Where the host's own frames live: the package, and asyncio (a worker runs async tools
# with asyncio.run). Frames of these above a tool's first frame are the host's, not its.
_HOST_CODE = tuple(
    {f"{folder}{os.sep}" for root in (Path(__file__).parents[1], Path(asyncio.__file__).parent)
     for folder in (root, root.resolve())}
)  # fmt: skip


class Relayed(Exception):
    """A tool's failure told by the process it happened in (a worker), not raised here.

    ``str()`` is the whole message the model sees (``ValueError: bad input``, or
    one sentence such as why the worker ended); ``kind`` is the type the tool
    raised (None when nothing was raised: the worker ended); ``trace`` is the
    tool's own traceback as text, already bounded and inert ('' for none).
    """

    def __init__(self, message: str, kind: str | None = None, trace: str = "") -> None:
        super().__init__(message)
        self.kind, self.trace = kind, trace


def invoke(
    ctx: ToolContext, fn: Callable[..., Any], kwargs: dict[str, Any], max_output: int
) -> ToolResult:
    """Run sync tool code and render what it returns; never raises."""
    token = _current.set(ctx)
    try:
        output, data, truncated = render(fn(**kwargs), max_output)
    except BaseException as exc:  # noqa: BLE001 - the one boundary of sync tool code
        return tool_error(ctx, exc)
    finally:
        _current.reset(token)
    return ToolResult(True, output, data, None, ctx.tool.name, ctx.plugin, ctx.version,
                      ctx.call_id, 0.0, truncated)  # fmt: skip


async def ainvoke(
    ctx: ToolContext, fn: Callable[..., Awaitable[Any]], kwargs: dict[str, Any], max_output: int
) -> ToolResult:
    """Await async tool code and render it; raises only its caller's own cancellation."""
    token = _current.set(ctx)
    try:
        output, data, truncated = render(await fn(**kwargs), max_output)
    except asyncio.CancelledError:
        if cancelling():
            raise  # our caller is being cancelled: let it
        return cancelled(ctx)
    except BaseException as exc:  # noqa: BLE001 - the one boundary of async tool code
        return tool_error(ctx, exc)
    finally:
        _current.reset(token)
    return ToolResult(True, output, data, None, ctx.tool.name, ctx.plugin, ctx.version,
                      ctx.call_id, 0.0, truncated)  # fmt: skip


def drain(
    ctx: ToolContext, fn: Callable[..., Iterable[Any]], max_output: int, /, **kwargs: Any
) -> str:
    """A generator tool's chunks joined, each streamed to the call's sink as it comes."""
    collected = _Collector(ctx, max_output)
    for chunk in fn(**kwargs):
        collected.add(chunk)
    return collected.text()


async def adrain(
    ctx: ToolContext, fn: Callable[..., Any], max_output: int, /, **kwargs: Any
) -> str:
    """:func:`drain` for an async generator."""
    collected = _Collector(ctx, max_output)
    async for chunk in fn(**kwargs):
        collected.add(chunk)
    return collected.text()


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


def cancelling() -> bool:
    """Whether the running task itself is being cancelled (always assumed before 3.11)."""
    current = asyncio.current_task()
    return current is None or bool(getattr(current, "cancelling", lambda: 1)())


def cancelled(ctx: ToolContext) -> ToolResult:
    return ToolResult.fail("cancelled", f"tool '{ctx.name}' was cancelled")


def secrets_of(ctx: ToolContext) -> tuple[str, ...]:
    """The argument values to blank out of messages and tracebacks."""
    return secret_values(jsonable(ctx.arguments))


def tool_error(ctx: ToolContext, exc: BaseException) -> ToolResult:
    """The result of a tool that raised; its traceback goes to the log, secrets masked."""
    if isinstance(exc, Relayed):
        return _relayed_error(ctx, exc)
    secrets = secrets_of(ctx)
    message = redact(exception_text(exc), secrets)
    logger.opt(lazy=True).warning(
        "tool {} ({}) raised {}\n{}",
        lambda: ctx.name,
        lambda: ctx.call_id,
        lambda: message,
        lambda: redact(traceback_text(exc, tool_only=True), secrets),
    )
    return ToolResult.fail("tool_error", message, type=type_name(exc))


def _relayed_error(ctx: ToolContext, exc: Relayed) -> ToolResult:
    """:func:`tool_error` for a failure a worker told: logged the same way, its frames as
    it sent them; without them (the worker ended, its memory ran out) one line."""
    secrets = secrets_of(ctx)
    message = redact(str(exc), secrets)
    said = "raised" if exc.kind else "failed:"
    if exc.trace:
        logger.opt(lazy=True).warning(
            "tool {} ({}) {} {}\n{}",
            lambda: ctx.name,
            lambda: ctx.call_id,
            lambda: said,
            lambda: message.replace("\n", "\n  "),  # a worker's text forges no log line
            lambda: redact(exc.trace, secrets),
        )
    else:
        logger.warning("tool {} ({}) {} {}", ctx.name, ctx.call_id, said,
                       message.replace("\n", "\n  "))  # fmt: skip
    details = {"type": exc.kind} if exc.kind else {}
    return ToolResult.fail("tool_error", message, **details)


def traceback_text(exc: BaseException, *, tool_only: bool = False) -> str:
    """The traceback as text: frames and source lines, never local variables' values;
    ``tool_only`` leaves out the host's frames above the tool's first one."""
    try:
        tb = exc.__traceback__
        tb = (tool_frames(tb) or tb) if tool_only else tb
        return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()
    except BaseException:  # noqa: BLE001 - a hostile exception must not break the report
        return f"(the traceback of {type_name(exc)} cannot be shown)"


def tool_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the tool's first frame on, the host's frames that called it left out;
    None if every frame is the host's (the call failed before or after the tool ran)."""
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_HOST_CODE):
        tb = tb.tb_next
    return tb
