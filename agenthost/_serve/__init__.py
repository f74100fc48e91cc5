"""Serving over MCP: the live tool set to MCP clients, on the official SDK.

* ``server``: the MCP server over a ``PluginHost``: listing, calls, change
  notifications; ``results`` the MCP form of a ``ToolResult``.
* ``http``: streamable HTTP at ``/mcp``; ``tokens`` the bearer tokens of its callers.

May import: _errors, _version, _common, _authoring, _providers, _directory, _calls, _host.
"""
