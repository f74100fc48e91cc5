"""Bad tool declarations: each is reported once, with every problem, file, line and the fix."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import pytest

import agenthost
from agenthost import PluginHost, ToolContext, ToolDefinition, ToolDefinitionError, tool


class Plain:
    """A class pydantic cannot read from JSON."""

    def __init__(self, value: int) -> None:
        self.value = value


def problems_of(fn: Callable[..., Any]) -> list[str]:
    with pytest.raises(ToolDefinitionError) as caught:
        ToolDefinition.from_function(fn)
    return [str(p) for p in caught.value.problems]


def line_of(fn: Callable[..., Any], offset: int) -> int:
    """Source line ``offset`` lines below the first line of ``fn`` (its decorator)."""
    return fn.__code__.co_firstlineno + offset


# --- the declarations ------------------------------------------------------------------------


@tool
def no_annotation(city):  # type: ignore[no-untyped-def]
    """Look up a city."""


@tool
def star_args(*items: str) -> None:
    """Take many."""


@tool
def star_kwargs(**options: str) -> None:
    """Take options."""


@tool(name="get weather")
def bad_name(city: str) -> None:
    """Weather."""


@tool(name="x" * 65)
def long_name(city: str) -> None:
    """Weather."""


@tool
def plain_class(value: Plain) -> None:
    """Use a plain class."""


@tool
def nested_plain_class(values: list[Plain]) -> None:
    """Use plain classes in a list."""


@tool
def int_keys(counts: dict[int, str]) -> None:
    """Count things."""


@tool
def none_default(limit: int = None) -> None:  # type: ignore[assignment]  # noqa: RUF013
    """Limit things."""


_SENTINEL = object()


@tool
def object_default(marker: str = _SENTINEL) -> None:  # type: ignore[assignment]
    """Mark things."""


@tool
def positional_only(city: str, /) -> None:
    """Weather."""


@tool
def two_contexts(a: ToolContext, b: ToolContext | None = None) -> None:
    """Two contexts."""


@tool
def nested_context(contexts: list[ToolContext]) -> None:
    """Contexts in a list."""


@tool
def unresolved(city: "Missing") -> None:  # type: ignore[name-defined]  # noqa: F821, UP037
    """Weather."""


@tool(timeout=-1)
def negative_timeout(city: str) -> None:
    """Weather."""


@tool(permissions="http.get")  # type: ignore[arg-type]
def permissions_string(city: str) -> None:
    """Weather."""


@tool(read_only=True, destructive=True)
def contradiction(city: str) -> None:
    """Weather."""


@tool(permission={"http.get"})  # type: ignore[call-overload]
def unknown_option(city: str) -> None:
    """Weather."""


@tool(examples=[{"city": 3}])
def bad_example(city: str) -> None:
    """Weather."""


@tool(input_schema={"type": "string"})
def string_schema(**kwargs: Any) -> None:
    """Hand-written schema that is not an object."""


@tool(input_schema={"type": "object", "properties": {"b": {"type": "integer"}}})
def schema_misses_parameter(a: int) -> None:
    """Hand-written schema that forgets a parameter."""


@tool
def many_problems(a, *rest: int, b: dict[int, int] = None) -> None:  # type: ignore[no-untyped-def,assignment]  # noqa: RUF013
    """Everything at once."""


# --- the checks ------------------------------------------------------------------------------


def test_the_message_names_function_file_line_and_each_problem() -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        ToolDefinition.from_function(no_annotation)
    error = caught.value
    assert error.function == "no_annotation"
    assert error.tool == "no_annotation"
    assert error.file == __file__
    assert error.line == no_annotation.__code__.co_firstlineno
    assert str(error) == (
        f"cannot define tool from function 'no_annotation' at {__file__}:{error.line} (1 problem):\n"
        f"  - parameter 'city' (line {line_of(no_annotation, 1)}): has no type annotation; "
        "add one, e.g. `city: str`"
    )


CASES: list[tuple[Callable[..., Any], list[str]]] = [
    (
        star_args,
        ["parameter 'items' (line {1}): *items is not supported: tools take named JSON arguments; "
         "use `items: list[...]`"],
    ),
    (
        star_kwargs,
        ["parameter 'options' (line {1}): **options is not supported: declare each argument, "
         "or give the whole schema with @tool(input_schema=...)"],
    ),
    (
        bad_name,
        ["tool name 'get weather' is invalid: use 1-64 letters, digits, '_' or '-' "
         "(set @tool(name=...))"],
    ),
    (
        long_name,
        [f"tool name '{'x' * 65}' is invalid: use 1-64 letters, digits, '_' or '-' "
         "(set @tool(name=...))"],
    ),
    (
        plain_class,
        ["parameter 'value' (line {1}): type Plain is a plain class that cannot be read from JSON; "
         "make it a dataclass, TypedDict or pydantic model, or use a supported type"],
    ),
    (
        nested_plain_class,
        ["parameter 'values' (line {1}): type Plain is a plain class that cannot be read from "
         "JSON; make it a dataclass, TypedDict or pydantic model, or use a supported type"],
    ),
    (
        int_keys,
        ["parameter 'counts' (line {1}): dict keys of type int cannot come from JSON, whose "
         "object keys are strings; use dict[str, ...]"],
    ),
    (
        none_default,
        ["parameter 'limit' (line {1}): defaults to None but its type int does not allow None; "
         "write `int | None = None`"],
    ),
    (
        object_default,
        ["parameter 'marker' (line {1}): default value <object object at 0x{sentinel}> cannot be "
         "written as JSON; use a JSON-compatible default, or None and compute the value inside "
         "the function"],
    ),
    (
        positional_only,
        ["parameter 'city' (line {1}): positional-only parameters cannot be passed by name; "
         "remove the '/' marker"],
    ),
    (
        two_contexts,
        ["parameter 'b' (line {1}): a second ToolContext parameter; 'a' already gets it"],
    ),
    (
        nested_context,
        ["parameter 'contexts' (line {1}): ToolContext can only be the whole annotation of its "
         "own parameter"],
    ),
    (
        unresolved,
        ["parameter 'city' (line {1}): annotation 'Missing' cannot be resolved (NameError: name "
         "'Missing' is not defined); import the type at module level"],
    ),
    (
        negative_timeout,
        ["timeout must be a positive number of seconds (or False for none), got -1"],
    ),
    (
        permissions_string,
        ["permissions must be a set of strings, not one string: {'http.get'}"],
    ),
    (
        contradiction,
        ["read_only=True and destructive=True contradict each other; pick one"],
    ),
    (
        unknown_option,
        ["unknown @tool option 'permission'; did you mean 'permissions'?"],
    ),
    (
        bad_example,
        ["example {'city': 3} does not fit the schema: $.city: Input should be a valid string "
         "(got 3)"],
    ),
    (
        string_schema,
        ['input_schema must describe an object: {"type": "object", ...}'],
    ),
    (
        schema_misses_parameter,
        ["parameter 'a' (line {1}): the function requires it but input_schema does not list it in "
         "'required'",
         "input_schema has a property 'b' that the function does not accept; add the parameter "
         "or **kwargs"],
    ),
    (
        many_problems,
        ["parameter 'a' (line {1}): has no type annotation; add one, e.g. `a: str`",
         "parameter 'rest' (line {1}): *rest is not supported: tools take named JSON arguments; "
         "use `rest: list[...]`",
         "parameter 'b' (line {1}): dict keys of type int cannot come from JSON, whose object "
         "keys are strings; use dict[str, ...]",
         "parameter 'b' (line {1}): defaults to None but its type dict[int, int] does not allow "
         "None; write `dict[int, int] | None = None`"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("fn", "expected"), CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_bad_declaration_is_reported_exactly(fn: Callable[..., Any], expected: list[str]) -> None:
    wanted = [
        text.replace("{1}", str(line_of(fn, 1))).replace("{sentinel}", f"{id(_SENTINEL):x}")
        for text in expected
    ]
    assert problems_of(fn) == wanted


def test_a_decorated_class_is_refused() -> None:
    class Weather:
        """Not a function."""

    assert problems_of(tool(Weather)) == ["'Weather' is a class; decorate a function"]


def test_a_lambda_needs_a_name() -> None:
    assert problems_of(tool(lambda city: city)) == [
        "tool name '<lambda>' is invalid: use 1-64 letters, digits, '_' or '-' "
        "(set @tool(name=...))",
        "parameter 'city': has no type annotation; add one, e.g. `city: str`",
    ]


def test_tool_used_with_a_positional_name_fails_at_once() -> None:
    with pytest.raises(TypeError, match=r"pass options by keyword, e.g. @tool\(name='x'\)"):
        tool("x")  # type: ignore[call-overload]


class StdlibPoint(TypedDict):
    x: int


def uses_stdlib_typed_dict(point: StdlibPoint) -> None:
    """Points."""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="typing.TypedDict works from 3.12")
def test_typing_typeddict_on_old_python_explains_the_fix() -> None:
    assert problems_of(uses_stdlib_typed_dict) == [
        f"parameter 'point' (line {line_of(uses_stdlib_typed_dict, 0)}): uses "
        "typing.TypedDict; on Python < 3.12 import TypedDict from typing_extensions"
    ]


def test_plugin_info_keeps_definition_errors_structured(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "shop.py").write_text(
        "from agenthost import tool\n"
        "class Opaque:\n    pass\n"
        "@tool\n"
        "def sell(item: Opaque) -> str:\n    'Sell.'\n    return ''\n"
        "@tool\n"
        "def price(item: str) -> float:\n    'Price.'\n    return 1.0\n"
    )
    with PluginHost(plugins, installed=False) as host:
        [plugin] = host.plugins()
    assert plugin.tools == ("price",)
    [error] = plugin.definition_errors
    assert (error.function, error.file, error.line) == ("sell", str(plugins / "shop.py"), 4)
    [problem] = error.problems
    assert (problem.parameter, problem.line) == ("item", 5)
    assert plugin.problems == (str(error),)


def test_every_exception_agenthost_exports_is_an_agent_host_error() -> None:
    exported = [getattr(agenthost, name) for name in agenthost.__all__]
    raised = [e for e in exported if isinstance(e, type) and issubclass(e, BaseException)]
    errors = [e for e in raised if not issubclass(e, Warning)]
    assert agenthost.WheelError in errors
    assert all(issubclass(e, agenthost.AgentHostError) for e in errors)
    assert [e for e in raised if issubclass(e, Warning)] == [agenthost.SandboxWarning]
