"""Running a call through its interceptors: host-wide first, then the call's own.

Each interceptor gets the context and a ``proceed`` that runs the rest of the
chain and, at its end, the tool. Whatever an interceptor raises, or returns that
is not a ``ToolResult``, becomes a ``tool_error`` result naming it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger

from agenthost._authoring.context import ToolContext
from agenthost._calls.boundary import cancelled, cancelling, secrets_of, traceback_text
from agenthost._calls.interceptors import Interceptor
from agenthost._calls.results import ToolResult
from agenthost._common.masking import redact
from agenthost._common.text import exception_text, type_name

__all__ = ["athrough", "through"]


def through(
    chain: tuple[Interceptor, ...],
    ctx: ToolContext,
    final: Callable[[ToolContext], ToolResult],
    index: int = 0,
) -> ToolResult:
    """``chain[index:]`` around ``final``."""
    if index == len(chain):
        return final(ctx)
    interceptor = chain[index]
    try:
        result = interceptor.intercept(ctx, lambda c: through(chain, c, final, index + 1))
    except BaseException as exc:  # noqa: BLE001 - an interceptor's failure becomes a result
        return _failed(ctx, interceptor, exc)
    return _checked(interceptor, result)


async def athrough(
    chain: tuple[Interceptor, ...],
    ctx: ToolContext,
    final: Callable[[ToolContext], Awaitable[ToolResult]],
    index: int = 0,
) -> ToolResult:
    """:func:`through` for async calls; only the caller's own cancellation propagates."""
    if index == len(chain):
        return await final(ctx)
    interceptor = chain[index]

    async def proceed(c: ToolContext) -> ToolResult:
        return await athrough(chain, c, final, index + 1)

    try:
        result = await interceptor.aintercept(ctx, proceed)
    except asyncio.CancelledError:
        if cancelling():
            raise
        return cancelled(ctx)
    except BaseException as exc:  # noqa: BLE001 - an interceptor's failure becomes a result
        return _failed(ctx, interceptor, exc)
    return _checked(interceptor, result)


def _failed(ctx: ToolContext, interceptor: Interceptor, exc: BaseException) -> ToolResult:
    name = type_name(getattr(interceptor, "fn", interceptor))
    secrets = secrets_of(ctx)
    message = f"interceptor {name} failed: {redact(exception_text(exc), secrets)}"
    logger.opt(lazy=True).error(
        "{} in call {}\n{}",
        lambda: message,
        lambda: ctx.call_id,
        lambda: redact(traceback_text(exc), secrets),
    )
    return ToolResult.fail("tool_error", message)


def _checked(interceptor: Interceptor, result: Any) -> ToolResult:
    if isinstance(result, ToolResult):
        return result
    return ToolResult.fail(
        "tool_error",
        f"interceptor {type_name(interceptor)} returned {type_name(result)}, "
        "not a ToolResult; return proceed(ctx) or ToolResult.fail(...)",
    )
