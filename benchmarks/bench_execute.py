"""Per-call overhead of execute, next to plain Python, pydantic and the peers, in one run."""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

from pydantic import BaseModel, TypeAdapter

from agenthost import CachingInterceptor, LoggingInterceptor, PluginHost, RetryInterceptor, tool
from benchmarks._harness import (
    Stats,
    calls_per_second,
    measure,
    measure_async,
    optional,
    scaled,
    table,
)

ARGS = '{"a": 1, "b": 2}'


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def add_async(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AddArgs(BaseModel):
    a: int
    b: int


def _host(**options: Any) -> PluginHost:
    host = PluginHost(None, installed=False, cache_dir=tempfile.mkdtemp(), **options).start()
    host.register(tool(timeout=False)(add))
    host.register(add, name="add_worker", timeout=10)
    host.register(tool(timeout=False)(add_async))
    host.register(add, name="add_cached", timeout=False, cache_ttl=60)
    return host


def _langchain() -> tuple[Stats, Stats]:
    from langchain_core.tools import StructuredTool

    sync_tool = StructuredTool.from_function(add)
    async_tool = StructuredTool.from_function(
        coroutine=add_async, name="add_async", description="Add."
    )
    return (
        measure(lambda: sync_tool.invoke(json.loads(ARGS))),
        measure_async(lambda: async_tool.ainvoke(json.loads(ARGS))),
    )


def _mcp() -> tuple[Stats, Stats]:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")
    server.add_tool(add)
    server.add_tool(add_async)
    return (
        measure_async(lambda: server.call_tool("add", json.loads(ARGS))),
        measure_async(lambda: server.call_tool("add_async", json.loads(ARGS))),
    )


def _openai_agents() -> tuple[Stats, Stats]:
    from agents import function_tool
    from agents.tool_context import ToolContext

    stats = []
    for fn in (add, add_async):
        function = function_tool(fn)

        def call(f: Any = function, n: str = fn.__name__) -> Any:
            # what the runner does per call: a fresh ToolContext, then on_invoke_tool
            context = ToolContext(context=None, tool_name=n, tool_call_id="1", tool_arguments=ARGS)
            return f.on_invoke_tool(context, ARGS)

        stats.append(measure_async(call))
    return stats[0], stats[1]


def _pydantic_ai() -> tuple[Stats, Stats]:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    stats = []
    for fn in (add, add_async):
        context = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        manager = asyncio.run(ToolManager(FunctionToolset([fn])).for_run_step(context))
        part = ToolCallPart(tool_name=fn.__name__, args=ARGS, tool_call_id="1")
        # the agent's own per-call path: validate, call, count retries and usage
        stats.append(measure_async(lambda m=manager, p=part: m.handle_call(p)))  # type: ignore[misc]
    return stats[0], stats[1]


def overhead() -> None:
    host = _host()
    adapter = TypeAdapter(AddArgs)

    def pydantic_call() -> int:
        args = adapter.validate_json(ARGS)
        return add(args.a, args.b)

    def loads_call() -> int:
        return add(**json.loads(ARGS))

    async def pydantic_await() -> int:
        args = adapter.validate_json(ARGS)
        return await add_async(args.a, args.b)

    peers = _peer_rows()  # measured first, as they always were
    rows: list[tuple[str, Stats | None]] = [
        ("direct call", measure(lambda: add(1, 2))),
        ("json.loads + call", measure(loads_call)),
        ("pydantic validate_json + call", measure(pydantic_call)),
        ("pydantic validate_json + await (async tool)", measure_async(pydantic_await)),
        ("bare asyncio.to_thread hop", measure_async(lambda: asyncio.to_thread(add, 1, 2))),
        (
            "agenthost execute, inline (sync, no timeout)",
            measure(lambda: host.execute("add", ARGS)),
        ),
        (
            "agenthost aexecute, inline (async tool)",
            measure_async(lambda: host.aexecute("add_async", ARGS)),
        ),
        (
            "agenthost execute, worker (sync, timeout)",
            measure(lambda: host.execute("add_worker", ARGS)),
        ),
        (
            "agenthost aexecute, worker (sync tool)",
            measure_async(lambda: host.aexecute("add", ARGS)),
        ),
        (
            "agenthost execute, async tool via host loop",
            measure(lambda: host.execute("add_async", ARGS)),
        ),
    ]
    table(
        "per-call overhead, trivial 2-argument tool from a JSON string",
        rows + peers,
        baseline="pydantic validate_json + call",
    )
    host.stop()


def _peer_rows() -> list[tuple[str, Stats | None]]:
    """Each peer's rows for a sync and an async tool (None where it is not installed)."""
    peers: dict[str, tuple[Stats, Stats] | None] = {
        "LangChain StructuredTool": optional(_langchain),
        "MCP SDK call_tool": optional(_mcp),
        "OpenAI Agents ToolContext + on_invoke_tool": optional(_openai_agents),
        "pydantic-ai ToolManager.handle_call": optional(_pydantic_ai),
    }
    rows: list[tuple[str, Stats | None]] = []
    for name, pair in peers.items():
        rows.append((f"{name}, sync tool", pair[0] if pair else None))
        rows.append((f"{name}, async tool", pair[1] if pair else None))
    return rows


def throughput(threads: int = 8, seconds: float = 2.0) -> None:
    host = _host()
    print(f"\n## calls per second with {threads} threads ({seconds:g} s each)")
    for label, name in (("inline", "add"), ("worker", "add_worker")):
        rate = calls_per_second(lambda name=name: host.execute(name, ARGS), threads, seconds)  # type: ignore[misc]
        print(f"   {label}: {rate:,.0f} calls/s")
    host.stop()


def interceptors() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from agenthost.otel import OpenTelemetryInterceptor

    rows: list[tuple[str, Stats | None]] = []
    base = _host(metrics=False)
    rows.append(("no interceptors, metrics off", measure(lambda: base.execute("add", ARGS))))
    measured = _host()
    rows.append(("+ metrics (on by default)", measure(lambda: measured.execute("add", ARGS))))
    cases = {
        "+ LoggingInterceptor (library logger disabled)": [LoggingInterceptor()],
        "+ CachingInterceptor, tool not opted in": [CachingInterceptor()],
        "+ CachingInterceptor, cache hit": [CachingInterceptor()],
        "+ RetryInterceptor, succeeding call": [RetryInterceptor()],
        "+ OpenTelemetryInterceptor (SDK, no exporter)": [
            OpenTelemetryInterceptor(TracerProvider())
        ],
    }
    for label, chain in cases.items():
        host = _host(interceptors=chain)
        name = "add_cached" if "hit" in label else "add"
        rows.append((label, measure(lambda h=host, n=name: h.execute(n, ARGS))))  # type: ignore[misc]
        host.stop()
    table(
        "what each built-in interceptor adds (execute, inline path)",
        rows,
        baseline="no interceptors, metrics off",
    )


def main() -> None:
    overhead()
    throughput(seconds=scaled(2.0, 0.1))
    interceptors()
