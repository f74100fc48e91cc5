"""The call path: a tool name and a model's arguments in, a ``ToolResult`` out, always.

* ``executor``: admits a call (lookup, permissions, arguments, version held)
  and runs it; ``reading`` reads provider tool-call objects for batches.
* ``chain``: the interceptors around a call; ``interceptors`` the built-in ones.
* ``running``: where a tool runs (inline, worker threads, the host's loop) and
  how its time limit is kept; ``workers`` the pool and loop thread themselves.
* ``boundary``: the one place tool code is entered and its failures caught.
* ``results``: ``ToolResult`` and how return values become one; ``outcomes``
  the results the host writes itself (refused, handed back, out of time).
* ``streaming``, ``permissions``, ``metrics``.

May import: _errors, _common, _authoring, _directory.
"""
