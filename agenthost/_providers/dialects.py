"""Each provider's dialect of JSON Schema: OpenAI strict mode, Anthropic strict tool use,
Gemini's OpenAPI subset.

Each converter returns the converted schema and *notes* on what it had to drop
or cannot express; the exporters use the schema, ``compatibility`` turns the
notes into findings. A strict converter returns None when a schema cannot be
made strict without loss, and the exporter then sends it non-strict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from agenthost._authoring.schema import (
    MAX_INLINED,
    admits_null,
    recursive_definitions,
    ref_name,
)

__all__ = ["GEMINI_KEYWORDS", "Note", "anthropic_strict_schema", "gemini_schema", "strict_schema"]

JsonSchema = dict[str, Any]
Note = tuple[Literal["error", "warning", "info"], str]


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
    walk = _OpenAIStrict()
    result = walk.node(schema, 1, "$")
    if walk.properties > STRICT_MAX_PROPERTIES:
        walk.reasons.append(f"more than {STRICT_MAX_PROPERTIES} properties in total")
    if walk.enum_values > STRICT_MAX_ENUM_VALUES:
        walk.reasons.append(f"more than {STRICT_MAX_ENUM_VALUES} enum values in total")
    return (None, _not_strict(walk.reasons)) if walk.reasons else (result, [])


class _OpenAIStrict:
    """One walk over a schema: the converted nodes, and the totals OpenAI limits."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.properties = 0
        self.enum_values = 0

    def node(self, node: Mapping[str, Any], depth: int, path: str) -> JsonSchema:
        node = _merge_single_all_of(node, path, self.reasons)
        out: JsonSchema = {}
        for key, value in node.items():
            if key == "oneOf":
                key = "anyOf"
            if key in _ANNOTATIONS or (key == "format" and value not in _STRICT_FORMATS):
                continue
            if key not in _STRICT_KEYWORDS:
                self.reasons.append(f"{path}: keyword '{key}' is not supported in strict mode")
                continue
            out[key] = value
        if not out.keys() - {"description"}:
            self.reasons.append(f"{path}: a value of any type cannot be strict")
        if "properties" in out or out.get("type") == "object":
            self.object(out, depth, path)
        if isinstance(out.get("items"), Mapping):
            out["items"] = self.node(out["items"], depth, f"{path}[]")
        if "anyOf" in out:
            out["anyOf"] = [self.node(v, depth, path) for v in out["anyOf"]]
        if "$defs" in out:
            out["$defs"] = {k: self.node(v, depth, f"$defs.{k}") for k, v in out["$defs"].items()}
        self.enum_values += len(out.get("enum", ()))
        return out

    def object(self, out: JsonSchema, depth: int, path: str) -> None:
        """Every property required (optional ones nullable), nothing else allowed."""
        if out.get("additionalProperties") not in (None, False):
            self.reasons.append(f"{path}: an object with free-form keys (a dict) cannot be strict")
        if depth > STRICT_MAX_DEPTH:
            self.reasons.append(f"{path}: nested deeper than {STRICT_MAX_DEPTH} levels")
        properties = out.get("properties") or {}
        self.properties += len(properties)
        required = set(out.get("required") or ())
        converted = {}
        for name, sub in properties.items():
            strict_sub = self.node(sub, depth + 1, f"{path}.{name}")
            if name not in required and not admits_null(strict_sub):
                strict_sub = _nullable(strict_sub)
            converted[name] = strict_sub
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False


def _not_strict(reasons: list[str]) -> list[Note]:
    return [("info", "strict mode not possible: " + r) for r in dict.fromkeys(reasons)]


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
    return (None, _not_strict(reasons)) if reasons else (result, [])


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
    walk = _GeminiSubset(schema.get("$defs") or {})
    return walk.node(schema, "$", frozenset()), walk.notes


class _GeminiSubset:
    """One walk over a schema: ``$ref``s inlined (recursion cut), keywords translated."""

    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self.notes: list[Note] = []
        self._noted: set[Note] = set()
        self._cut: set[str] = set()  # recursive models met
        self.budget = MAX_INLINED  # nodes to make: definitions that refer to each other
        # are inlined along every path through them, which grows like a factorial

    def note(self, severity: Literal["error", "warning"], message: str) -> None:
        if (severity, message) not in self._noted:
            self._noted.add((severity, message))
            self.notes.append((severity, message))

    def node(self, node: Mapping[str, Any], path: str, expanding: frozenset[str]) -> JsonSchema:
        self.budget -= 1
        node, nullable = _gemini_unnull(node)
        name = ref_name(node.get("$ref"))
        if name is not None:
            out = self.ref(name, node, path, expanding)
        else:
            out = {}
            for key, value in node.items():
                self.keyword(out, key, value, path, expanding)
            _gemini_enum(out, path, self.note)
            if "type" not in out and "anyOf" not in out and "enum" not in out:
                self.note("warning", f"{path}: a value of any type has no Gemini type")
        if nullable:
            out["nullable"] = True
        return out

    def ref(
        self, name: str, node: Mapping[str, Any], path: str, expanding: frozenset[str]
    ) -> JsonSchema:
        """The definition ``name`` inlined, with the referring node's own keywords on top."""
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if name in expanding or name not in self.defs:
            if name not in self._cut:  # said once, where it is first met
                self._cut.add(name)
                self.note(
                    "error", f"{path}: recursive model '{name}' is not supported; cut to an object"
                )
            return {"type": "OBJECT", **_gemini_plain(siblings)}
        if self.budget <= 0:
            self.note(
                "error",
                f"the schema's definitions grow past {MAX_INLINED:,} nodes once inlined "
                f"(Gemini takes no $ref); '{name}' and what follows are cut to objects",
            )
            return {"type": "OBJECT", **_gemini_plain(siblings)}
        return self.node({**self.defs[name], **siblings}, path, expanding | {name})

    def keyword(
        self, out: JsonSchema, key: str, value: Any, path: str, expanding: frozenset[str]
    ) -> None:
        """Put one keyword of a node into ``out`` in Gemini's terms, or note that it is lost."""
        if key == "properties":
            out[key] = {k: self.node(v, f"{path}.{k}", expanding) for k, v in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = self.node(value, f"{path}[]", expanding)
        elif key in ("anyOf", "oneOf"):
            out["anyOf"] = [self.node(v, path, expanding) for v in value]
        elif key == "prefixItems":
            self.note("warning", f"{path}: tuple item types are merged (no prefixItems)")
            out["items"] = {"anyOf": [self.node(v, f"{path}[]", expanding) for v in value]}
        elif key == "additionalProperties":
            if value not in (False, None):
                self.note("error", f"{path}: objects with free-form keys (dict) are not supported")
        elif key == "const":
            out["enum"] = [value]
        elif key == "type":
            out[key] = str(value).upper()
        elif key == "format":
            if value in _GEMINI_FORMATS:
                out[key] = value
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            self.note("warning", f"{path}: '{key}' becomes an inclusive bound")
            out[key.replace("exclusiveM", "m")] = value
        elif key in GEMINI_KEYWORDS:
            out[key] = value
        elif key not in _SILENT_DROPS and key != "$defs":
            self.note("warning", f"{path}: keyword '{key}' is not supported and is dropped")


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
