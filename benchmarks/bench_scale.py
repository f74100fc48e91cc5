"""Scale: cold start and memory for 1,000 plugins with 10 tools each; listing with a warm cache."""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from agenthost import PluginHost
from benchmarks._harness import (
    Stats,
    format_time,
    measure,
    optional,
    rss_bytes,
    scaled,
    table,
)

PLUGIN = '''
from typing import Literal
from agenthost import tool

@tool
def p{i}_search(query: str, limit: int = 10) -> list[str]:
    """Search collection {i} for documents that match a query."""
    return []

@tool
def p{i}_get(item_id: str) -> dict[str, str]:
    """Fetch one item of collection {i} by id."""
    return {{}}

@tool
def p{i}_create(name: str, tags: list[str] = [], public: bool = False) -> str:
    """Create an item in collection {i}."""
    return name

@tool(destructive=True)
def p{i}_delete(item_id: str, force: bool = False) -> bool:
    """Delete an item of collection {i}."""
    return True

@tool
def p{i}_count(kind: Literal["all", "public", "private"] = "all") -> int:
    """Count the items of collection {i}."""
    return 0

@tool
def p{i}_rename(item_id: str, name: str) -> str:
    """Rename an item of collection {i}."""
    return name

@tool
def p{i}_tag(item_id: str, tag: str, remove: bool = False) -> list[str]:
    """Add or remove a tag on an item of collection {i}."""
    return []

@tool
def p{i}_share(item_id: str, emails: list[str], message: str | None = None) -> int:
    """Share an item of collection {i} with people."""
    return len(emails)

@tool
def p{i}_history(item_id: str, limit: int = 20, since: str | None = None) -> list[dict[str, str]]:
    """The change history of an item of collection {i}."""
    return []

@tool(read_only=True)
def p{i}_stats() -> dict[str, int]:
    """Usage statistics of collection {i}."""
    return {{}}
'''


def _rss() -> int:
    gc.collect()
    return rss_bytes()


def agenthost_scale(plugins: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "plugins"
        directory.mkdir()
        for i in range(plugins):
            (directory / f"collection_{i:04d}.py").write_text(PLUGIN.format(i=i))
        before = _rss()
        started = time.perf_counter()
        host = PluginHost(directory, installed=False, cache_dir=Path(scratch) / "cache").start()
        cold = time.perf_counter() - started
        memory = (_rss() - before) / 2**20
        tools = len(host.tools())
        started = time.perf_counter()
        host.schemas("openai")
        first = time.perf_counter() - started
        rows: list[tuple[str, Stats | None]] = [
            (f"schemas('{f}') warm, {tools} tools", measure(lambda f=f: host.schemas(f)))  # type: ignore[misc]
            for f in ("openai", "anthropic", "mcp")
        ]
        rows.append((f"tools() warm, {tools} tools", measure(host.tools)))
        host.stop()
    print(f"\n## agenthost: {plugins} plugins x 10 tools = {tools} tools")
    print(
        f"   cold start {cold:.2f} s, memory +{memory:.0f} MB, first openai listing {format_time(first)}"
    )
    table("listing with a warm cache", rows)


def _functions(count: int) -> list[Any]:
    namespace: dict[str, Any] = {}
    source = "\n".join(
        f"def tool_{i}(query: str, limit: int = 10) -> list[str]:\n"
        f"    '''Search collection {i} for documents that match a query.'''\n    return []\n"
        for i in range(count)
    )
    exec(compile(source, "<bench>", "exec"), namespace)
    return [namespace[f"tool_{i}"] for i in range(count)]


def _mcp_sdk(functions: list[Any]) -> str:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")
    started = time.perf_counter()
    for fn in functions:
        server.add_tool(fn)
    registered = time.perf_counter() - started
    listing = measure(lambda: asyncio.run(server.list_tools()), repeat=7)
    return f"register {registered:.2f} s, list_tools {format_time(listing.median)}"


def _langchain(functions: list[Any]) -> str:
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    started = time.perf_counter()
    tools = [StructuredTool.from_function(fn) for fn in functions]
    registered = time.perf_counter() - started
    listing = measure(lambda: [convert_to_openai_tool(t) for t in tools], repeat=5)
    return f"register {registered:.2f} s, OpenAI listing {format_time(listing.median)}"


def peers(count: int = 1000) -> None:
    functions = _functions(count)
    print(f"\n## peers: register and list {count} tools")
    for name, run in (("MCP SDK MCPServer", _mcp_sdk), ("LangChain StructuredTool", _langchain)):
        print(f"   {name}: {optional(partial(run, functions)) or 'n/a (not installed)'}")
    with tempfile.TemporaryDirectory() as scratch:
        host = PluginHost(None, installed=False, cache_dir=scratch).start()
        started = time.perf_counter()
        for fn in functions:
            host.register(fn)
        registered = time.perf_counter() - started
        host.schemas("mcp")
        listing = measure(lambda: host.schemas("mcp"))
        print(
            f"   agenthost host.register: register {registered:.2f} s, schemas('mcp') warm {format_time(listing.median)}"
        )
        host.stop()


def main() -> None:
    agenthost_scale(scaled(1000, 20))
    peers(scaled(1000, 20))
