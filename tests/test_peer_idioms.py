"""What every peer accepts, agenthost accepts: pydantic's own idioms and common docstrings.

The shapes come from the MCP SDK's, FastMCP's, OpenAI Agents', pydantic-ai's and
LangChain's documented tool declarations.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from helpers import write
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agenthost import PluginHost, ToolDefinition, ToolDefinitionError, thaw, tool

Host = Callable[..., PluginHost]


def schema_of(fn: Callable[..., Any]) -> dict[str, Any]:
    return thaw(ToolDefinition.from_function(tool(fn)).input_schema)  # type: ignore[no-any-return]


# --- Field(...) as the default ------------------------------------------------------------------


def greet_field_default(
    name: str = Field(description="Who to greet"),
    title: str = Field(description="Mr, Ms, Dr", default=""),
    times: int = Field(default=1, ge=1, le=10, description="How often"),
    score: int = Field(..., gt=10, le=100),
    tags: list[str] = Field(default_factory=list, description="Tags"),  # noqa: B008
) -> str:
    """Greet someone."""
    return " ".join([f"{title} {name}".strip()] * times) + f" {score} {tags}"


def greet_annotated(
    name: Annotated[str, Field(description="Who to greet")],
    score: Annotated[int, Field(gt=10, le=100)],
    title: Annotated[str, Field(description="Mr, Ms, Dr")] = "",
    times: Annotated[int, Field(ge=1, le=10, description="How often")] = 1,
) -> str:
    """Greet someone."""
    return ""


def test_a_field_default_is_read_exactly_as_annotated_field() -> None:
    schema = schema_of(greet_field_default)
    expected = schema_of(greet_annotated)
    assert schema["required"] == ["name", "score"]
    assert schema["properties"]["name"] == {"type": "string", "description": "Who to greet"}
    assert schema["properties"]["times"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "description": "How often",
        "default": 1,
    }
    assert schema["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Tags",
    }
    for name in ("name", "title", "times", "score"):
        assert schema["properties"][name] == expected["properties"][name]


def test_a_field_default_is_used_when_the_argument_is_missing(make_host: Host) -> None:
    host = make_host(None).start()
    host.register(tool(timeout=False)(greet_field_default))
    result = host.execute("greet_field_default", {"name": "Ann", "score": 50})
    assert (result.success, result.output) == (True, "Ann 50 []")
    result = host.execute(
        "greet_field_default", {"name": "Ann", "score": 50, "times": 2, "title": "Dr"}
    )
    assert result.output == "Dr Ann Dr Ann 50 []"
    refused = host.execute("greet_field_default", {"name": "Ann", "score": 5})
    assert refused.error is not None
    assert refused.error.code == "invalid_arguments"
    assert refused.error.details["errors"][0]["path"] == "$.score"
    missing = host.execute("greet_field_default", {"score": 50})
    assert missing.error is not None
    assert missing.error.details["errors"][0]["path"] == "$.name"


# --- Annotated[T, "text"] and attribute docstrings ----------------------------------------------


def test_annotated_text_is_the_parameter_description() -> None:
    def weather(
        city: Annotated[str, "The city name"],
        days: Annotated[int, "How many days", Field(ge=1)] = 1,
    ) -> str:
        """Weather."""
        return city

    properties = schema_of(weather)["properties"]
    assert properties["city"] == {"type": "string", "description": "The city name"}
    assert properties["days"] == {
        "type": "integer",
        "minimum": 1,
        "description": "How many days",
        "default": 1,
    }


class Location(TypedDict):
    lat: float
    """Latitude in degrees."""
    lon: float
    """Longitude in degrees."""


@dataclasses.dataclass
class Box:
    width: int
    """Width in pixels."""
    height: int = 0


class Query(BaseModel):
    text: str
    """What to search for."""
    limit: int = Field(10, description="Set by Field, which wins")
    """Not this."""
    box: Box | None = None


def test_attribute_docstrings_describe_properties() -> None:
    def search(where: Location, query: Query) -> str:
        """Search near a place."""
        return ""

    properties = schema_of(search)["properties"]
    assert properties["where"]["properties"] == {
        "lat": {"type": "number", "description": "Latitude in degrees."},
        "lon": {"type": "number", "description": "Longitude in degrees."},
    }
    query = properties["query"]["properties"]
    assert query["text"] == {"type": "string", "description": "What to search for."}
    assert query["limit"]["description"] == "Set by Field, which wins"
    box = query["box"]["anyOf"][0]["properties"]
    assert box["width"] == {"type": "integer", "description": "Width in pixels."}
    assert "description" not in box["height"]


# --- warnings instead of refusals ---------------------------------------------------------------


class Opaque:
    """Not a JSON type."""


def test_an_undescribable_return_loads_without_output_schema_and_warns() -> None:
    def lookup(key: str) -> Opaque:
        """Look up."""
        return Opaque()

    definition = ToolDefinition.from_function(tool(lookup))
    assert definition.output_schema is None
    assert definition.warnings == (
        "the return annotation cannot be described as JSON (type Opaque is a plain class that "
        "cannot be read from JSON); the tool has no output schema",
    )


def test_a_docstring_made_only_of_an_args_section_parses() -> None:
    def simple(a: int, b: int = 5) -> int:
        """
        Args:
            a: The first argument
            b: The second argument

        Returns:
            The sum of a and b
        """
        return a + b

    definition = ToolDefinition.from_function(tool(simple))
    assert definition.input_schema["properties"]["a"]["description"] == "The first argument"
    assert definition.input_schema["properties"]["b"]["description"] == "The second argument"
    assert definition.description == ""
    assert definition.warnings == ()

    def only_args(x: int) -> int:
        """Args:
        x: The value.
        """
        return x

    described = ToolDefinition.from_function(tool(only_args))
    assert described.input_schema["properties"]["x"]["description"] == "The value."


def test_a_docstring_documenting_a_missing_parameter_is_a_warning() -> None:
    def weather(city: str) -> str:
        """Weather.

        Args:
            city: The city.
            country: The country.
        """
        return city

    definition = ToolDefinition.from_function(tool(weather))
    assert definition.input_schema["properties"]["city"]["description"] == "The city."
    assert definition.warnings == (
        "the docstring documents a parameter 'country' that the function does not have; "
        "rename or remove it",
    )


def test_two_different_descriptions_warn_and_the_annotation_wins() -> None:
    def weather(city: Annotated[str, Field(description="City name")]) -> str:
        """Weather.

        Args:
            city: The town.
        """
        return city

    definition = ToolDefinition.from_function(tool(weather))
    assert definition.input_schema["properties"]["city"]["description"] == "City name"
    assert definition.warnings == (
        "parameter 'city': two different descriptions, 'City name' in the annotation and "
        "'The town.' in the docstring; the annotation's is used",
    )


def test_plugin_warnings_name_the_tool_and_its_place(plugin_dir: Path, make_host: Host) -> None:
    write(
        plugin_dir / "lookup.py",
        '''
        from agenthost import tool

        class Opaque:
            pass

        @tool
        def lookup(key: str) -> Opaque:
            """Look up.

            Args:
                key: The key.
                ghost: Not a parameter.
            """
            return Opaque()
        ''',
    )
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert (plugin.status, plugin.tools, plugin.problems) == ("loaded", ("lookup",), ())
    where = f"tool 'lookup' at {plugin_dir / 'lookup.py'}:6"
    assert plugin.warnings == (
        f"{where}: the docstring documents a parameter 'ghost' that the function does not have; "
        "rename or remove it",
        f"{where}: the return annotation cannot be described as JSON (type Opaque is a plain "
        "class that cannot be read from JSON); the tool has no output schema",
    )
    assert host.execute("lookup", {"key": "k"}).success


# --- still refused, with the fix ----------------------------------------------------------------


def test_star_args_star_kwargs_and_positional_only_are_still_refused_with_the_fix() -> None:
    def star(*items: str, **options: str) -> None:
        """Star."""

    def positional(city: str, /) -> None:
        """Positional."""

    with pytest.raises(ToolDefinitionError) as caught:
        ToolDefinition.from_function(tool(star))
    text = str(caught.value)
    assert "use `items: list[...]`" in text
    assert "declare each argument, or give the whole schema with @tool(input_schema=...)" in text
    with pytest.raises(ToolDefinitionError, match="remove the '/' marker"):
        ToolDefinition.from_function(tool(positional))


def test_every_idiom_here_exports_for_every_provider() -> None:
    from agenthost import FORMATS, export_tool

    for fn in (greet_field_default, greet_annotated):
        definition = ToolDefinition.from_function(tool(fn))
        for fmt in FORMATS:
            json.dumps(export_tool(definition, fmt))
