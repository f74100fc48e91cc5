"""What each provider documents about tool definitions, written down as test data.

Each block names the page it comes from. The checkers are deliberately written
apart from the exporters: they are the specification the exporters are tested
against, not a copy of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# OpenAI, Function calling guide, "Defining functions"
# (platform.openai.com/docs/guides/function-calling): name is a-z, A-Z, 0-9,
# underscores and dashes, at most 64 characters; parameters is a JSON Schema object.
# Responses API reference, "tools" (platform.openai.com/docs/api-reference/responses/create):
# a function tool is {"type": "function", "name", "description", "parameters", "strict"},
# with "strict" required.
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# OpenAI, Structured Outputs guide, "Supported schemas"
# (platform.openai.com/docs/guides/structured-outputs#supported-schemas): types string,
# number, boolean, integer, object, array, enum, anyOf; the root is an object, not anyOf;
# every field is required (emulate optional with a union with null); additionalProperties
# must be false on every object; strings take pattern and format; numbers multipleOf,
# maximum, exclusiveMaximum, minimum, exclusiveMinimum; arrays minItems and maxItems;
# $defs / $ref (also recursive) are supported; up to 5000 properties and 10 levels.
OPENAI_STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const",
    "description", "pattern", "format", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "minItems", "maxItems", "$ref", "$defs",
}  # fmt: skip
OPENAI_STRICT_FORMATS = {
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
}  # fmt: skip

# Anthropic, Tool use, "Specifying client tools"
# (docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use): a tool is
# {"name", "description", "input_schema"}; name matches ^[a-zA-Z0-9_-]{1,64}$;
# input_schema is a JSON Schema whose root type is object.
ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ANTHROPIC_KEYS = {"name", "description", "input_schema"}
# anthropic 2.10 (SDK types, anthropic/types/tool_param.py): ToolParam also takes strict,
# input_examples (argument objects), defer_loading (tool search), cache_control
# ({"type": "ephemeral", "ttl"?: "5m" | "1h"}), allowed_callers, eager_input_streaming, type.
ANTHROPIC_TOOL_PARAM_KEYS = ANTHROPIC_KEYS | {
    "strict", "input_examples", "defer_loading", "cache_control", "allowed_callers",
    "eager_input_streaming", "type",
}  # fmt: skip
# Anthropic, "Structured outputs: JSON Schema limitations" (strict tool use): every object
# says additionalProperties: false; string formats from this list; minItems only 0 or 1;
# no numeric bounds, string lengths or patterns enforced; no recursive schemas.
ANTHROPIC_STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "allOf", "enum",
    "const", "description", "format", "minItems", "$ref", "$defs",
}  # fmt: skip
ANTHROPIC_STRICT_FORMATS = {
    "date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid",
}  # fmt: skip

# openai 3.5x (SDK types, openai/types/responses/function_tool_param.py): a Responses function
# tool is {type, name, parameters, strict} plus description, defer_loading, output_schema (the
# JSON value a string output encodes), allowed_callers.
RESPONSES_FUNCTION_KEYS = {
    "type", "name", "parameters", "strict", "description", "defer_loading", "output_schema",
    "allowed_callers",
}  # fmt: skip

# Gemini API reference, FunctionDeclaration and Schema
# (ai.google.dev/api/caching#FunctionDeclaration, ai.google.dev/api/caching#Schema): the
# name starts with a letter or underscore, then a-z, A-Z, 0-9, underscores, dots, colons
# and dashes, at most 128 (google-genai 3.3 FunctionDeclaration.name; it was 64 before);
# parameters is a Schema, a select subset of OpenAPI 3.0 with only
# the fields below; type is one of the Type enum; enum values are strings; parameter
# names start with a letter or underscore and contain a-z, A-Z, 0-9 and underscores.
GEMINI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$")
GEMINI_PARAMETER = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
GEMINI_SCHEMA_FIELDS = {
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
}  # fmt: skip
GEMINI_TYPES = {
    "TYPE_UNSPECIFIED",
    "STRING",
    "NUMBER",
    "INTEGER",
    "BOOLEAN",
    "ARRAY",
    "OBJECT",
    "NULL",
}
# google-genai 3.3 FunctionDeclaration: response / responseJsonSchema describe the function's
# response, each mutually exclusive with the other (as parameters / parametersJsonSchema are).
GEMINI_DECLARATION_KEYS = {
    "name", "description", "parameters", "parametersJsonSchema", "response", "responseJsonSchema",
}  # fmt: skip

# Model Context Protocol specification, Server features / Tools
# (modelcontextprotocol.io/specification/2025-06-18/server/tools, and 2025-11-25 for
# names): Tool is {name, title?, description?, inputSchema, outputSchema?, annotations?};
# inputSchema and outputSchema are JSON Schema objects with type "object"; annotations
# are {title?, readOnlyHint?, destructiveHint?, idempotentHint?, openWorldHint?};
# names are 1-128 characters of A-Z a-z 0-9 _ - . (SEP-986).
MCP_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
# 2025-11-25 adds icons: [{src, mimeType?, sizes?: [str], theme?: "light" | "dark"}].
MCP_KEYS = {
    "name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta", "icons",
}  # fmt: skip
MCP_ANNOTATIONS = {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}


def subschemas(
    schema: Mapping[str, Any], path: str = "$"
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node with a readable path (properties, items, anyOf, $defs)."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from subschemas(sub, f"{path}.{name}")
    for name, sub in (schema.get("$defs") or {}).items():
        yield from subschemas(sub, f"{path}.$defs.{name}")
    if isinstance(schema.get("items"), Mapping):
        yield from subschemas(schema["items"], f"{path}[]")
    for index, sub in enumerate(schema.get("anyOf") or ()):
        yield from subschemas(sub, f"{path}|{index}")


def openai_violations(parameters: Mapping[str, Any], strict: bool) -> list[str]:
    found = []
    if parameters.get("type") != "object" or "anyOf" in parameters:
        found.append("root must be an object")
    if not strict:
        return found
    for path, node in subschemas(parameters):
        for key in node:
            if key not in OPENAI_STRICT_KEYWORDS:
                found.append(f"{path}: keyword {key}")
        if "format" in node and node["format"] not in OPENAI_STRICT_FORMATS:
            found.append(f"{path}: format {node['format']}")
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                found.append(f"{path}: additionalProperties must be false")
            if set(node.get("required", ())) != set(node.get("properties", {})):
                found.append(f"{path}: every property must be required")
    return found


def gemini_violations(declaration: Mapping[str, Any]) -> list[str]:
    found = [f"key {k}" for k in declaration if k not in GEMINI_DECLARATION_KEYS]
    if not GEMINI_NAME.match(declaration["name"]):
        found.append("name")
    parameters = declaration.get("parameters")
    if parameters is None:
        return found
    for name in parameters.get("properties", {}):
        if not GEMINI_PARAMETER.match(name):
            found.append(f"parameter name {name}")
    for path, node in subschemas(parameters):
        for key in node:
            if key not in GEMINI_SCHEMA_FIELDS:
                found.append(f"{path}: field {key}")
        if "type" in node and node["type"] not in GEMINI_TYPES:
            found.append(f"{path}: type {node['type']}")
        if "enum" in node and not all(isinstance(v, str) for v in node["enum"]):
            found.append(f"{path}: enum values must be strings")
    return found


def mcp_violations(tool: Mapping[str, Any]) -> list[str]:
    found = [f"key {k}" for k in tool if k not in MCP_KEYS]
    if not MCP_NAME.match(tool["name"]):
        found.append("name")
    if tool["inputSchema"].get("type") != "object":
        found.append("inputSchema type")
    if "outputSchema" in tool and tool["outputSchema"].get("type") != "object":
        found.append("outputSchema type")
    found += [f"annotation {k}" for k in tool.get("annotations", {}) if k not in MCP_ANNOTATIONS]
    return found


def anthropic_strict_violations(schema: Mapping[str, Any]) -> list[str]:
    """What breaks Anthropic's strict tool use rules in ``schema``."""
    found = []
    for path, node in subschemas(schema):
        found += [f"{path}: keyword {k}" for k in node if k not in ANTHROPIC_STRICT_KEYWORDS]
        if node.get("type") == "object" and node.get("additionalProperties") is not False:
            found.append(f"{path}: object without additionalProperties: false")
        if "format" in node and node["format"] not in ANTHROPIC_STRICT_FORMATS:
            found.append(f"{path}: format {node['format']}")
        if node.get("minItems", 0) not in (0, 1):
            found.append(f"{path}: minItems {node['minItems']}")
    return found
