"""Authoring: from a ``@tool`` function to a ``ToolDefinition``, before any plugin or call.

* ``decorator``: ``@tool`` records its options; ``options`` checks them.
* ``signature``: reads a function (parameters, hints, kind, location);
  ``docstrings`` its summary and parameter descriptions; ``annotations`` has
  small helpers over type annotations.
* ``typeschema``: types to JSON Schemas and a compiled validator, through
  pydantic; ``simple_schema`` does simple signatures without it; ``guards`` make
  the validator accept exactly what the schema publishes; ``formats`` are the
  string formats checked as published; ``schema`` holds pure JSON Schema helpers.
* ``validation``: a call's raw JSON to keyword arguments, strictly;
  ``jsonschemas`` checks hand-written schemas without fetching or backtracking.
* ``definition``: ``ToolDefinition`` and the host's tool-name rule.
* ``context``: the ``ToolContext`` a tool may ask for; ``injected`` marks the
  types the host fills in.

May import: _errors, _common.
"""
