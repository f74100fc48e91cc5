"""Serving over MCP: the live tool set to MCP clients, on the official SDK.

The MCP server over a ``PluginHost`` and its streamable HTTP transport with
bearer tokens.

May import: _errors, _version, _common, _providers, _directory, _calls, _host.
"""
