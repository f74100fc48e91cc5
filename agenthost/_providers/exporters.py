"""One ToolDefinition, one function per provider format.

The canonical input schema (``ToolDefinition.input_schema``) is already
portable: root ``{"type": "object", "properties": ...}``, no titles, ``$defs``
inlined except for recursive models. Each exporter only applies its
provider's own rules on top (its schema dialect is in ``dialects``). Results
are frozen and cached on the definition, so listing thousands of tools again
costs a dictionary lookup per tool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from agenthost._authoring.definition import ToolDefinition
from agenthost._common.frozen import freeze
from agenthost._providers.dialects import anthropic_strict_schema, gemini_schema, strict_schema

__all__ = [
    "DEFERRABLE",
    "FORMATS",
    "STRICT_FORMATS",
    "Format",
    "export_tool",
    "export_tools",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai",
    "to_openai_responses",
]

Format = Literal["openai", "openai-responses", "anthropic", "gemini", "mcp"]
FORMATS: tuple[Format, ...] = ("openai", "openai-responses", "anthropic", "gemini", "mcp")
STRICT_FORMATS: tuple[Format, ...] = ("openai", "openai-responses", "anthropic")
DEFERRABLE: tuple[Format, ...] = ("openai-responses", "anthropic")  # defer_loading + tool search
JsonSchema = dict[str, Any]


def export_tools(
    definitions: Iterable[ToolDefinition],
    format: Format = "openai",
    *,
    strict: bool = False,
    loaded: Iterable[str] | None = None,
    cache_control: bool | Mapping[str, Any] = False,
) -> list[Mapping[str, Any]]:
    """Every definition in ``format`` (read-only dicts, cached per definition).

    ``loaded`` names the tools the model sees up front (None: all). The rest are
    sent with ``defer_loading: true`` where the provider has tool search
    (``anthropic``, ``openai-responses``) and left out where it has none, so an
    agent finds them with ``search_tools`` and asks again. ``cache_control``
    (Anthropic; True or ``{"type": "ephemeral", "ttl": "1h"}``) marks the last
    tool as a prompt-cache breakpoint, so the whole tool list is cached.
    """
    key = _key(format, strict)
    exported = [d._exports.get(key) or _export(d, key) for d in definitions]
    if loaded is not None:
        up_front = set(loaded)
        deferrable = format in DEFERRABLE
        exported = [
            tool if _name(tool) in up_front else freeze({**tool, "defer_loading": True})
            for tool in exported
            if deferrable or _name(tool) in up_front
        ]
    if cache_control and format == "anthropic" and exported:
        breakpoint = {"type": "ephemeral"} if cache_control is True else dict(cache_control)
        exported[-1] = freeze({**exported[-1], "cache_control": breakpoint})
    return exported


def _name(exported: Mapping[str, Any]) -> Any:
    return exported["function"]["name"] if "function" in exported else exported["name"]


def export_tool(
    definition: ToolDefinition, format: Format = "openai", *, strict: bool = False
) -> Mapping[str, Any]:
    """One definition in ``format``; ``strict`` applies to the OpenAI and Anthropic formats."""
    key = _key(format, strict)
    return definition._exports.get(key) or _export(definition, key)


def to_openai(definition: ToolDefinition, *, strict: bool = False) -> Mapping[str, Any]:
    """Chat Completions: ``{"type": "function", "function": {...}}``; ``strict`` only if asked."""
    return export_tool(definition, "openai", strict=strict)


def to_openai_responses(definition: ToolDefinition, *, strict: bool = False) -> Mapping[str, Any]:
    """Responses API: flat, and always with an explicit ``strict``."""
    return export_tool(definition, "openai-responses", strict=strict)


def to_anthropic(definition: ToolDefinition, *, strict: bool = False) -> Mapping[str, Any]:
    """Anthropic Messages: ``name``, ``description``, ``input_schema``, ``input_examples``;
    ``strict`` when asked and the schema fits Anthropic's strict tool use."""
    return export_tool(definition, "anthropic", strict=strict)


def to_gemini(definition: ToolDefinition, *, json_schema: bool = False) -> Mapping[str, Any]:
    """A Gemini ``FunctionDeclaration``: the OpenAPI subset, or ``parametersJsonSchema``."""
    key = ("gemini", json_schema)
    return definition._exports.get(key) or _export(definition, key)


def to_mcp(definition: ToolDefinition) -> Mapping[str, Any]:
    """An MCP ``Tool``: ``outputSchema`` when the return type is known, hints as annotations."""
    return export_tool(definition, "mcp")


def _key(format: str, strict: bool) -> tuple[str, bool]:
    if format not in _BUILDERS:
        raise ValueError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    return format, strict and format in STRICT_FORMATS


def _export(definition: ToolDefinition, key: tuple[str, bool]) -> Mapping[str, Any]:
    format, flag = key
    exported: Mapping[str, Any] = freeze(_BUILDERS[format](definition, flag))
    definition._exports[key] = exported
    return exported


