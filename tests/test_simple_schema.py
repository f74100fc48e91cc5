"""The fast path for simple signatures is indistinguishable from pydantic's own path."""

from __future__ import annotations

import inspect
import json
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

from agenthost import InvalidArgumentsError, ToolDefinition, tool
from agenthost._authoring.simple_schema import simple_schema
from agenthost._authoring.typeschema import Built, build_input
from agenthost._authoring.validation import PydanticArgumentValidator, SimpleArgumentValidator

SIMPLE: list[Any] = [
    str, int, float, bool, None, Any, list, dict,
    Literal["a"], Literal["a", "b"], Literal[1, 2], Literal[True], Literal[0],
    Optional[int], Union[int, str], int | str | None, Optional[Literal["x", "y"]],  # noqa: UP007, UP045
    list[int], list[str | None], set[str], frozenset[int], tuple[float, ...],
    dict[str, int], dict[str, list[bool]], list[dict[str, Any]],
    Annotated[int, Field(description="a count")], Annotated[str | None, Field(description="d")],
]  # fmt: skip
NOT_SIMPLE: list[Any] = [
    Annotated[int, Field(ge=1)], Literal["a", 1], tuple[int, str], dict[int, str], bytes,
]  # fmt: skip


def _parameters(annotation: Any, default: Any = inspect.Parameter.empty) -> list[inspect.Parameter]:
    kind = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter("x", kind, annotation=annotation),
        inspect.Parameter("y", kind, annotation=annotation, default=default),
    ]


def _both(annotation: Any, default: Any) -> tuple[Built, Built]:
    fast = build_input("t", _parameters(annotation, default), [], fast=True)
    slow = build_input("t", _parameters(annotation, default), [], fast=False)
    assert fast is not None
    assert slow is not None
    assert fast.python  # the fast validator reads the parsed JSON value
    assert not slow.python
    return fast, slow


DEFAULTS = {str: "s", int: 3, float: 1.5, bool: True, list: [1], dict: {"k": 1}}


@pytest.mark.parametrize("annotation", SIMPLE, ids=repr)
def test_fast_path_schema_equals_pydantic_schema(annotation: Any) -> None:
    fast, slow = _both(annotation, DEFAULTS.get(annotation))
    fast_schema, slow_schema = fast.schema, slow.schema
    assert fast_schema == slow_schema
    assert json.dumps(fast_schema, sort_keys=True) == json.dumps(slow_schema, sort_keys=True)


@pytest.mark.parametrize("annotation", NOT_SIMPLE, ids=repr)
def test_other_types_are_left_to_pydantic(annotation: Any) -> None:
    assert simple_schema(annotation, lambda values: lambda v: v) is None


VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-3, 3)
    | st.sampled_from(["a", "b", "x", "1"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["k", "j"]), inner, max_size=2)
    ),
    max_leaves=6,
)


@pytest.mark.parametrize("annotation", SIMPLE, ids=repr)
@given(value=VALUES, other=VALUES)
def test_fast_and_pydantic_validators_agree(annotation: Any, value: Any, other: Any) -> None:
    text = json.dumps({"x": value, "y": other})
    outcomes: list[tuple[str, Any]] = []
    for built in _both(annotation, None):
        kind = SimpleArgumentValidator if built.python else PydanticArgumentValidator
        validator = kind("t", built.validator, built.schema)
        try:
            outcomes.append(("ok", validator.validate(text)))
        except InvalidArgumentsError as error:
            outcomes.append(("error", [(p.path, p.message) for p in error.problems]))
    assert outcomes[0] == outcomes[1]


def _flat_tool(a: int, s: str = "x", o: str | None = None, n: float = 5.0) -> None:
    """A tool whose parameters are all scalars, some with defaults."""


FLAT_KEYS = st.sampled_from(["a", "s", "o", "n", "zz"])
FLAT_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4)
)


@given(pairs=st.lists(st.tuples(FLAT_KEYS, FLAT_VALUES), max_size=6), ascii_only=st.booleans())
def test_text_and_bytes_decide_alike_and_repeated_keys_are_refused(
    pairs: list[tuple[str, Any]], ascii_only: bool
) -> None:
    """The inline reading of text (the common case) decides as the general reader does."""
    validator = ToolDefinition.from_function(tool(_flat_tool)).validator
    text = (
        "{"
        + ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=ascii_only)}" for k, v in pairs)
        + "}"
    )
    outcomes: list[tuple[str, Any]] = []
    for arguments in (text, text.encode()):  # bytes always take the strict reader
        try:
            outcomes.append(("ok", validator.validate(arguments)))
        except InvalidArgumentsError as error:
            outcomes.append(("error", [(p.path, p.message) for p in error.problems]))
    assert outcomes[0] == outcomes[1]
    keys = [k for k, _ in pairs]
    if len(set(keys)) < len(keys):
        assert outcomes[0][0] == "error"
