"""``agenthost serve``: the live plugin directory as an MCP server, on the official SDK.

Every registry change reaches every connected client without a reconnect, from
outside any request: session-based clients (2025-06-18, 2025-11-25) get
``notifications/tools/list_changed`` on their connection, 2026-07-28 clients
get a ``ToolsListChanged`` event on the ``subscriptions/listen`` streams they
opened (at that protocol version the SDK drops bare change notifications).
The SDK keeps no public list of connections, so the server keeps its own: a
connection joins when its handshake completes and leaves when a send to it fails.

Calls go through :meth:`PluginHost.aexecute` as the session :data:`SESSION`
(``--grant`` grants it permissions), so permissions, validation, interceptors,
timeouts and version pinning all apply; every failure is a result with
``isError: true``, never a protocol error. Tools whose permissions are not
granted, and ``definition_only`` tools, are not listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agenthost._exporters import to_mcp
from agenthost._host import PluginHost
from agenthost._registry import RegistryChange, ToolInfo
from agenthost._results import ToolResult

__all__ = ["SESSION", "McpServer"]

SESSION = "mcp"  # the session MCP calls run as: `--grant` grants it permissions


class McpServer:
    """An MCP server over a :class:`PluginHost` whose tool list follows the registry."""

    def __init__(self, host: PluginHost, *, grants: Iterable[str] = ()) -> None:
        from agenthost import __version__

        self.host = host
        grants = tuple(grants)
        if grants:
            host.permissions.grant(SESSION, *grants)
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self.server: Server[Any] = Server(
            "agenthost",
            version=__version__,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._joined
        )
        self._sessions: dict[int, ServerSession] = {}  # session-based connections, by id
        self._listing: tuple[int, types.ListToolsResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notifying: asyncio.Task[None] | None = None
        self._again = False
        self._undo = host.on_change(self._changed)

    def initialization_options(self) -> Any:
        """What the handshake advertises: tools, with ``listChanged``."""
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    async def serve_stdio(self) -> None:
        """Serve one client over stdin/stdout until stdin closes.

        The host starts inside ``stdio_server``, which points fd 1 at stderr while
        it serves: whatever a plugin prints, at import or later, never reaches the
        protocol stream.
        """
        self._loop = asyncio.get_running_loop()
        sys.stdout.flush()
        # Python-level prints are buffered: send them to stderr too, or they would be
        # flushed onto the restored fd 1 at exit, after the last protocol frame.
        async with stdio_server() as (read, write):
            with contextlib.redirect_stdout(sys.stderr):
                await self._serve(read, write)

    async def _serve(self, read: Any, write: Any) -> None:
        await asyncio.to_thread(self.host.start)
        try:
            await self.server.run(read, write, self.initialization_options())
        finally:
            self.close()
            await asyncio.to_thread(self.host.stop)

    def close(self) -> None:
        self._undo()
        self._listen.close()

    # --- connections and change notifications ------------------------------------------------
    async def _joined(self, ctx: ServerRequestContext[Any], params: Any) -> None:
        self._loop = asyncio.get_running_loop()
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._sessions[id(ctx.session)] = ctx.session

    def _changed(self, change: RegistryChange) -> None:
        """Called by the registry, in whatever thread applied the change."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        """Coalesce changes: one notification in flight, one more if changes arrive meanwhile."""
        if self._notifying is not None and not self._notifying.done():
            self._again = True
            return
        self._notifying = asyncio.ensure_future(self._notify())

    async def _notify(self) -> None:
        while True:
            self._again = False
            await self._bus.publish(ToolsListChanged())
            for key, session in list(self._sessions.items()):
                try:
                    await session.send_tool_list_changed()
                except Exception:  # noqa: BLE001 - the client went away: forget it
                    self._sessions.pop(key, None)
            if not self._again:
                return

    # --- tools/list and tools/call -----------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        version = self.host.version
        cached = self._listing
        if cached is not None and cached[0] == version:
            return cached[1]
        tools = [
            types.Tool.model_validate(dict(to_mcp(info.definition)))
            for info in sorted(self.host.tools(), key=lambda info: info.name)
            if self._served(info)
        ]
        result = types.ListToolsResult(tools=tools)
        self._listing = (version, result)
        return result

    def _served(self, info: ToolInfo) -> bool:
        if info.definition_only:
            return False
        return not self.host.permissions.missing(SESSION, info.permissions)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        info = next((t for t in self.host.tools() if t.name == params.name), None)
        if info is not None and info.definition_only:
            return _error(f"tool {params.name!r} is run by in-process clients, not over MCP")
        result = await self.host.aexecute(params.name, params.arguments or {}, session=SESSION)
        return _to_mcp_result(result, info)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _to_mcp_result(result: ToolResult, info: ToolInfo | None) -> types.CallToolResult:
    if not result.success:
        return _error(result.content)
    schema = info.output_schema if info is not None else None
    if schema is None:
        return types.CallToolResult(content=[types.TextContent(type="text", text=result.output)])
    structured = {"result": _value(result, schema)} if _wrapped(schema) else result.data
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def _wrapped(schema: Mapping[str, Any]) -> bool:
    """Whether an output schema is a non-object return wrapped as ``{"result": ...}``."""
    return (
        set(schema) == {"type", "properties", "required"}
        and list(schema["properties"]) == ["result"]
        and list(schema["required"]) == ["result"]
    )


def _value(result: ToolResult, schema: Mapping[str, Any]) -> Any:
    """The return value as JSON: a string return lives in ``output``, not ``data``."""
    if schema["properties"]["result"].get("type") == "string":
        return result.output
    return result.data
