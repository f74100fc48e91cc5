"""The per-call context a tool (and every interceptor) can see.

A tool asks for it by declaring a parameter annotated ``ToolContext`` (or
``ToolContext | None``): the host injects it and it never appears in any schema.
Code deeper down reaches the same object through :func:`current_context`, which
is backed by a context variable and so follows the call into tasks and into the
worker threads the executor starts.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agenthost._authoring.definition import ToolDefinition
from agenthost._authoring.injected import Injected
from agenthost._common.masking import jsonable, mask_secrets

__all__ = ["ToolContext", "current_context"]


@dataclass(slots=True, eq=False, repr=False)
class ToolContext(Injected):
    """Everything known about one tool call while it runs.

    ``attributes`` is a free-form dict that interceptors use to pass values to
    each other and to the tool (a trace id, a cache hit flag, ...).
    """

    tool: ToolDefinition
    call_id: str
    session: str | None = None
    raw_arguments: str | bytes | Mapping[str, Any] | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    plugin: str | None = None
    version: str | None = None
    _entry: Any = field(default=None, repr=False)  # the registry entry the call runs on
    _sink: Callable[[str], None] | None = field(default=None, repr=False)  # streamed output

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name

    def __repr__(self) -> str:
        # Contexts end up in logs and tracebacks: never show a secret argument's value.
        return (
            f"ToolContext(tool={self.tool.name!r}, call_id={self.call_id!r}, "
            f"session={self.session!r}, arguments={mask_secrets(jsonable(self.arguments))!r}, "
            f"attributes={mask_secrets(jsonable(self.attributes))!r}, plugin={self.plugin!r}, "
            f"version={self.version!r})"
        )


_current: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "agenthost_tool_context", default=None
)


# Where a streamed call's generator output goes: set by astream around the call it runs.
_sink: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "agenthost_stream_sink", default=None
)


def current_context() -> ToolContext | None:
    """The context of the tool call running in this thread or task, if any."""
    return _current.get()
