"""Serving over MCP: the live tool set to MCP clients, on the official SDK.

* ``server``: the MCP server over a ``PluginHost``: listing, calls, change
  notifications; ``results`` the MCP form of a ``ToolResult``.
* ``http``: streamable HTTP at ``/mcp``; ``tokens`` the bearer tokens of its callers;
  ``door`` what every request passes before the SDK; ``limits`` each caller's quotas;
  ``health`` the ``/healthz`` and ``/readyz`` probes.
* ``gate``: one JSON-RPC message read strictly, ids kept distinct by type; ``stdio``:
  the stdio transport through it.

May import: _errors, _version, _common, _authoring, _providers, _directory, _calls, _host.
"""