def _build_openai(definition: ToolDefinition, strict: bool) -> JsonSchema:
    function: JsonSchema = {"name": definition.name}
    _describe(function, definition)
    function["parameters"], strict_ok = _openai_parameters(definition, strict)
    if strict:
        function["strict"] = strict_ok
    return {"type": "function", "function": function}


def _build_openai_responses(definition: ToolDefinition, strict: bool) -> JsonSchema:
    out: JsonSchema = {"type": "function", "name": definition.name}
    _describe(out, definition)
    out["parameters"], out["strict"] = _openai_parameters(definition, strict)
    output = _json_output(definition)
    if output is not None:
        out["output_schema"] = output
    return out


def _json_output(definition: ToolDefinition) -> Mapping[str, Any] | None:
    """The schema of the JSON a result's text holds, if it always holds JSON.

    A result's text is the JSON of the return value, except that a returned
    string is the text itself: a tool that may return a string has none.
    """
    schema = definition.output_schema
    if schema is None:
        return None
    properties = schema.get("properties") or {}
    if list(properties) == ["result"] and list(schema.get("required") or ()) == ["result"]:
        schema = properties["result"]  # a non-object return, wrapped for MCP
    return None if _may_be_string(schema) else schema


def _may_be_string(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "string" in kinds or (kind is None and not schema.get("anyOf") and "enum" not in schema):
        return "$ref" not in schema and "const" not in schema
    if any(isinstance(v, str) for v in schema.get("enum", ())):
        return True
    return any(_may_be_string(v) for v in schema.get("anyOf") or () if isinstance(v, Mapping))


def _build_anthropic(definition: ToolDefinition, strict: bool) -> JsonSchema:
    out: JsonSchema = {"name": definition.name}
    text = _description(definition, argument_examples=False)
    if text:
        out["description"] = text
    out["input_schema"] = definition.input_schema
    if strict:
        converted, _ = anthropic_strict_schema(definition.input_schema)
        if converted is not None:
            out["input_schema"], out["strict"] = converted, True
    examples = [e for e in definition.examples if not isinstance(e, str)]
    if examples:
        out["input_examples"] = examples
    return out


def _build_gemini(definition: ToolDefinition, json_schema: bool) -> JsonSchema:
    out: JsonSchema = {"name": definition.name, "description": _description(definition)}
    output = definition.output_schema
    if json_schema:
        out["parametersJsonSchema"] = definition.input_schema
        if output is not None:
            out["responseJsonSchema"] = output
    else:
        if definition.input_schema.get("properties"):
            out["parameters"] = gemini_schema(definition.input_schema)[0]
        if output is not None:
            out["response"] = gemini_schema(output)[0]
    return out


def _build_mcp(definition: ToolDefinition, _: bool) -> JsonSchema:
    out: JsonSchema = {"name": definition.name}
    out["title"] = definition.title or definition.name.replace("_", " ").strip().capitalize()
    _describe(out, definition)
    out["inputSchema"] = definition.input_schema
    if definition.output_schema is not None:
        out["outputSchema"] = definition.output_schema
    hints = definition.hints
    annotations = {
        "readOnlyHint": hints.read_only,
        "destructiveHint": hints.destructive,
        "idempotentHint": hints.idempotent,
        "openWorldHint": hints.open_world,
    }
    annotations = {key: value for key, value in annotations.items() if value is not None}
    if annotations:
        out["annotations"] = {"title": out["title"], **annotations}
    if definition.icons:
        out["icons"] = definition.icons
    if definition.meta is not None:
        out["_meta"] = definition.meta
    return out


_BUILDERS: dict[str, Callable[[ToolDefinition, bool], JsonSchema]] = {
    "openai": _build_openai,
    "openai-responses": _build_openai_responses,
    "anthropic": _build_anthropic,
    "gemini": _build_gemini,
    "mcp": _build_mcp,
}


def _description(definition: ToolDefinition, *, argument_examples: bool = True) -> str:
    """The description a model sees: the tool's description, then its examples (argument
    objects only where the format has no field of their own)."""
    text = definition.description
    examples = [e for e in definition.examples if argument_examples or isinstance(e, str)]
    if examples:
        lines = [
            example if isinstance(example, str) else json.dumps(example) for example in examples
        ]
        text = (text + "\n\n" if text else "") + "Examples:\n" + "\n".join(f"- {x}" for x in lines)
    return text


def _describe(out: JsonSchema, definition: ToolDefinition) -> None:
    text = _description(definition)
    if text:
        out["description"] = text


def _openai_parameters(definition: ToolDefinition, strict: bool) -> tuple[Mapping[str, Any], bool]:
    if not strict:
        return definition.input_schema, False
    converted, _ = strict_schema(definition.input_schema)
    if converted is None:
        return definition.input_schema, False
    return converted, True
