"""The MCP form of a ``ToolResult``: text content, and structured content checked first.

The official client raises on structured content that breaks the tool's output
schema, so a tool whose return breaks its own annotation gets an error result
that says so instead; the checks are built once per schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import mcp.types as types

from agenthost._authoring import jsonschemas
from agenthost._calls.results import ToolResult
from agenthost._directory.records import ToolInfo

__all__ = ["Answers", "error"]


class Answers:
    """Turns results into ``CallToolResult``s, keeping one schema check per output schema."""

    def __init__(self) -> None:
        self._validators: dict[int, tuple[Mapping[str, Any], Any, Any]] = {}  # by output schema

    def answer(self, result: ToolResult, info: ToolInfo | None) -> types.CallToolResult:
        """The MCP form of a result: text, plus structured content when there is an output schema.

        Structured content is checked against the schema first: the official client
        raises on a mismatch, so a tool whose return breaks its own annotation gets
        an error result that says so instead.
        """
        if result.error is not None and result.error.code == "permission_denied":
            # A grant withdrawn while the call was on its way: to this caller the tool is
            # gone, as a tool it may not see always is (the server checks before calling).
            return error(f"Error (unknown_tool): unknown tool {result.tool!r}")
        if not result.success:
            return error(result.content)
        schema = info.output_schema if info is not None else None
        if schema is None:
            return types.CallToolResult(content=[_text(result.output)])
        wrapped = _wrapped(schema)
        structured = {"result": _value(result, schema)} if wrapped else result.data
        if result.truncated and structured is None:
            return error(
                f"Error (tool_error): tool {result.tool!r} returned more than the host's "
                "max_output allows, and structured content cannot be cut; return less, or "
                "raise PluginHost(max_output=...)"
            )
        problem = self._mismatch(schema, structured)
        if problem is not None:
            if wrapped:  # the path and value of the wrapper would only confuse
                problem = f"it wants {json.dumps(schema['properties']['result'])[:200]}"
            shown = result.output if len(result.output) <= 80 else result.output[:80] + "..."
            return error(
                f"Error (tool_error): tool {result.tool!r} returned {shown!r}, which does not "
                f"match its output schema ({problem}); fix its return annotation or what it "
                "returns"
            )
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        return types.CallToolResult(content=[_text(text)], structured_content=structured)

    def _mismatch(self, schema: Mapping[str, Any], value: Any) -> str | None:
        """Why ``value`` breaks ``schema``, or None; checks are built once per schema. The
        common ``{"result": <scalar>}`` needs no jsonschema, which takes a second to import
        with rfc3987-syntax installed, on the event loop of every client."""
        entry = self._validators.get(id(schema))
        if entry is None or entry[0] is not schema:
            if len(self._validators) > 1024:
                self._validators.clear()
            entry = self._validators[id(schema)] = (schema, None, _quick_check(schema))
        if not isinstance(value, dict):
            return "no JSON object to send"
        quick = entry[2]
        if quick is not None and quick(value):
            return None
        validator = entry[1]
        if validator is None:
            validator = jsonschemas.validator(schema, formats=False)
            self._validators[id(schema)] = (schema, validator, quick)
        if quick is None and validator.is_valid(value):
            return None
        import jsonschema

        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return None
        where = "".join(f"[{p!r}]" for p in error.absolute_path) or "the value"
        return f"{where}: {error.message[:200]}"


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[_text(message)], is_error=True)


def _wrapped(schema: Mapping[str, Any]) -> bool:
    """Whether an output schema is a non-object return wrapped as ``{"result": ...}``."""
    return (
        set(schema) == {"type", "properties", "required"}
        and list(schema["properties"]) == ["result"]
        and list(schema["required"]) == ["result"]
    )


_SCALARS: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
}


def _quick_check(schema: Mapping[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """A type test for the common ``{"result": <scalar>}`` wrapper: jsonschema costs 6 µs."""
    if not _wrapped(schema):
        return None
    inner = schema["properties"]["result"]
    if not isinstance(inner, Mapping) or not set(inner) <= {"type", "title", "description"}:
        return None
    kinds = _SCALARS.get(inner.get("type"))  # type: ignore[arg-type]
    if kinds is None:
        return None
    return lambda value: type(value.get("result")) in kinds  # bool is not an integer here


def _value(result: ToolResult, schema: Mapping[str, Any]) -> Any:
    """The return value as JSON: a string return lives in ``output``, binary as base64."""
    if schema["properties"]["result"].get("type") != "string":
        return result.data
    data = result.data
    if isinstance(data, dict) and data.get("type") == "bytes":
        return data["base64"]
    return result.output
