"""Argument validation per call: agenthost next to plain pydantic and LangChain on the same JSON."""

from __future__ import annotations

import json
import typing
from functools import partial
from typing import Any

from pydantic import TypeAdapter, create_model

from agenthost import ToolDefinition
from benchmarks._harness import Stats, measure, optional, table
from benchmarks._tools import ADD_JSON, ORDER_JSON, add, create_order


def _plain_model(fn: Any) -> Any:
    """The pydantic model a hand-written validator would use for ``fn``'s parameters."""
    hints = typing.get_type_hints(fn, include_extras=True)
    defaults = dict(zip(reversed(fn.__code__.co_varnames[: fn.__code__.co_argcount]),
                        reversed(fn.__defaults__ or ()), strict=False))  # fmt: skip
    fields: dict[str, Any] = {
        name: (hint, defaults.get(name, ...)) for name, hint in hints.items() if name != "return"
    }
    return create_model(f"{fn.__name__}_args", **fields)


def _langchain(fn: Any, text: str) -> Stats:
    from langchain_core.tools import StructuredTool

    structured = StructuredTool.from_function(fn)
    return measure(lambda: structured._parse_input(json.loads(text), None))


def main() -> None:
    for label, fn, text in (
        ("2 parameters", add, ADD_JSON),
        ("10 parameters, nested", create_order, ORDER_JSON),
    ):
        definition = ToolDefinition.from_function(fn)
        adapter = TypeAdapter(_plain_model(fn))
        rows = [
            ("agenthost definition.validate(json)", measure(lambda d=definition, t=text: d.validate(t))),  # type: ignore[misc]
            ("pydantic TypeAdapter(Model).validate_json", measure(lambda a=adapter, t=text: a.validate_json(t))),  # type: ignore[misc]
            ("LangChain json.loads + StructuredTool._parse_input", optional(partial(_langchain, fn, text))),
        ]  # fmt: skip
        table(
            f"argument validation per call: {label}",
            rows,
            baseline="pydantic TypeAdapter(Model).validate_json",
        )
