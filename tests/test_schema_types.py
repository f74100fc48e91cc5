"""Signatures to JSON Schema: every supported type, defaults, descriptions and tool kinds."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field
from typezoo import ZOO, Address, Color, Person, Point, Tree, function_with

from agenthost import InvalidArgumentsError, ToolContext, ToolDefinition, tool


def define(fn: Any) -> ToolDefinition:
    return ToolDefinition.from_function(fn)


@pytest.mark.parametrize("key", list(ZOO))
def test_each_supported_type_has_its_schema(key: str) -> None:
    annotation, expected, _, _ = ZOO[key]
    schema = define(tool(function_with(annotation))).input_schema
    assert schema == {
        "type": "object",
        "properties": {"x": expected},
        "required": ["x"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("key", list(ZOO))
def test_each_supported_type_validates_what_its_schema_says(key: str) -> None:
    annotation, _, valid, invalid = ZOO[key]
    definition = define(tool(function_with(annotation)))
    for value in valid:
        definition.validate({"x": value})
    for value in invalid:
        with pytest.raises(InvalidArgumentsError):
            definition.validate({"x": value})


def test_validated_values_have_the_python_types_the_function_declares() -> None:
    @tool
    def convert(color: Color, point: Point, person: Person, items: set[int]) -> None:
        """Convert."""

    args = define(convert).validate(
        '{"color": "red", "point": {"x": 1}, "items": [1, 1, 2],'
        ' "person": {"name": "n", "address": {"street": "s", "city": "c"}}}'
    )
    assert args["color"] is Color.RED
    assert args["point"] == Point(1, 0)
    assert isinstance(args["person"], Person)
    assert args["person"].address.city == "c"
    assert args["items"] == {1, 2}


def test_defaults_are_in_the_schema_and_not_required() -> None:
    @tool
    def search(
        query: str, limit: int = 10, color: Color = Color.RED, unit: Literal["c", "f"] = "c"
    ) -> None:
        """Search."""

    schema = define(search).input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"] == {"type": "integer", "default": 10}
    assert schema["properties"]["color"]["default"] == "red"
    assert schema["properties"]["unit"] == {"enum": ["c", "f"], "type": "string", "default": "c"}
    assert define(search).validate('{"query": "q"}') == {
        "query": "q",
        "limit": 10,
        "color": Color.RED,
        "unit": "c",
    }


def test_optional_with_none_default_is_nullable_and_optional() -> None:
    @tool
    def find(name: str | None = None) -> None:
        """Find."""

    schema = define(find).input_schema
    assert schema["properties"]["name"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }
    assert "required" not in schema


def test_recursive_models_stay_as_refs_and_everything_else_is_inlined() -> None:
    @tool
    def grow(tree: Tree, owner: Person) -> None:
        """Grow a tree."""

    schema = define(grow).input_schema
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    assert set(schema["$defs"]) == {"Tree"}
    assert schema["$defs"]["Tree"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert "$ref" not in str(schema["properties"]["owner"])
    assert "title" not in str(schema)


def test_tool_without_parameters_still_has_properties() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    definition = define(ping)
    assert definition.input_schema == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert definition.validate("") == {}
    assert definition.validate(None) == {}


def test_tool_context_is_injected_never_published() -> None:
    @tool
    def who(name: str, ctx: ToolContext) -> str:
        """Who."""
        return name

    @tool
    def who_maybe(name: str, context: ToolContext | None = None) -> str:
        """Who."""
        return name

    for fn, parameter in ((who, "ctx"), (who_maybe, "context")):
        definition = define(fn)
        assert definition.context_parameter == parameter
        assert list(definition.input_schema["properties"]) == ["name"]
        with pytest.raises(InvalidArgumentsError):
            definition.validate({"name": "n", parameter: {}})


def test_field_descriptions_and_constraints_are_kept() -> None:
    @tool
    def book(
        seats: Annotated[int, Field(description="How many seats", ge=1, le=9)],
        note: Annotated[str, Field(max_length=20)] = "",
    ) -> None:
        """Book."""

    schema = define(book).input_schema
    assert schema["properties"]["seats"] == {
        "type": "integer",
        "description": "How many seats",
        "minimum": 1,
        "maximum": 9,
    }
    assert schema["properties"]["note"]["maxLength"] == 20
    with pytest.raises(InvalidArgumentsError):
        define(book).validate({"seats": 10})


DOCSTRINGS = {
    "google": """Book a table.

        Args:
            city: The city,
                on two lines.
            guests (int): Number of guests.
        """,
    "numpy": """Book a table.

        Parameters
        ----------
        city : str
            The city,
            on two lines.
        guests : int
            Number of guests.
        """,
    "rest": """Book a table.

        :param city: The city,
            on two lines.
        :param guests: Number of guests.
        """,
}


@pytest.mark.parametrize("style", list(DOCSTRINGS))
def test_docstring_styles_give_summary_and_parameter_descriptions(style: str) -> None:
    def book(city: str, guests: int = 2) -> None:
        pass

    book.__doc__ = DOCSTRINGS[style]
    definition = define(tool(book))
    assert definition.description == "Book a table."
    properties = definition.input_schema["properties"]
    assert properties["city"]["description"] == "The city, on two lines."
    assert properties["guests"]["description"] == "Number of guests."


def test_summary_spanning_two_lines_is_one_sentence() -> None:
    @tool
    def slow() -> None:
        """Wait for a long
        time before answering.

        More details that are not the summary.
        """

    assert define(slow).description == "Wait for a long time before answering."


def test_agreeing_field_and_docstring_descriptions_are_fine() -> None:
    @tool
    def same(city: Annotated[str, Field(description="The city")]) -> None:
        """Same.

        Args:
            city: The city
        """

    assert define(same).input_schema["properties"]["city"]["description"] == "The city"


def test_options_override_name_and_description() -> None:
    @tool(name="get_weather", description="Weather now.", title="Weather")
    def weather(city: str) -> None:
        """Docstring summary."""

    definition = define(weather)
    assert (definition.name, definition.description, definition.title) == (
        "get_weather",
        "Weather now.",
        "Weather",
    )


def test_decorated_function_is_returned_unchanged_and_still_callable() -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert tool(add) is add
    assert add(1, 2) == 3

    async def fetch(url: str) -> str:
        """Fetch."""
        return url

    decorated = tool(timeout=3)(fetch)
    assert decorated is fetch
    assert inspect.iscoroutinefunction(decorated)
    assert asyncio.run(decorated("u")) == "u"


def test_all_four_kinds_of_function_are_tools() -> None:
    @tool
    def sync(x: int) -> int:
        """Sync."""
        return x

    @tool
    async def coroutine(x: int) -> int:
        """Async."""
        return x

    @tool
    def generator(x: int) -> Iterator[str]:
        """Generator."""
        yield str(x)

    @tool
    async def async_generator(x: int) -> AsyncIterator[str]:
        """Async generator."""
        yield str(x)

    kinds = [define(fn).kind for fn in (sync, coroutine, generator, async_generator)]
    assert kinds == ["sync", "async", "generator", "async_generator"]
    assert define(generator).output_schema is None


def test_methods_partials_and_callable_objects_can_be_defined() -> None:
    import functools

    class Greeter:
        def __init__(self, greeting: str) -> None:
            self.greeting = greeting

        def greet(self, name: str) -> str:
            """Greet someone."""
            return f"{self.greeting} {name}"

        def __call__(self, name: str, loud: bool = False) -> str:
            """Greet loudly or not."""
            return name.upper() if loud else name

    def scale(factor: int, value: int) -> int:
        """Scale a value."""
        return factor * value

    method = define(Greeter("hi").greet)
    assert list(method.input_schema["properties"]) == ["name"]
    callable_object = ToolDefinition.from_function(Greeter("hi"), name="greeter")
    assert list(callable_object.input_schema["properties"]) == ["name", "loud"]
    partial = ToolDefinition.from_function(functools.partial(scale, 3), name="triple")
    assert list(partial.input_schema["properties"]) == ["value"]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (int, {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (list[str], {"type": "object", "properties": {"result": {"type": "array", "items": {"type": "string"}}},
                     "required": ["result"]}),
        (None, None),
    ],
)  # fmt: skip
def test_return_annotation_gives_the_output_schema(annotation: Any, expected: Any) -> None:
    def fn() -> None:
        """Return something."""

    fn.__annotations__ = {"return": annotation}
    assert define(tool(fn)).output_schema == expected


def test_output_schema_of_a_model_is_the_model() -> None:
    @tool
    def locate() -> Address:
        """Locate."""
        return Address(street="s", city="c")

    schema = define(locate).output_schema
    assert schema is not None
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"street", "city"}


def test_hand_written_schema_uses_jsonschema_validation() -> None:
    @tool(
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 2}},
            "required": ["query"],
            "additionalProperties": False,
        }
    )
    def search(**kwargs: Any) -> Any:
        """Search."""
        return kwargs

    definition = define(search)
    assert definition.validate('{"query": "ab"}') == {"query": "ab"}
    with pytest.raises(InvalidArgumentsError) as caught:
        definition.validate('{"query": "a", "extra": 1}')
    assert [p.path for p in caught.value.problems] == ["$", "$.query"]


def test_definition_only_tool_from_a_schema() -> None:
    definition = ToolDefinition.from_schema(
        "confirm_purchase",
        {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
        description="Ask the user to confirm a purchase.",
    )
    assert definition.definition_only
    assert definition.function is None
    assert definition.validate({"amount": 3}) == {"amount": 3}
    with pytest.raises(InvalidArgumentsError):
        definition.validate({})


def test_fingerprint_changes_only_when_the_published_definition_changes() -> None:
    def make(doc: str) -> ToolDefinition:
        def add(a: int, b: int) -> int:
            return a + b

        add.__doc__ = doc
        return define(tool(add))

    assert make("Add.").fingerprint == make("Add.").fingerprint
    assert make("Add.").fingerprint != make("Add two numbers.").fingerprint
