"""Provider formats: exact shapes, each provider's documented rules, strict mode and caching."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from provider_rules import (
    ANTHROPIC_KEYS,
    ANTHROPIC_NAME,
    OPENAI_NAME,
    gemini_violations,
    mcp_violations,
    openai_violations,
)
from pydantic import Field
from typezoo import ZOO, Tree, function_with

from agenthost import (
    FORMATS,
    ToolContext,
    ToolDefinition,
    check_compatibility,
    export_tool,
    export_tools,
    thaw,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai,
    to_openai_responses,
    tool,
)


@tool(name="get_weather", permissions={"http.get"}, timeout=10, read_only=True)
async def weather(
    city: Annotated[str, Field(description="City name, e.g. Beijing")],
    unit: Literal["celsius", "fahrenheit"] = "celsius",
    ctx: ToolContext | None = None,
) -> dict[str, float]:
    """Current weather for a city.

    Args:
        unit: Temperature unit.
    """
    return {}


WEATHER = ToolDefinition.from_function(weather)
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name, e.g. Beijing"},
        "unit": {
            "enum": ["celsius", "fahrenheit"],
            "type": "string",
            "description": "Temperature unit.",
            "default": "celsius",
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}
ZOO_TOOLS = {key: ToolDefinition.from_function(tool(function_with(ZOO[key][0]))) for key in ZOO}


def test_openai_chat_completions_shape() -> None:
    assert to_openai(WEATHER) == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": WEATHER_SCHEMA,
        },
    }


def test_openai_strict_mode_requires_everything_and_makes_optionals_nullable() -> None:
    assert to_openai(WEATHER, strict=True)["function"] == {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Beijing"},
                "unit": {
                    "anyOf": [
                        {"enum": ["celsius", "fahrenheit"], "type": "string"},
                        {"type": "null"},
                    ],
                    "description": "Temperature unit.",
                },
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
        "strict": True,
    }


def test_responses_format_is_flat_and_always_says_strict() -> None:
    assert to_openai_responses(WEATHER) == {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": WEATHER_SCHEMA,
        "strict": False,
        "output_schema": {"type": "object", "additionalProperties": {"type": "number"}},
    }
    assert to_openai_responses(WEATHER, strict=True)["strict"] is True


def test_anthropic_shape() -> None:
    assert to_anthropic(WEATHER) == {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": WEATHER_SCHEMA,
    }


def test_gemini_shape_uses_the_openapi_subset() -> None:
    assert to_gemini(WEATHER) == {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "city": {"type": "STRING", "description": "City name, e.g. Beijing"},
                "unit": {
                    "enum": ["celsius", "fahrenheit"],
                    "type": "STRING",
                    "description": "Temperature unit.",
                    "default": "celsius",
                },
            },
            "required": ["city"],
        },
        "response": {"type": "OBJECT"},  # dict[str, float]: keys Gemini's subset cannot name
    }
    assert to_gemini(WEATHER, json_schema=True)["parametersJsonSchema"] == WEATHER_SCHEMA


def test_mcp_shape_with_output_schema_and_annotations() -> None:
    assert to_mcp(WEATHER) == {
        "name": "get_weather",
        "title": "Get weather",
        "description": "Current weather for a city.",
        "inputSchema": WEATHER_SCHEMA,
        "outputSchema": {"type": "object", "additionalProperties": {"type": "number"}},
        "annotations": {"title": "Get weather", "readOnlyHint": True},
    }


@pytest.mark.parametrize("key", list(ZOO))
@pytest.mark.parametrize("strict", [False, True])
def test_every_type_follows_openai_rules(key: str, strict: bool) -> None:
    for exported in (to_openai(ZOO_TOOLS[key], strict=strict)["function"],
                     to_openai_responses(ZOO_TOOLS[key], strict=strict)):  # fmt: skip
        assert OPENAI_NAME.match(exported["name"])
        assert openai_violations(exported["parameters"], exported.get("strict", False)) == []
        jsonschema.Draft202012Validator.check_schema(exported["parameters"])


STRICTABLE = set(ZOO) - {"tuple", "dict", "any", "list_any"}


@pytest.mark.parametrize("key", list(ZOO))
def test_strict_falls_back_only_when_the_schema_would_lose_something(key: str) -> None:
    exported = to_openai_responses(ZOO_TOOLS[key], strict=True)
    assert exported["strict"] is (key in STRICTABLE)
    if not exported["strict"]:
        assert exported["parameters"] == ZOO_TOOLS[key].input_schema


@pytest.mark.parametrize("key", list(ZOO))
def test_every_type_follows_anthropic_rules(key: str) -> None:
    exported = to_anthropic(ZOO_TOOLS[key])
    assert set(exported) <= ANTHROPIC_KEYS
    assert ANTHROPIC_NAME.match(exported["name"])
    assert exported["input_schema"]["type"] == "object"
    jsonschema.Draft202012Validator.check_schema(exported["input_schema"])


@pytest.mark.parametrize("key", list(ZOO))
def test_every_type_follows_gemini_rules(key: str) -> None:
    assert gemini_violations(to_gemini(ZOO_TOOLS[key])) == []
    schema = to_gemini(ZOO_TOOLS[key], json_schema=True)["parametersJsonSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("key", list(ZOO))
def test_every_type_follows_mcp_rules(key: str) -> None:
    exported = to_mcp(ZOO_TOOLS[key])
    assert mcp_violations(exported) == []
    jsonschema.Draft202012Validator.check_schema(exported["inputSchema"])


def test_gemini_folds_null_into_nullable_and_drops_what_it_cannot_express() -> None:
    @tool
    def shape(
        size: int | None = None, level: Literal[1, 2] = 1, counts: dict[str, int] | None = None
    ) -> None:
        """Shape."""

    properties = to_gemini(ToolDefinition.from_function(shape))["parameters"]["properties"]
    assert properties["size"] == {"type": "INTEGER", "nullable": True, "default": None}
    assert properties["level"] == {
        "type": "INTEGER",
        "default": 1,
        "description": "Allowed values: 1, 2.",
    }
    assert properties["counts"] == {"type": "OBJECT", "nullable": True, "default": None}


def test_gemini_cuts_recursion_instead_of_looping() -> None:
    @tool
    def grow(tree: Tree) -> None:
        """Grow."""

    parameters = to_gemini(ToolDefinition.from_function(grow))["parameters"]
    children = parameters["properties"]["tree"]["properties"]["children"]
    assert children["items"] == {"type": "OBJECT"}
    assert "$ref" not in json.dumps(parameters)


def test_gemini_omits_parameters_for_a_tool_without_any() -> None:
    @tool
    def ping() -> None:
        """Ping."""

    assert to_gemini(ToolDefinition.from_function(ping)) == {"name": "ping", "description": "Ping."}


def test_strict_mode_handles_nested_models_and_recursion() -> None:
    @tool
    def grow(tree: Tree, label: str = "") -> None:
        """Grow."""

    parameters = to_openai(ToolDefinition.from_function(grow), strict=True)["function"]
    assert parameters["strict"] is True
    tree = parameters["parameters"]["$defs"]["Tree"]
    assert tree["required"] == ["value", "children"]
    assert tree["additionalProperties"] is False
    assert tree["properties"]["children"]["anyOf"][1] == {"type": "null"}
    assert openai_violations(parameters["parameters"], strict=True) == []


def test_strict_mode_gives_up_on_keywords_openai_does_not_support() -> None:
    @tool
    def name(value: Annotated[str, Field(min_length=2)]) -> None:
        """Name."""

    exported = to_openai(ToolDefinition.from_function(name), strict=True)["function"]
    assert exported["strict"] is False
    assert exported["parameters"]["properties"]["value"] == {"type": "string", "minLength": 2}


def test_examples_are_checked_and_shown_to_the_model() -> None:
    @tool(examples=[{"city": "Paris"}, "Use it before planning a trip."])
    def forecast(city: str) -> None:
        """Forecast."""

    definition = ToolDefinition.from_function(forecast)
    expected = 'Forecast.\n\nExamples:\n- {"city": "Paris"}\n- Use it before planning a trip.'
    assert to_openai(definition)["function"]["description"] == expected
    # Anthropic takes argument examples in a field of their own:
    assert to_anthropic(definition)["description"] == (
        "Forecast.\n\nExamples:\n- Use it before planning a trip."
    )
    assert thaw(to_anthropic(definition)["input_examples"]) == [{"city": "Paris"}]
    assert definition.description == "Forecast."


def test_exports_are_cached_and_read_only() -> None:
    first = to_openai(WEATHER)
    assert to_openai(WEATHER) is first
    with pytest.raises(TypeError, match="read-only"):
        first["function"]["name"] = "hijacked"  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        first["function"]["parameters"]["required"].append("unit")
    assert to_openai(WEATHER)["function"]["name"] == "get_weather"
    mutable = copy.deepcopy(first)
    mutable["function"]["name"] = "mine"
    assert thaw(first) == to_openai(WEATHER)
    assert json.loads(json.dumps(first)) == thaw(first)


def test_export_tools_and_export_tool_cover_every_format() -> None:
    definitions = list(ZOO_TOOLS.values())
    for format in FORMATS:
        exported = export_tools(definitions, format)
        assert len(exported) == len(definitions)
        assert exported[0] is export_tool(definitions[0], format)
    with pytest.raises(ValueError, match="unknown format 'openai-chat'"):
        export_tool(WEATHER, "openai-chat")  # type: ignore[arg-type]


def test_mcp_title_defaults_to_a_readable_name_and_hints_map_to_annotations() -> None:
    @tool(destructive=True, idempotent=False, open_world=True)
    def delete_file(path: str) -> None:
        """Delete a file."""

    exported = to_mcp(ToolDefinition.from_function(delete_file))
    assert exported["title"] == "Delete file"
    assert exported["annotations"] == {
        "title": "Delete file",
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert "outputSchema" not in exported


def test_the_same_instance_is_not_shared_between_definitions() -> None:
    # Export caches live on each definition: a reload builds new ones.
    again = ToolDefinition.from_function(weather)
    assert to_openai(again) == to_openai(WEATHER)
    assert to_openai(again) is not to_openai(WEATHER)


def test_exported_schemas_keep_property_names_called_title() -> None:
    @tool
    def rename(title: str, description: str = "") -> None:
        """Rename a document."""

    schema: Any = to_openai(ToolDefinition.from_function(rename), strict=True)["function"]
    assert list(schema["parameters"]["properties"]) == ["title", "description"]


# --- schemas whose definitions multiply when inlined --------------------------------------------


def doubling(steps: int) -> dict[str, Any]:
    """Each definition refers to the next twice: inlined, 2**steps copies of the last."""
    defs: dict[str, Any] = {
        f"d{i}": {"type": "object", "properties": {
            "left": {"$ref": f"#/$defs/d{i + 1}"}, "right": {"$ref": f"#/$defs/d{i + 1}"}}}
        for i in range(steps)
    }  # fmt: skip
    defs[f"d{steps}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


def tangled(count: int) -> dict[str, Any]:
    """Every definition refers to every other: a path through each order of them."""
    names = [f"c{i}" for i in range(count)]
    defs = {
        a: {"type": "object", "properties": {b: {"$ref": f"#/$defs/{b}"} for b in names if b != a}}
        for a in names
    }
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/c0"}}, "$defs": defs}


def test_definitions_that_double_at_each_step_stay_definitions() -> None:
    definition = ToolDefinition.from_schema("doubling", doubling(18), description="Deep.")
    schema = thaw(definition.input_schema)
    assert "d17" in schema["$defs"]  # not 262,144 inlined copies
    assert len(json.dumps(schema)) < 10_000
    assert definition.validate({"x": {"left": {}, "right": {}}}) == {"x": {"left": {}, "right": {}}}
    for fmt in FORMATS:  # Gemini takes no $ref: inlined up to 20,000 nodes, then cut
        assert len(json.dumps(export_tool(definition, fmt))) < (
            2**21 if fmt == "gemini" else 50_000
        )


def test_definitions_that_all_refer_to_each_other_export_to_gemini_within_bounds() -> None:
    definition = ToolDefinition.from_schema("tangled", tangled(8), description="Tangled.")
    exported = to_gemini(definition)
    assert len(json.dumps(exported)) < 2_000_000
    errors = [
        f.message for f in check_compatibility(definition, ["gemini"]) if f.severity == "error"
    ]
    assert any("grow past 20,000 nodes once inlined" in m for m in errors)
    assert len(errors) < 20  # each recursive model is named once, not on every path to it
