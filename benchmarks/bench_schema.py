"""Schema generation per tool, and exporting 1,000 tools to each format (cached and uncached)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import TypeAdapter

from agenthost import FORMATS, ToolDefinition, export_tools
from benchmarks._harness import Stats, measure, measure_once, optional, scaled, table
from benchmarks._tools import TOOLS, create_order, get_weather


def _adapter_schema(fn: Any) -> dict[str, Any]:
    return TypeAdapter(fn).json_schema()


def _pydantic_ai(fn: Callable[..., Any]) -> Stats:
    from pydantic_ai import Tool

    return measure(lambda: Tool(fn).tool_def)


def _mcp_sdk(fn: Callable[..., Any]) -> Stats:
    from mcp.server.mcpserver.tools.base import Tool

    return measure(lambda: Tool.from_function(fn).parameters)


def _langchain(fn: Callable[..., Any]) -> Stats:
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return measure(lambda: convert_to_openai_tool(StructuredTool.from_function(fn)))


def _openai_agents(fn: Callable[..., Any]) -> Stats:
    from agents import function_tool

    return measure(lambda: function_tool(fn, strict_mode=False).params_json_schema)


def schema_generation() -> None:
    for label, fn in TOOLS.items():
        rows = [
            ("agenthost ToolDefinition.from_function", measure(partial(ToolDefinition.from_function, fn))),
            ("pydantic TypeAdapter(fn).json_schema()", measure(partial(_adapter_schema, fn))),
            ("pydantic-ai Tool(fn)", optional(partial(_pydantic_ai, fn))),
            ("MCP SDK Tool.from_function(fn)", optional(partial(_mcp_sdk, fn))),
            ("OpenAI Agents function_tool(fn)", optional(partial(_openai_agents, fn))),
            ("LangChain StructuredTool + OpenAI format", optional(partial(_langchain, fn))),
        ]  # fmt: skip
        table(
            f"schema generation per tool: {label}",
            rows,
            baseline="pydantic TypeAdapter(fn).json_schema()",
        )


def exports(count: int = 1000) -> None:
    definitions = [
        ToolDefinition.from_function(fn, name=f"tool_{i}")
        for i in range(count)
        for fn in [(get_weather, create_order)[i % 2]]
    ]

    def uncached(format: Any, strict: bool) -> Callable[[], object]:
        def run() -> object:
            for definition in definitions:
                definition._exports.clear()
            return export_tools(definitions, format, strict=strict)

        return run

    rows: list[tuple[str, Stats | None]] = []
    for format in FORMATS:
        rows.append((f"{format}: uncached", measure_once(uncached(format, False))))
        rows.append((f"{format}: cached", measure(lambda f=format: export_tools(definitions, f))))  # type: ignore[misc]
    rows.append(("openai strict: uncached", measure_once(uncached("openai", True))))
    rows.append(
        ("openai strict: cached", measure(lambda: export_tools(definitions, "openai", strict=True)))
    )
    table(f"export {count:,} tools (half 3-parameter, half 10-parameter nested)", rows)


def main() -> None:
    schema_generation()
    exports(scaled(1000, 20))
