"""One ToolDefinition, one function per provider format.

The canonical input schema (``ToolDefinition.input_schema``) is already
portable: root ``{"type": "object", "properties": ...}``, no titles, ``$defs``
inlined except for recursive models. Each exporter only applies its
provider's own rules on top. Results are frozen and cached on the definition,
so listing thousands of tools again costs a dictionary lookup per tool.

The converters also return *notes* (what was lost or will be rejected); the
exporters drop them and :mod:`agenthost._providers.compatibility` turns them into findings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from agenthost._authoring.definition import ToolDefinition
from agenthost._authoring.schema import admits_null, recursive_definitions, ref_name
from agenthost._common.frozen import freeze

__all__ = [
    "DEFERRABLE",
    "FORMATS",
    "STRICT_FORMATS",
    "Format",
    "Note",
    "export_tool",
    "export_tools",
    "anthropic_strict_schema",
    "gemini_schema",
    "strict_schema",
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
Note = tuple[Literal["error", "warning", "info"], str]


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


# --- OpenAI strict mode -------------------------------------------------------------------------
# Keywords and formats from OpenAI's "Structured Outputs: supported schemas" guide.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum",
        "const", "description", "pattern", "format", "multipleOf", "maximum",
        "exclusiveMaximum", "minimum", "exclusiveMinimum", "minItems", "maxItems", "$ref", "$defs",
    }
)  # fmt: skip
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_ANNOTATIONS = frozenset(
    {"title", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment", "$schema"}
)
STRICT_MAX_PROPERTIES = 5000
STRICT_MAX_DEPTH = 10
STRICT_MAX_ENUM_VALUES = 1000


def strict_schema(schema: Mapping[str, Any]) -> tuple[JsonSchema | None, list[Note]]:
    """The schema under OpenAI strict rules, or None and the reasons it cannot be made strict.

    Every object gets ``additionalProperties: false`` and lists all its
    properties as required; a property that was optional becomes nullable
    (the validator reads ``null`` there as "use the default"). Annotations
    (title, default, examples, unsupported formats) are dropped; any
    validation keyword OpenAI does not support makes the schema non-strict.
    """
    reasons: list[str] = []
    totals = {"properties": 0, "enum": 0}

    def walk(node: Mapping[str, Any], depth: int, path: str) -> JsonSchema:
        node = _merge_single_all_of(node, path, reasons)
        out: JsonSchema = {}
        for key, value in node.items():
            if key == "oneOf":
                key = "anyOf"
            if key in _ANNOTATIONS or (key == "format" and value not in _STRICT_FORMATS):
                continue
            if key not in _STRICT_KEYWORDS:
                reasons.append(f"{path}: keyword '{key}' is not supported in strict mode")
                continue
            out[key] = value
        if not out.keys() - {"description"}:
            reasons.append(f"{path}: a value of any type cannot be strict")
        if "properties" in out or out.get("type") == "object":
            _strict_object(out, depth, path)
        if isinstance(out.get("items"), Mapping):
            out["items"] = walk(out["items"], depth, f"{path}[]")
        if "anyOf" in out:
            out["anyOf"] = [walk(v, depth, path) for v in out["anyOf"]]
        if "$defs" in out:
            out["$defs"] = {k: walk(v, depth, f"$defs.{k}") for k, v in out["$defs"].items()}
        totals["enum"] += len(out.get("enum", ()))
        return out

    def _strict_object(out: JsonSchema, depth: int, path: str) -> None:
        extra = out.get("additionalProperties")
        if extra not in (None, False):
            reasons.append(f"{path}: an object with free-form keys (a dict) cannot be strict")
        if depth > STRICT_MAX_DEPTH:
            reasons.append(f"{path}: nested deeper than {STRICT_MAX_DEPTH} levels")
        properties = out.get("properties") or {}
        totals["properties"] += len(properties)
        required = set(out.get("required") or ())
        converted = {}
        for name, sub in properties.items():
            strict_sub = walk(sub, depth + 1, f"{path}.{name}")
            if name not in required and not admits_null(strict_sub):
                strict_sub = _nullable(strict_sub)
            converted[name] = strict_sub
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False

    result = walk(schema, 1, "$")
    if totals["properties"] > STRICT_MAX_PROPERTIES:
        reasons.append(f"more than {STRICT_MAX_PROPERTIES} properties in total")
    if totals["enum"] > STRICT_MAX_ENUM_VALUES:
        reasons.append(f"more than {STRICT_MAX_ENUM_VALUES} enum values in total")
    if reasons:
        return None, [("info", "strict mode not possible: " + r) for r in dict.fromkeys(reasons)]
    return result, []


def _merge_single_all_of(
    node: Mapping[str, Any], path: str, reasons: list[str]
) -> Mapping[str, Any]:
    all_of = node.get("allOf")
    if not isinstance(all_of, list):
        return node
    if len(all_of) != 1:
        reasons.append(f"{path}: 'allOf' with several schemas cannot be strict")
        return node
    rest = {k: v for k, v in node.items() if k != "allOf"}
    return {**all_of[0], **rest}


def _nullable(schema: Mapping[str, Any]) -> JsonSchema:
    inner = {k: v for k, v in schema.items() if k != "description"}
    out: JsonSchema = {"anyOf": [inner, {"type": "null"}]}
    if "description" in schema:
        out["description"] = schema["description"]
    return out


# --- Anthropic strict tool use --------------------------------------------------------------------
# From Anthropic's "Structured outputs: JSON Schema limitations" and its SDK's transform_schema:
# objects must say additionalProperties: false (optional properties may stay optional); string
# formats from a short list; minItems 0 or 1; no recursion. Other constraints are not enforced
# by the grammar: they move into the description, and the host still validates them.
_ANTHROPIC_KEPT = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "anyOf", "allOf", "enum",
     "const", "description", "format", "minItems", "$ref", "$defs"}
)  # fmt: skip
_ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)


def anthropic_strict_schema(schema: Mapping[str, Any]) -> tuple[JsonSchema | None, list[Note]]:
    """The schema under Anthropic's strict tool use rules, or None and the reasons why not."""
    reasons: list[str] = []
    cyclic = recursive_definitions(schema.get("$defs") or {})

    def walk(node: Mapping[str, Any], path: str) -> JsonSchema:
        name = ref_name(node.get("$ref"))
        if name in cyclic:
            reasons.append(f"{path}: recursive model '{name}' cannot be strict")
        out: JsonSchema = {}
        moved: dict[str, Any] = {}
        for key, value in node.items():
            key = "anyOf" if key == "oneOf" else key
            if key in _ANNOTATIONS:
                continue
            unsupported = (key == "format" and value not in _ANTHROPIC_FORMATS) or (
                key == "minItems" and value not in (0, 1)
            )
            (out if key in _ANTHROPIC_KEPT and not unsupported else moved)[key] = value
        if moved:
            extra = ", ".join(f"{k}: {json.dumps(v, default=str)}" for k, v in moved.items())
            out["description"] = (out.get("description", "") + f" {{{extra}}}").strip()
        if "properties" in out or out.get("type") == "object":
            if out.get("additionalProperties") not in (None, False):
                reasons.append(f"{path}: an object with free-form keys (a dict) cannot be strict")
            properties = out.get("properties") or {}
            out["properties"] = {k: walk(v, f"{path}.{k}") for k, v in properties.items()}
            out["additionalProperties"] = False
        if isinstance(out.get("items"), Mapping):
            out["items"] = walk(out["items"], f"{path}[]")
        for key in ("anyOf", "allOf"):
            if key in out:
                out[key] = [walk(v, path) for v in out[key]]
        if "$defs" in out:
            out["$defs"] = {k: walk(v, f"$defs.{k}") for k, v in out["$defs"].items()}
        if not out.keys() - {"description"}:
            reasons.append(f"{path}: a value of any type cannot be strict")
        return out

    result = walk(schema, "$")
    if reasons:
        return None, [("info", "strict mode not possible: " + r) for r in dict.fromkeys(reasons)]
    return result, []


