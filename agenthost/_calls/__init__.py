"""The call path: a tool name and a model's arguments in, a ``ToolResult`` out, always.

The executor and where tools run (inline, worker threads, the host's loop),
interceptors, streaming, results, reading provider tool-call objects,
permissions and metrics.

May import: _errors, _common, _authoring, _directory.
"""
