"""Authoring: from a ``@tool`` function to a ``ToolDefinition``.

The decorator, reading a signature and its docstring, the JSON Schemas and the
compiled argument validator built from them, the string formats, and the
``ToolContext`` a tool may ask for. Nothing here knows about plugins, providers
or how a call is run.

May import: _errors, _common.
"""