# --- Gemini ---------------------------------------------------------------------------------------
# Fields of Gemini's ``Schema`` object (ai.google.dev/api/caching#Schema), a subset of OpenAPI 3.0.
GEMINI_KEYWORDS = frozenset(
    {
        "type", "format", "description", "nullable", "enum", "items", "properties", "required",
        "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum",
        "anyOf", "minProperties", "maxProperties", "default", "propertyOrdering", "example",
    }
)  # fmt: skip
_GEMINI_FORMATS = frozenset({"float", "double", "int32", "int64", "enum", "date-time"})
_SILENT_DROPS = frozenset({"title", "examples", "$schema", "$comment", "deprecated", "readOnly"})


def gemini_schema(schema: Mapping[str, Any]) -> tuple[JsonSchema, list[Note]]:
    """The schema in Gemini's OpenAPI subset, and notes on everything lost on the way."""
    notes: list[Note] = []
    defs: Mapping[str, Any] = schema.get("$defs") or {}

    def note(severity: Literal["error", "warning"], message: str) -> None:
        if (severity, message) not in notes:
            notes.append((severity, message))

    def walk(node: Mapping[str, Any], path: str, expanding: frozenset[str]) -> JsonSchema:
        node, nullable = _gemini_unnull(node)
        name = ref_name(node.get("$ref"))
        if name is not None:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if name in expanding or name not in defs:
                note(
                    "error", f"{path}: recursive model '{name}' is not supported; cut to an object"
                )
                out = {"type": "OBJECT", **_gemini_plain(siblings)}
            else:
                out = walk({**defs[name], **siblings}, path, expanding | {name})
            if nullable:
                out["nullable"] = True
            return out
        out = {}
        for key, value in node.items():
            if key == "properties":
                out[key] = {k: walk(v, f"{path}.{k}", expanding) for k, v in value.items()}
            elif key == "items" and isinstance(value, Mapping):
                out[key] = walk(value, f"{path}[]", expanding)
            elif key in ("anyOf", "oneOf"):
                out["anyOf"] = [walk(v, path, expanding) for v in value]
            elif key == "prefixItems":
                note("warning", f"{path}: tuple item types are merged (no prefixItems)")
                out["items"] = {"anyOf": [walk(v, f"{path}[]", expanding) for v in value]}
            elif key == "additionalProperties":
                if value not in (False, None):
                    note("error", f"{path}: objects with free-form keys (dict) are not supported")
            elif key == "const":
                out["enum"] = [value]
            elif key == "type":
                out[key] = str(value).upper()
            elif key == "format":
                if value in _GEMINI_FORMATS:
                    out[key] = value
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                note("warning", f"{path}: '{key}' becomes an inclusive bound")
                out[key.replace("exclusiveM", "m")] = value
            elif key in GEMINI_KEYWORDS:
                out[key] = value
            elif key not in _SILENT_DROPS and key != "$defs":
                note("warning", f"{path}: keyword '{key}' is not supported and is dropped")
        _gemini_enum(out, path, note)
        if nullable:
            out["nullable"] = True
        if "type" not in out and "anyOf" not in out and "enum" not in out:
            note("warning", f"{path}: a value of any type has no Gemini type")
        return out

    return walk(schema, "$", frozenset()), notes


