"""The OpenTelemetry interceptor (the `otel` extra), checked with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agenthost import PluginHost, tool
from agenthost.otel import OpenTelemetryInterceptor


def test_a_span_per_call_with_masked_arguments_and_error_status(
    make_host: Callable[..., PluginHost],
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    @tool(timeout=False)
    def connect(host: str, password: str) -> str:
        """Connect."""
        if host == "down":
            raise ConnectionError("refused")
        return "connected"

    agent_host = make_host(None, interceptors=[OpenTelemetryInterceptor(provider)]).start()
    agent_host.register(connect)
    agent_host.execute("connect", {"host": "db", "password": "s3cret"}, session="s1", call_id="c1")
    asyncio.run(
        agent_host.aexecute("connect", {"host": "down", "password": "s3cret"}, call_id="c2")
    )
    ok, failed = exporter.get_finished_spans()
    assert ok.name == failed.name == "tool.connect"
    assert ok.attributes is not None
    assert failed.attributes is not None
    assert json.loads(str(ok.attributes["tool.arguments"])) == {"host": "db", "password": "***"}
    assert (
        ok.attributes["tool.call_id"],
        ok.attributes["tool.session"],
        ok.attributes["tool.plugin"],
    ) == ("c1", "s1", "(host)")
    assert ok.attributes["gen_ai.tool.name"] == "connect"
    assert ok.attributes["tool.success"] is True
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.attributes["tool.error.code"] == "tool_error"
    assert failed.status.status_code is StatusCode.ERROR
    assert "s3cret" not in str(ok.attributes) + str(failed.attributes)
