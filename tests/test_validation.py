"""The argument validator: JSON in, keyword arguments out, and precise errors by JSON path."""

from __future__ import annotations

from typing import Any

import pytest
from typezoo import Person, Point

from agenthost import InvalidArgumentsError, ToolDefinition, ToolDefinitionError, tool


@tool
def book(
    person: Person, seats: int, points: list[Point], note: str | None = None, vip: bool = False
) -> None:
    """Book seats."""


BOOK = ToolDefinition.from_function(book)
GOOD = {
    "person": {"name": "Ada", "address": {"street": "s", "city": "c"}},
    "seats": 2,
    "points": [{"x": 1}],
}


def problems(definition: ToolDefinition, arguments: Any) -> list[tuple[str, str]]:
    with pytest.raises(InvalidArgumentsError) as caught:
        definition.validate(arguments)
    return [(p.path, p.message) for p in caught.value.problems]


@pytest.mark.parametrize(
    "arguments",
    [
        GOOD,
        '{"person": {"name": "Ada", "address": {"street": "s", "city": "c"}}, "seats": 2,'
        ' "points": [{"x": 1}]}',
        b'{"person": {"name": "Ada", "address": {"street": "s", "city": "c"}}, "seats": 2,'
        b' "points": [{"x": 1}]}',
    ],
)
def test_json_text_bytes_and_dicts_are_accepted(arguments: Any) -> None:
    args = BOOK.validate(arguments)
    assert args["seats"] == 2
    assert args["points"] == [Point(1, 0)]
    assert args["note"] is None
    assert args["vip"] is False


def test_invalid_json_is_reported_at_the_root() -> None:
    [(path, message)] = problems(BOOK, '{"seats": 2,')
    assert path == "$"
    assert message.startswith("invalid JSON: ")


@pytest.mark.parametrize("text", ["[1, 2]", "3", "null", '"text"'])
def test_json_that_is_not_an_object_is_refused(text: str) -> None:
    assert problems(BOOK, text) == [("$", "arguments must be a JSON object")]


def test_unknown_keys_are_refused_and_the_accepted_ones_listed() -> None:
    assert problems(BOOK, {**GOOD, "sets": 3}) == [
        ("$.sets", "unexpected argument (this tool accepts: person, seats, points, note, vip)")
    ]


def test_nested_unknown_keys_follow_the_model_config() -> None:
    # pydantic models ignore extra keys unless they forbid them; the schema says the same.
    args = BOOK.validate({**GOOD, "person": {**GOOD["person"], "age": 3}})
    assert not hasattr(args["person"], "age")


def test_missing_required_arguments_and_fields_are_named() -> None:
    assert problems(BOOK, {"person": {"name": "Ada"}, "points": []}) == [
        ("$.person.address", "missing required field"),
        ("$.seats", "missing required argument"),
    ]


def test_wrong_types_are_reported_with_their_json_path() -> None:
    bad = {**GOOD, "seats": "2", "points": [{"x": 1}, {"x": "no"}], "vip": 1}
    assert problems(BOOK, bad) == [
        ("$.seats", 'Input should be a valid integer (got "2")'),
        ("$.points[1].x", 'Input should be a valid integer (got "no")'),
        ("$.vip", "Input should be a valid boolean (got 1)"),
    ]


def test_union_member_tags_do_not_leak_into_paths() -> None:
    @tool
    def pick(value: int | list[int]) -> None:
        """Pick."""

    found = problems(ToolDefinition.from_function(pick), {"value": ["a"]})
    assert [path for path, _ in found] == ["$.value", "$.value[0]"]


def test_an_integral_float_is_an_integer_as_in_json_schema() -> None:
    args = BOOK.validate({**GOOD, "seats": 2.0, "points": [{"x": 3.0, "y": 1e2}]})
    assert args["seats"] == 2
    assert type(args["seats"]) is int
    assert args["points"] == [Point(3, 100)]
    assert problems(BOOK, {**GOOD, "seats": 2.5})[0][0] == "$.seats"


def test_null_for_a_parameter_with_a_default_means_the_default() -> None:
    args = BOOK.validate({**GOOD, "vip": None})
    assert args["vip"] is False
    nested = BOOK.validate({**GOOD, "points": [{"x": 1, "y": None}]})
    assert nested["points"] == [Point(1, 0)]