def _gemini_plain(node: Mapping[str, Any]) -> JsonSchema:
    return {k: v for k, v in node.items() if k == "description"}


def _gemini_unnull(node: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """Fold ``null`` out of ``type`` lists and ``anyOf`` into ``nullable``."""
    kind = node.get("type")
    if isinstance(kind, list):
        others = [t for t in kind if t != "null"]
        rest = {k: v for k, v in node.items() if k != "type"}
        if len(others) == 1:
            return {**rest, "type": others[0]}, "null" in kind
        return {**rest, "anyOf": [{"type": t} for t in others]}, "null" in kind
    variants = node.get("anyOf") or node.get("oneOf")
    if isinstance(variants, list) and any(v == {"type": "null"} for v in variants):
        others = [v for v in variants if v != {"type": "null"}]
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        if len(others) == 1:
            return {**others[0], **rest}, True
        return {**rest, "anyOf": others}, True
    return node, False


def _gemini_enum(
    out: JsonSchema, path: str, note: Callable[[Literal["error", "warning"], str], None]
) -> None:
    values = out.get("enum")
    if values is None:
        return
    if None in values:
        values = [v for v in values if v is not None]
        out["nullable"] = True
    if all(isinstance(v, str) for v in values):
        out["enum"] = values
        out["type"] = "STRING"
        return
    del out["enum"]
    note("warning", f"{path}: only string enums are supported; the allowed values go in the text")
    allowed = ", ".join(json.dumps(v) for v in values)
    out["description"] = (out.get("description", "") + f" Allowed values: {allowed}.").strip()
    kinds = {type(v) for v in values}
    if "type" not in out and kinds and kinds <= {int, float}:
        out["type"] = "INTEGER" if kinds == {int} else "NUMBER"
