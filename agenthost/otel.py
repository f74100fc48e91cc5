"""OpenTelemetry tracing for tool calls (the ``otel`` extra).

``host.add_interceptor(OpenTelemetryInterceptor())`` wraps every call in a span
named ``tool.<name>`` carrying the call id, plugin, version, session and the
arguments with secrets masked (plus the GenAI semantic-convention attributes),
and marks failed calls with status ERROR and their error code.

May import: _common, _authoring, _calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError:  # pragma: no cover - depends on the environment
    from agenthost._common.install import install_command

    raise ImportError(f"agenthost.otel needs OpenTelemetry: {install_command('otel')}") from None

from agenthost._authoring.context import ToolContext
from agenthost._calls.interceptors import AsyncProceed, Interceptor, Proceed, masked_arguments
from agenthost._calls.results import ToolResult
from agenthost._common.masking import DEFAULT_SECRET_KEYS

__all__ = ["OpenTelemetryInterceptor"]


class OpenTelemetryInterceptor(Interceptor):
    """A span per call; arguments are recorded with secret values replaced by ``***``."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        secret_keys: Iterable[str] = DEFAULT_SECRET_KEYS,
        max_arguments_length: int = 4096,
    ) -> None:
        self._tracer = trace.get_tracer("agenthost", tracer_provider=tracer_provider)
        self.secret_keys = tuple(secret_keys)
        self.max_arguments_length = max_arguments_length

    def intercept(self, ctx: ToolContext, proceed: Proceed) -> ToolResult:
        with self._span(ctx) as span:
            result = proceed(ctx)
            _finish(span, ctx, result)
            return result

    async def aintercept(self, ctx: ToolContext, proceed: AsyncProceed) -> ToolResult:
        with self._span(ctx) as span:
            result = await proceed(ctx)
            _finish(span, ctx, result)
            return result

    def _span(self, ctx: ToolContext) -> Any:
        arguments = json.dumps(masked_arguments(ctx, self.secret_keys), default=str)
        attributes: dict[str, Any] = {
            "tool.name": ctx.name,
            "tool.call_id": ctx.call_id,
            "tool.arguments": arguments[: self.max_arguments_length],
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": ctx.name,
            "gen_ai.tool.call.id": ctx.call_id,
        }
        for key, value in (("tool.plugin", ctx.plugin), ("tool.version", ctx.version),
                           ("tool.session", ctx.session)):  # fmt: skip
            if value is not None:
                attributes[key] = value
        return self._tracer.start_as_current_span(
            f"tool.{ctx.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )


def _finish(span: Span, ctx: ToolContext, result: ToolResult) -> None:
    span.set_attribute("tool.success", result.success)
    for key in ("cache", "attempts"):
        if key in ctx.attributes:
            span.set_attribute(f"tool.{key}", ctx.attributes[key])
    if result.error is not None:
        span.set_attribute("tool.error.code", result.error.code)
        span.set_attribute("error.type", result.error.code)
        span.set_status(Status(StatusCode.ERROR, result.error.message))
