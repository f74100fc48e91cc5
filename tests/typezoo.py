"""Parameter types of DESIGN.md section 3, shared by the schema, exporter and property tests."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import uuid
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict

from agenthost._authoring.formats import DECIMAL_PATTERN


class Color(enum.Enum):
    """A primary colour."""

    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = Field(description="City name")


class Person(BaseModel):
    name: str
    address: Address
    tags: list[str] = []


class Reading(BaseModel):
    """Numbers as choices: JSON tells true from 1, pydantic on its own does not."""

    level: Level
    scale: Literal[1, 10] = 1


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Options(TypedDict):
    verbose: bool
    depth: NotRequired[int]


class Tree(BaseModel):
    """A recursive model."""

    value: int
    children: list[Tree] = []


def function_with(annotation: Any, default: Any = dataclasses.MISSING) -> Any:
    """A tool function with one parameter ``x`` of type ``annotation``."""

    def fn(x):  # type: ignore[no-untyped-def]
        return x

    fn.__annotations__ = {"x": annotation}
    if default is not dataclasses.MISSING:
        fn.__defaults__ = (default,)
    fn.__doc__ = "A tool with one parameter."
    fn.__name__ = fn.__qualname__ = "one_parameter"
    return fn


# (annotation, expected property schema, valid JSON values, invalid JSON values)
ZOO: dict[str, tuple[Any, dict[str, Any], list[Any], list[Any]]] = {
    "str": (str, {"type": "string"}, ["", "a"], [1, None, True, []]),
    "int": (int, {"type": "integer"}, [0, -3, 2.0, 10**20], ["1", 1.5, True, None]),
    "float": (float, {"type": "number"}, [1, 1.5, -0.0], ["1.5", True, None]),
    "bool": (bool, {"type": "boolean"}, [True, False], [1, "true", None]),
    "none": (None, {"type": "null"}, [None], [0, "", False]),
    "literal": (
        Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}, ["a", "b"], ["c", 1, None]
    ),
    "literal_int": (Literal[1, 2], {"enum": [1, 2], "type": "integer"}, [1, 2], [3, "1"]),
    "enum": (
        Color,
        {"description": "A primary colour.", "enum": ["red", "green"], "type": "string"},
        ["red", "green"],
        ["RED", "blue", 1],
    ),
    "int_enum": (Level, {"enum": [1, 2], "type": "integer"}, [1, 2], [3, "1", "LOW"]),
    "optional": (
        Optional[int],  # noqa: UP045 - the spelling under test
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        [1, None],
        ["1", 1.5],
    ),
    "union": (
        Union[int, str],  # noqa: UP007 - the spelling under test
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        [1, "a"],
        [None, 1.5, []],
    ),
    "pep604": (
        int | None,
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        [1, None],
        ["x"],
    ),
    "list": (list[int], {"type": "array", "items": {"type": "integer"}}, [[], [1, 2]], [[1, "a"], {}, "1"]),
    "tuple": (
        tuple[int, str],
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
         "minItems": 2, "maxItems": 2},
        [[1, "a"]],
        [[1], [1, "a", 2], ["a", 1]],
    ),
    "tuple_var": (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}, [[], [1, 2, 3]], [["a"]]),
    "set": (set[str], {"type": "array", "items": {"type": "string"}}, [[], ["a", "a"]], [[1], "a"]),
    "dict": (
        dict[str, int],
        {"type": "object", "additionalProperties": {"type": "integer"}},
        [{}, {"a": 1}],
        [{"a": "1"}, [], "x"],
    ),
    "typed_dict": (
        Options,
        {"type": "object", "properties": {"verbose": {"type": "boolean"}, "depth": {"type": "integer"}},
         "required": ["verbose"]},
        [{"verbose": True}, {"verbose": False, "depth": 2}],
        [{}, {"verbose": 1}, {"verbose": True, "depth": "2"}],
    ),
    "dataclass": (
        Point,
        {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
         "required": ["x"]},
        [{"x": 1}, {"x": 1, "y": 2}],
        [{}, {"x": "1"}, [1, 2]],
    ),
    "model": (
        Person,
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "address": {
                    "description": "A postal address.",
                    "type": "object",
                    "properties": {
                        "street": {"type": "string"},
                        "city": {"type": "string", "description": "City name"},
                    },
                    "required": ["street", "city"],
                },
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            },
            "required": ["name", "address"],
        },
        [{"name": "a", "address": {"street": "s", "city": "c"}}],
        [{"name": "a"}, {"name": "a", "address": {"street": "s"}}],
    ),
    "datetime": (
        datetime.datetime,
        {"type": "string", "format": "date-time"},
        ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00+02:00"],
        ["yesterday", 1714564800],
    ),
    "date": (datetime.date, {"type": "string", "format": "date"}, ["2024-05-01"], ["May 1st", 20240501]),
    "uuid": (
        uuid.UUID,
        {"type": "string", "format": "uuid"},
        ["12345678-1234-5678-1234-567812345678"],
        ["not-a-uuid", 5],
    ),
    "path": (pathlib.Path, {"type": "string", "format": "path"}, ["/tmp/x", "rel/y"], [1, None]),
    "decimal": (
        decimal.Decimal,
        {"anyOf": [{"type": "number"}, {"type": "string", "pattern": DECIMAL_PATTERN}]},
        [1.5, "1.50", 2],
        ["abc", None, True],
    ),
    "any": (Any, {}, [1, "a", None, [1], {"a": 1}], []),
    "list_any": (list[Any], {"type": "array", "items": {}}, [[], [1, "a"]], [{}, "x"]),
}  # fmt: skip
