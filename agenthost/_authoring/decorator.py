"""The ``@tool`` decorator: marks a function as a tool and records its options.

Decorating does no analysis and never raises for a badly written tool: the
function comes back unchanged (still plain, unit-testable Python) with the
options attached. The host builds the definition when it scans the plugin, so
one wrong tool is reported with all its problems while the rest of its plugin
still loads. :meth:`ToolDefinition.from_function` does the same on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

__all__ = ["TOOL_ATTRIBUTE", "ToolOptions", "tool", "tool_options"]

F = TypeVar("F", bound=Callable[..., Any])

TOOL_ATTRIBUTE = "__agenthost_tool__"


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """What the author wrote in ``@tool(...)``, checked later when the definition is built."""

    name: str | None = None
    title: str | None = None
    description: str | None = None
    permissions: Iterable[str] = ()
    timeout: float | bool | None = None
    tags: Iterable[str] = ()
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None
    definition_only: bool = False
    examples: Iterable[Mapping[str, Any] | str] = ()
    input_schema: Mapping[str, Any] | None = None
    cache_ttl: float | None = None
    retries: int = 0
    icons: Iterable[Mapping[str, Any]] = ()
    meta: Mapping[str, Any] | None = None
    unknown: tuple[str, ...] = ()


_OPTION_NAMES = frozenset(ToolOptions.__dataclass_fields__) - {"unknown"}


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    permissions: Iterable[str] = (),
    timeout: float | bool | None = None,
    tags: Iterable[str] = (),
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    definition_only: bool = False,
    examples: Iterable[Mapping[str, Any] | str] = (),
    input_schema: Mapping[str, Any] | None = None,
    cache_ttl: float | None = None,
    retries: int = 0,
    icons: Iterable[Mapping[str, Any]] = (),
    meta: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...


def tool(fn: Any = None, /, **options: Any) -> Any:
    """Mark a function as a tool, bare (``@tool``) or with options (``@tool(name=...)``).

    Options: ``name`` (default: the function name), ``title`` (human-readable,
    for MCP), ``description`` (default: the docstring summary), ``permissions``
    (strings the caller's session must hold), ``timeout`` (seconds; ``False``
    turns the host default off), ``tags``, the MCP hints ``read_only``,
    ``destructive``, ``idempotent`` and ``open_world``, ``definition_only``
    (the host describes the tool but the client runs it), ``examples`` (example
    argument objects, checked against the schema, or usage text),
    ``input_schema`` (a hand-written JSON Schema instead of the signature's),
    ``cache_ttl`` (seconds a ``CachingInterceptor`` may reuse a result),
    ``retries`` (how often a ``RetryInterceptor`` may rerun a failed call; the
    tool must be ``idempotent=True``), and for MCP clients ``icons`` (``{"src":
    "https://...", "mimeType": ..., "sizes": [...], "theme": "light"|"dark"}``)
    and ``meta`` (the tool's ``_meta`` object).
    """
    if fn is None:
        known = {key: value for key, value in options.items() if key in _OPTION_NAMES}
        unknown = tuple(sorted(set(options) - _OPTION_NAMES))

        def decorate(function: F) -> F:
            return _mark(function, ToolOptions(**known, unknown=unknown))

        return decorate
    if options:
        raise TypeError("use either @tool or @tool(...), not both")
    if isinstance(fn, str):
        raise TypeError(f"@tool({fn!r}): pass options by keyword, e.g. @tool(name={fn!r})")
    return _mark(fn, ToolOptions())


def _mark(function: F, options: ToolOptions) -> F:
    if not callable(function):
        raise TypeError(f"@tool can only decorate a callable, not {type(function).__name__}")
    setattr(function, TOOL_ATTRIBUTE, options)
    return function


def tool_options(obj: object) -> ToolOptions | None:
    """The options ``@tool`` attached to ``obj``, or None if it is not a tool."""
    try:
        options = getattr(obj, TOOL_ATTRIBUTE, None)
    except BaseException:  # noqa: BLE001 - a plugin object with a hostile __getattr__
        return None
    return options if isinstance(options, ToolOptions) else None
