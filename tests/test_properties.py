"""Property tests: the validator accepts exactly what the published schema accepts.

The one documented difference: ``null`` for a property that has a default
means "use the default" (OpenAI strict mode can only express optional
properties as nullable), so the comparison drops such nulls first.
"""

from __future__ import annotations

import datetime
import decimal
import json
import pathlib
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from typezoo import Color, Level, Options, Person, Point, Reading

from agenthost import InvalidArgumentsError, ToolDefinition, thaw, tool
from agenthost._providers.dialects import strict_schema


def s_scalars(a: int, b: str = "x", ratio: float | None = None, flag: bool = False) -> None:
    """Scalars."""


def s_enums(unit: Literal["c", "f"], color: Color, level: Level = Level.LOW) -> None:
    """Enums."""


def s_containers(tags: list[str], counts: dict[str, int], items: set[int] = set()) -> None:  # noqa: B006
    """Containers."""


def s_union(value: int | str | list[int], nested: list[list[float]] | None = None) -> None:
    """A union."""


def s_models(
    point: Point,
    options: Options | None = None,
    person: Person | None = None,
    reading: Reading | None = None,
) -> None:
    """Models."""


def s_tuple(pair: tuple[int, str], rest: tuple[bool, ...] = ()) -> None:
    """Tuples."""


SIGNATURES: list[Callable[..., Any]] = [
    s_scalars,
    s_enums,
    s_containers,
    s_union,
    s_models,
    s_tuple,
]
DEFINITIONS = {fn.__name__: ToolDefinition.from_function(tool(fn)) for fn in SIGNATURES}


def accepts(definition: ToolDefinition, value: Any) -> bool:
    try:
        definition.validate(value)
    except InvalidArgumentsError:
        return False
    return True


