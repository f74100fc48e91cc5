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
JSON would be longer is dropped for the same reason.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic_core

__all__ = ["ErrorCode", "ToolError", "ToolResult", "normalise"]

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

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), default=str, **kwargs)


def normalise(value: Any, max_output: int) -> ToolResult:
    """The success result for a tool's return value (see the module docstring)."""
    kind = type(value)
    if kind is str:
        return _limited(value, None, max_output)
    if value is None:
        return ToolResult(True)
    if kind is int:
        return ToolResult(True, str(value), value)
    if kind is bool:
        return ToolResult(True, "true" if value else "false", value)
    if kind is float:
        if not math.isfinite(value):
            return ToolResult(True, str(value))  # JSON has no NaN or Infinity
        return ToolResult(True, repr(value), value)
    if isinstance(value, bytes | bytearray | memoryview):
        return _binary(bytes(value), max_output)
    try:
        text = pydantic_core.to_json(value).decode()
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError):
        return _limited(_printable(value), None, max_output)
    if len(text) > max_output:
        return _limited(text, None, max_output)
    return ToolResult(True, text, json.loads(text))


def _printable(value: Any) -> str:
    for render in (str, repr):
        try:
            return render(value)
        except Exception:  # noqa: BLE001 - a broken __str__ must not break the call
            continue
    return f"<unprintable {type(value).__name__} object>"


def _limited(text: str, data: Any, max_output: int) -> ToolResult:
    if len(text) <= max_output:
        return ToolResult(True, text, data)
    marker = f"\n[truncated: {len(text):,} characters, the first {max_output:,} shown]"
    return ToolResult(True, text[:max_output] + marker, None, truncated=True)


def _binary(raw: bytes, max_output: int) -> ToolResult:
    try:
        return _limited(raw.decode(), None, max_output)
    except UnicodeDecodeError:
        pass
    encoded = base64.b64encode(raw).decode()
    summary = f"[{len(raw):,} bytes of binary data, base64 in data]"
    if len(encoded) > max_output:
        too_large = f"[{len(raw):,} bytes of binary data, too large to return]"
        return ToolResult(True, too_large, None, truncated=True)
    return ToolResult(True, summary, {"type": "bytes", "base64": encoded, "size": len(raw)})
