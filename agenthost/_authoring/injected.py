"""Parameters the host fills in: a tool asks for one by its type, and it is in no schema.

Reading a signature only needs to know that a type is injected, not what it
is, so the signature reader imports this marker rather than ``ToolContext``,
whose ``tool`` attribute is the ``ToolDefinition`` that reading builds.
"""

from __future__ import annotations

__all__ = ["Injected"]


class Injected:
    """Base of the types the host passes to a tool instead of the model (``ToolContext``)."""

    __slots__ = ()
