"""``ToolResult``: what every call returns, and the rules that turn return values into it.

A result has two channels: ``output``, the text a model reads, and ``data``, a
JSON-safe value for programs. How a return value maps onto them:

=========================  =========================================================
returned                   result
=========================  =========================================================
``str``                    ``output`` is the string; ``data`` is None
``None``                   empty ``output``; ``data`` is None
dict, list, tuple, set,    ``data`` is the JSON-safe value (pydantic's rules:
pydantic model, dataclass, datetimes as ISO strings, enums as their values, ...);
number, bool, datetime,    ``output`` is its compact JSON text
enum, UUID, Decimal, Path
``bytes``                  UTF-8 text goes to ``output``; other bytes become
                           ``data = {"type": "bytes", "base64": ..., "size": n}``
                           and a one-line ``output`` saying so
anything else              ``output`` is ``str(value)`` (else ``repr``, else a
                           placeholder); ``data`` is None
=========================  =========================================================

An ``output`` longer than the host's ``max_output`` is cut there and ends with
a visible ``[truncated: ...]`` marker (``truncated`` is True); ``data`` whose
JSON would be longer is dropped for the same reason, as is data JSON cannot
carry (``NaN``, ``Infinity``) or Python's own ``json`` cannot read back
(integers beyond its 4,300-digit limit). Every text
of a result encodes as UTF-8: lone surrogates become U+FFFD.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, final

import pydantic_core

from agenthost._common.text import printable, utf8

__all__ = [
    "ErrorCode",
    "Prerendered",
    "Rendered",
    "ToolError",
    "ToolResult",
    "normalise",
    "render",
]

ErrorCode = Literal[
    "unknown_tool",
    "invalid_arguments",
    "permission_denied",
    "timeout",
    "tool_error",
    "cancelled",
    "requires_action",
    "unavailable",
]


@dataclass(frozen=True, slots=True)
class ToolError:
    """Why a call did not succeed: a stable ``code``, a message for the model, and details."""

    code: ErrorCode
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": dict(self.details)}


@final  # never subclassed, so the executor may tell it apart with ``type(x) is ToolResult``
@dataclass(slots=True)
class ToolResult:
    """The outcome of one call; ``execute`` always returns one and never raises.

    A plain record (not frozen, because building it is on every call's path);
    the host never changes a result after handing it out.
    """

    success: bool
    output: str = ""
    data: Any = None
    error: ToolError | None = None
    tool: str = ""
    plugin: str | None = None
    version: str | None = None
    call_id: str = ""
    duration_ms: float = 0.0
    truncated: bool = False

    @classmethod
    def ok(cls, output: str = "", data: Any = None) -> ToolResult:
        """A success, for interceptors that answer without running the tool."""
        return cls(True, output, data)

    @classmethod
    def fail(cls, code: ErrorCode, message: str, **details: Any) -> ToolResult:
        """A failure with an error code, for interceptors that reject a call."""
        message = utf8(message)
        return cls(False, message, None, ToolError(code, message, details))

    @property
    def content(self) -> str:
        """The text to send back to the model: the output, or the error explained."""
        if self.error is None:
            return self.output
        return f"Error ({self.error.code}): {self.error.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "success": self.success,
            "output": self.output,
            "data": self.data,
            "error": self.error.as_dict() if self.error else None,
            "tool": self.tool,
            "plugin": self.plugin,
            "version": self.version,
            "call_id": self.call_id,
            "duration_ms": self.duration_ms,
            "truncated": self.truncated,
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """The record as JSON text (values JSON cannot hold are written as strings)."""
        return pydantic_core.to_json(self.to_dict(), indent=indent, fallback=str).decode()


Rendered = tuple[str, Any, bool]  # output, data, truncated


class Prerendered:
    """A value rendered elsewhere (in a worker process), ``size`` bytes as it arrived:
    ``render`` applies the host's own limits to it again."""

    __slots__ = ("data", "output", "size", "truncated")

    def __init__(self, output: str, data: Any, truncated: bool, size: int) -> None:
        self.output, self.data, self.truncated, self.size = output, data, truncated, size

    def limited(self, max_output: int) -> Rendered:
        output, data, truncated = _limited(self.output, self.data, max_output)
        if data is not None and self.size > max_output and _json_size(data) > max_output:
            data = None  # as for a value rendered here: data too large to keep is dropped
        return output, data, truncated or self.truncated


def _json_size(data: Any) -> int:
    return len(pydantic_core.to_json(data))


def normalise(value: Any, max_output: int) -> ToolResult:
    """The success result for a tool's return value (see the module docstring)."""
    output, data, truncated = render(value, max_output)
    return ToolResult(True, output, data, truncated=truncated)


def render(value: Any, max_output: int) -> Rendered:
    """A return value as ``(output, data, truncated)`` (the executor's fast paths build
    the result from these directly). Raises only what the value's own serializers raise."""
    kind = type(value)
    if kind is str:
        return _limited(value, None, max_output)
    if value is None:
        return "", None, False
    if kind is Prerendered:
        prerendered: Prerendered = value
        return prerendered.limited(max_output)
    if kind is int:
        try:
            return str(value), value, False
        except ValueError:  # beyond Python's 4,300-digit limit: JSON writes it below
            pass
    if kind is bool:
        return ("true" if value else "false"), value, False
    if kind is float:
        if not math.isfinite(value):
            return str(value), None, False  # JSON has no NaN or Infinity
        return repr(value), value, False
    if isinstance(value, bytes | bytearray | memoryview):
        return _binary(bytes(value), max_output)
    try:
        text = pydantic_core.to_json(value).decode()
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError, RecursionError):
        return _limited(printable(value), None, max_output)
    if len(text) > max_output:
        return _limited(text, None, max_output)
    try:
        return text, json.loads(text, parse_constant=_no_constant), False
    except (ValueError, RecursionError):  # integers beyond Python's digit limit, NaN
        return text, None, False


def _no_constant(name: str) -> Any:
    raise ValueError(f"JSON has no {name}")


def _limited(text: str, data: Any, max_output: int) -> Rendered:
    text = utf8(text)
    if len(text) <= max_output:
        return text, data, False
    marker = f"\n[truncated: {len(text):,} characters, the first {max_output:,} shown]"
    return text[:max_output] + marker, None, True


def _binary(raw: bytes, max_output: int) -> Rendered:
    try:
        return _limited(raw.decode(), None, max_output)
    except UnicodeDecodeError:
        pass
    encoded = base64.b64encode(raw).decode()
    if len(encoded) > max_output:
        return f"[{len(raw):,} bytes of binary data, too large to return]", None, True
    summary = f"[{len(raw):,} bytes of binary data, base64 in data]"
    return summary, {"type": "bytes", "base64": encoded, "size": len(raw)}, False
