"""The fast path for simple signatures is indistinguishable from pydantic's own path."""

from __future__ import annotations

import inspect
import json
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field
from pydantic_core import SchemaValidator, ValidationError

from agenthost._fastpath import simple_schema
from agenthost._signature import build_input

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


def _both(annotation: Any, default: Any) -> tuple[tuple[dict[str, Any], SchemaValidator], ...]:
    fast = build_input("t", _parameters(annotation, default), [], fast=True)
    slow = build_input("t", _parameters(annotation, default), [], fast=False)
    assert fast is not None
    assert slow is not None
    return fast, slow


DEFAULTS = {str: "s", int: 3, float: 1.5, bool: True, list: [1], dict: {"k": 1}}


@pytest.mark.parametrize("annotation", SIMPLE, ids=repr)
def test_fast_path_schema_equals_pydantic_schema(annotation: Any) -> None:
    (fast_schema, _), (slow_schema, _) = _both(annotation, DEFAULTS.get(annotation))
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
    (_, fast), (_, slow) = _both(annotation, None)
    text = json.dumps({"x": value, "y": other})
    outcomes = []
    for validator in (fast, slow):
        try:
            outcomes.append(("ok", validator.validate_json(text, strict=True)))
        except ValidationError as error:
            outcomes.append(("error", [(e["type"], e["loc"]) for e in error.errors()]))
    assert outcomes[0] == outcomes[1]