def schema_accepts(schema: Mapping[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def without_defaulted_nulls(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with nulls removed where the schema has an optional (defaulted) property."""
    if isinstance(value, dict) and "properties" in schema:
        required = set(schema.get("required", ()))
        return {
            key: without_defaulted_nulls(schema["properties"].get(key, {}), item)
            for key, item in value.items()
            if not (item is None and key not in required and key in schema["properties"])
        }
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [without_defaulted_nulls(schema["items"], item) for item in value]
    for branch in schema.get("anyOf", ()):
        if isinstance(value, dict) and "properties" in branch:
            return without_defaulted_nulls(branch, value)
        if isinstance(value, list) and "items" in branch:
            return without_defaulted_nulls(branch, value)
    return value


def from_schema(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Instances of the schema subset our schemas use (a small stand-in for hypothesis-jsonschema)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([from_schema(branch) for branch in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        properties = schema["properties"]
        required = [k for k in properties if k in schema.get("required", ())]
        optional = [k for k in properties if k not in required]
        return st.fixed_dictionaries(
            {k: from_schema(properties[k]) for k in required},
            optional={k: from_schema(properties[k]) for k in optional},
        )
    if kind == "object":
        values = schema.get("additionalProperties")
        return st.dictionaries(st.text(max_size=3), from_schema(values or {}), max_size=3)
    if kind == "array" and "prefixItems" in schema:
        return st.tuples(*[from_schema(item) for item in schema["prefixItems"]]).map(list)
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=4)
    if kind == "string" and schema.get("format") in FORMAT_VALUES:
        return FORMAT_VALUES[schema["format"]]
    if kind == "string" and "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True)
    scalars: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=5),
        "integer": st.integers(min_value=-(2**63), max_value=2**63),
        "number": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-100, 100),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    return scalars[kind] if isinstance(kind, str) else JSON_VALUES


FORMAT_VALUES: dict[str, st.SearchStrategy[str]] = {
    "date-time": st.datetimes(timezones=st.just(datetime.timezone.utc)).map(
        lambda d: d.isoformat()
    ),
    "date": st.dates().map(lambda d: d.isoformat()),
    "time": st.times(timezones=st.just(datetime.timezone.utc)).map(lambda t: t.isoformat()),
    "uuid": st.uuids().map(str),
    "duration": st.from_regex(r"\AP([0-9]{1,3}Y)?([0-9]{1,3}M)?([0-9]{1,3}D)?T[0-9]{1,3}H\Z"),
    "path": st.text(max_size=5),
}
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "x", "c", "f", "red", "green", "1", "true"])
    | st.text(max_size=5)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["x", "y", "verbose", "depth", "name", "street", "city", "zz"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


def _slots(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) pair inside a JSON value."""
    found: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += [(value, key), *_slots(item)]
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += [(value, index), *_slots(item)]
    return found


def _look_alikes(old: Any) -> st.SearchStrategy[Any]:
    """Values that are almost ``old``: the boundary cases of strict JSON validation."""
    options: list[Any] = [None, str(old), [old], {"x": old}]
    if isinstance(old, bool):
        options += [int(old), str(old).lower()]
    elif isinstance(old, int):
        options += [float(old), old + 0.5, bool(old % 2)]
    elif isinstance(old, float):
        options += [int(old)] if old.is_integer() and abs(old) < 2**63 else [round(old)]
    return st.sampled_from(options) | JSON_SCALARS


@st.composite
def near_misses(draw: st.DrawFn, schema: Mapping[str, Any]) -> Any:
    """A valid instance with one value replaced by a look-alike, removed, or one key added."""
    value = draw(from_schema(schema))
    slots = _slots(value)
    action = draw(st.sampled_from(["replace", "remove", "add"] if slots else ["add"]))
    if action == "add":
        value[draw(st.sampled_from(["unexpected", *schema["properties"]]))] = draw(JSON_VALUES)
        return value
    container, key = draw(st.sampled_from(slots))
    if action == "remove" and isinstance(container, dict):
        del container[key]
    else:
        container[key] = draw(_look_alikes(container[key]))
    return value


def arguments_for(definition: ToolDefinition) -> st.SearchStrategy[dict[str, Any]]:
    names = [*definition.input_schema["properties"], "unexpected"]
    return st.dictionaries(st.sampled_from(names), JSON_VALUES, max_size=len(names))


@pytest.mark.parametrize("name", list(DEFINITIONS))
@given(data=st.data())
def test_every_instance_of_the_schema_is_accepted(name: str, data: st.DataObject) -> None:
    definition = DEFINITIONS[name]
    value = data.draw(from_schema(thaw(definition.input_schema)))
    assert accepts(definition, value), value
    assert accepts(definition, json.dumps(value))


@pytest.mark.parametrize("name", list(DEFINITIONS))
@given(data=st.data())
def test_arbitrary_json_is_accepted_exactly_when_the_schema_accepts_it(
    name: str, data: st.DataObject
) -> None:
    definition = DEFINITIONS[name]
    schema = definition.input_schema
    plain = thaw(schema)
    value = data.draw(st.one_of(arguments_for(definition), from_schema(plain), near_misses(plain)))
    expected = schema_accepts(schema, without_defaulted_nulls(schema, value))
    assert accepts(definition, value) is expected, value


STRICT = {name: strict_schema(d.input_schema)[0] for name, d in DEFINITIONS.items()}


def test_the_representative_signatures_without_dicts_or_tuples_are_strictable() -> None:
    assert {n for n, schema in STRICT.items() if schema} == {
        "s_scalars",
        "s_enums",
        "s_union",
        "s_models",
    }


@pytest.mark.parametrize("name", ["s_scalars", "s_enums", "s_union", "s_models"])
@given(data=st.data())
def test_every_instance_of_the_strict_schema_is_accepted(name: str, data: st.DataObject) -> None:
    definition = DEFINITIONS[name]
    strict = STRICT[name]
    assert strict is not None
    value = data.draw(from_schema(strict))
    assert accepts(definition, value), value


# --- Any and dict positions, formats, repairs -------------------------------------------------


def s_any(payload: Any, mapping: dict[str, Any], items: list[Any] = [], count: int = 0) -> None:  # noqa: B006
    """Free-form positions next to an integer one."""


def s_formats(
    when: datetime.datetime,
    day: datetime.date,
    at: datetime.time,
    ident: uuid.UUID,
    span: datetime.timedelta,
    amount: decimal.Decimal,
    where: pathlib.Path,
) -> None:
    """Every format-bearing type."""


FREE = ToolDefinition.from_function(tool(s_any))
FORMATS = ToolDefinition.from_function(tool(s_formats))
FLOATY = st.recursive(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1.0, -2.0, 0.0, 1e20])
    | JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    payload=FLOATY,
    mapping=st.dictionaries(st.text(max_size=3), FLOATY, max_size=3),
    items=st.lists(FLOATY, max_size=3),
    count=st.integers(-5, 5) | st.sampled_from([2.0, -3.0]),
)
def test_values_at_free_form_positions_reach_the_tool_unchanged(
    payload: Any, mapping: dict[str, Any], items: list[Any], count: Any
) -> None:
    arguments = {"payload": payload, "mapping": mapping, "items": items, "count": count}
    for raw in (arguments, json.dumps(arguments)):
        got = FREE.validate(raw)
        assert json.dumps(got["payload"]) == json.dumps(payload)  # 1.0 stays 1.0, never 1
        assert json.dumps(got["mapping"]) == json.dumps(mapping)
        assert json.dumps(got["items"]) == json.dumps(items)
        assert got["count"] == count
        assert type(got["count"]) is int  # repaired: 2.0 is an integer


@given(data=st.data())
def test_every_instance_of_a_schema_with_formats_is_accepted(data: st.DataObject) -> None:
    value = data.draw(from_schema(thaw(FORMATS.input_schema)))
    assert accepts(FORMATS, value), value


FORMAT_CHECKED = jsonschema.Draft202012Validator(
    FORMATS.input_schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)


@given(data=st.data())
def test_arbitrary_values_at_format_positions_agree_with_the_schema(data: st.DataObject) -> None:
    value = data.draw(from_schema(thaw(FORMATS.input_schema)))
    name = data.draw(st.sampled_from(sorted(value)))
    value[name] = data.draw(
        st.text(alphabet="0123456789-:TZtz+. PYMWDHSe", max_size=25) | JSON_SCALARS
    )
    # Python's re lets "$" match before a final newline; the schema's regex dialect does not
    assume(not (isinstance(value[name], str) and value[name].endswith("\n")))
    assert accepts(FORMATS, value) is FORMAT_CHECKED.is_valid(value), value
