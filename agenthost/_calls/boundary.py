"""The boundary of tool code: the one place per kind of call where a tool is entered.

:func:`invoke` runs sync tool code (a function, or a generator drained),
:func:`ainvoke` awaits async tool code (a coroutine, or an async generator
drained). Each sets the call's context for :func:`current_context`, renders
what the tool returns, and turns anything it raises, ``BaseException``
included, into a ``tool_error`` result (its traceback logged, secrets masked)
before it can reach a worker thread or the event loop.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from loguru import logger

from agenthost._authoring.context import ToolContext, _current
from agenthost._calls.results import ToolResult, render
from agenthost._common.masking import jsonable, redact, secret_values
from agenthost._common.text import exception_text, type_name

__all__ = [
    "adrain",
    "ainvoke",
    "cancelled",
    "cancelling",
    "drain",
    "invoke",
    "secrets_of",
    "tool_error",
    "traceback_text",
]


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
    secrets = secrets_of(ctx)
    message = redact(exception_text(exc), secrets)
    logger.opt(lazy=True).warning(
        "tool {} ({}) raised {}\n{}",
        lambda: ctx.name,
        lambda: ctx.call_id,
        lambda: message,
        lambda: redact(traceback_text(exc), secrets),
    )
    return ToolResult.fail("tool_error", message, type=type_name(exc))


def traceback_text(exc: BaseException) -> str:
    """The traceback as text: frames and source lines, never local variables' values."""
    try:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    except BaseException:  # noqa: BLE001 - a hostile exception must not break the report
        return f"(the traceback of {type_name(exc)} cannot be shown)"