def test_null_for_a_required_parameter_is_still_an_error() -> None:
    assert problems(BOOK, {**GOOD, "seats": None}) == [
        ("$.seats", "Input should be a valid integer (got null)")
    ]


def test_dict_arguments_must_be_json_values() -> None:
    [(path, message)] = problems(BOOK, {**GOOD, "note": object()})
    assert path == "$"
    assert message.startswith("arguments are not JSON values")


def test_other_argument_containers_are_refused() -> None:
    assert problems(BOOK, [("seats", 2)]) == [
        ("$", "arguments must be a JSON object string or a dict, not list")
    ]


def test_the_error_message_summarises_every_problem() -> None:
    with pytest.raises(InvalidArgumentsError) as caught:
        BOOK.validate({**GOOD, "seats": "x", "vip": "y"})
    assert str(caught.value) == (
        "invalid arguments for tool 'book' (2 problems): "
        '$.seats: Input should be a valid integer (got "x"); '
        '$.vip: Input should be a valid boolean (got "y")'
    )
    assert caught.value.problems[0].as_dict() == {
        "path": "$.seats",
        "message": 'Input should be a valid integer (got "x")',
        "type": "int_type",
    }


def test_keys_that_are_not_identifiers_are_quoted_in_paths() -> None:
    @tool
    def tally(counts: dict[str, int]) -> None:
        """Tally."""

    assert problems(ToolDefinition.from_function(tally), {"counts": {"a b": "x"}}) == [
        ('$.counts["a b"]', 'Input should be a valid integer (got "x")')
    ]


# --- hand-written schemas: nothing fetched, no backtracking -------------------------------------

CATASTROPHIC = "^(a+)+$"  # Python's re takes minutes on 40 a's and a '!'


def kinds(definition: ToolDefinition, arguments: Any) -> list[tuple[str, str]]:
    with pytest.raises(InvalidArgumentsError) as caught:
        definition.validate(arguments)
    return [(p.path, p.type) for p in caught.value.problems]


def hand_written(properties: dict[str, Any], **more: Any) -> ToolDefinition:
    schema = {"type": "object", "properties": properties, **more}
    return ToolDefinition.from_schema("hand", schema, description="Hand-written.")


def test_a_catastrophic_pattern_is_matched_in_linear_time() -> None:
    definition = hand_written({"word": {"type": "string", "pattern": CATASTROPHIC}})
    assert definition.validate({"word": "aaaa"}) == {"word": "aaaa"}
    assert kinds(definition, {"word": "a" * 40 + "!"}) == [("$.word", "pattern")]


def test_pattern_properties_and_additional_properties_match_in_linear_time() -> None:
    definition = hand_written(
        {}, patternProperties={CATASTROPHIC: {"type": "integer"}}, additionalProperties=False
    )
    assert definition.validate({"aaa": 1}) == {"aaa": 1}
    assert kinds(definition, {"a" * 40 + "!": 1}) == [("$", "additionalProperties")]
    assert kinds(definition, {"aa": "x"}) == [("$.aa", "type")]


def test_a_pattern_is_searched_not_anchored() -> None:
    definition = hand_written({"word": {"type": "string", "pattern": "b"}})
    assert definition.validate({"word": "abc"}) == {"word": "abc"}
    assert kinds(definition, {"word": "ac"}) == [("$.word", "pattern")]


def test_a_trusted_pattern_with_look_around_is_still_matched() -> None:
    definition = hand_written({"word": {"type": "string", "pattern": "^(?!no)[a-z]+$"}})
    assert definition.validate({"word": "yes"}) == {"word": "yes"}
    assert kinds(definition, {"word": "nope"}) == [("$.word", "pattern")]


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        ("file:///etc/passwd", "refers outside the schema"),
        ("http://127.0.0.1:9/schema.json", "refers outside the schema"),
        ("other.json#/x", "refers outside the schema"),
        ("#/$defs/missing", "points to nothing in the schema"),
    ],
)
def test_a_reference_out_of_the_schema_or_to_nothing_is_refused_at_definition(
    reference: str, says: str
) -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        hand_written({"x": {"$ref": reference}})
    assert says in str(caught.value)


def test_a_reference_inside_the_schema_is_followed() -> None:
    definition = hand_written(
        {"x": {"$ref": "#/$defs/word"}}, **{"$defs": {"word": {"type": "string"}}}
    )
    assert definition.validate({"x": "a"}) == {"x": "a"}
    assert kinds(definition, {"x": 1}) == [("$.x", "type")]
