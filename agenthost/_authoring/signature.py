"""Reading a tool function: its parameters, type hints, docstring, kind and location.

:func:`analyse` turns a function into a :class:`Signature`: the parameters that
go into the schema (each with its description folded into
``Annotated[..., Field(description=...)]``), the one that receives the
``ToolContext``, the summary, the return annotation and the kind (sync, async,
generator). Every problem found is collected, never raised one at a time, so an
author sees everything wrong with a tool in one go. What peers accept but a
careful author would want to hear about (a docstring naming a parameter the
function lacks, a return type without a JSON form) is a warning, not a problem.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pydantic_core
from pydantic import Field
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agenthost._authoring.annotations import strip_annotated, type_name, union_args
from agenthost._authoring.docstrings import one_line, parse_docstring
from agenthost._authoring.injected import Injected
from agenthost._errors import DefinitionProblem

__all__ = ["Signature", "ToolKind", "analyse", "parameter_lines", "source_of"]

ToolKind = Literal["sync", "async", "generator", "async_generator"]
_EMPTY = inspect.Parameter.empty
_NONE_TYPES: tuple[Any, ...] = (None, type(None))


@dataclass(slots=True)
class Signature:
    """What the signature and docstring of a tool function say."""

    parameters: list[inspect.Parameter] = field(default_factory=list)
    context_parameter: str | None = None
    accepts_any_keyword: bool = False
    kind: ToolKind = "sync"
    summary: str = ""
    returns: Any = _EMPTY
    warnings: list[str] = field(default_factory=list)


def source_of(fn: Callable[..., Any]) -> tuple[Any, str | None, int | None]:
    """The function object behind ``fn`` (through wrappers, partials, methods) and its location."""
    target: Any = fn
    for _ in range(10):
        if isinstance(target, functools.partial):
            target = target.func
        elif inspect.ismethod(target):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        else:
            break
    if not inspect.isfunction(target) and not inspect.isclass(target) and callable(target):
        target = getattr(type(target), "__call__", target)  # noqa: B004 - a callable object
    code = getattr(target, "__code__", None)
    if code is None:
        return target, None, None
    return target, code.co_filename, code.co_firstlineno


def analyse(
    fn: Callable[..., Any], target: Any, problems: list[DefinitionProblem], *, hand_schema: bool
) -> Signature:
    """Read parameters, hints and docstring; append a problem for everything that is wrong."""
    result = Signature(kind=_kind(fn))
    if inspect.isclass(fn):
        problems.append(DefinitionProblem(f"'{fn.__name__}' is a class; decorate a function"))
        return result
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        problems.append(DefinitionProblem(f"its signature cannot be read ({exc})"))
        return result
    hints = _type_hints(target, signature, problems)
    docs = parse_docstring(target, problems)
    result.summary = docs.summary
    returns = hints.get("return", _EMPTY)
    result.returns = _EMPTY if returns is _UNRESOLVED else returns  # reported already
    for param in signature.parameters.values():
        _add_parameter(result, param, hints, docs.params, problems, hand_schema=hand_schema)
    names = {p.name for p in signature.parameters.values()}
    for documented in docs.params:
        if documented not in names:
            result.warnings.append(
                f"the docstring documents a parameter '{documented}' that the function does "
                "not have; rename or remove it"
            )
    return result


def _kind(fn: Callable[..., Any]) -> ToolKind:
    probe: Any = fn
    if not (inspect.isroutine(fn) or isinstance(fn, functools.partial)) and callable(fn):
        probe = getattr(fn, "__call__", fn)  # noqa: B004
    if inspect.isasyncgenfunction(probe):
        return "async_generator"
    if inspect.iscoroutinefunction(probe):
        return "async"
    if inspect.isgeneratorfunction(probe):
        return "generator"
    return "sync"


def _type_hints(
    target: Any, signature: inspect.Signature, problems: list[DefinitionProblem]
) -> dict[str, Any]:
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:  # noqa: BLE001 - each failing annotation is reported below
        pass
    namespace = getattr(target, "__globals__", {})
    hints: dict[str, Any] = {}
    raw = {name: p.annotation for name, p in signature.parameters.items()}
    raw["return"] = signature.return_annotation
    for name, annotation in raw.items():
        if annotation is _EMPTY:
            continue
        if not isinstance(annotation, str):
            hints[name] = annotation
            continue
        value: Any = annotation
        try:
            while isinstance(value, str):  # quoted again under `from __future__ import annotations`
                annotation = value
                value = eval(value, namespace)  # the plugin's own annotation
            hints[name] = value
        except Exception as exc:  # noqa: BLE001 - any error in the plugin's annotation
            is_return = name == "return"
            problems.append(
                DefinitionProblem(
                    f"{'the return annotation' if is_return else 'annotation'} '{annotation}' "
                    f"cannot be resolved ({type(exc).__name__}: {exc}); "
                    "import the type at module level",
                    parameter=None if is_return else name,
                )
            )
            hints[name] = _UNRESOLVED
    return hints


_UNRESOLVED = object()


def _add_parameter(
    result: Signature,
    param: inspect.Parameter,
    hints: Mapping[str, Any],
    documented: Mapping[str, str],
    problems: list[DefinitionProblem],
    *,
    hand_schema: bool,
) -> None:
    """File one parameter: a schema parameter, the context parameter, or a problem."""
    name = param.name

    def problem(message: str) -> None:
        problems.append(DefinitionProblem(message, parameter=name))

    if param.kind is not param.POSITIONAL_OR_KEYWORD and param.kind is not param.KEYWORD_ONLY:
        _not_by_name(result, param, problem, hand_schema=hand_schema)
        return
    annotation = hints.get(name, _EMPTY)
    if annotation is _UNRESOLVED:
        return
    if isinstance(param.default, FieldInfo):  # `x: T = Field(...)`, read as Annotated[T, Field]
        if annotation is not _EMPTY:
            annotation = Annotated[annotation, param.default]
        param = param.replace(default=_EMPTY)
    if _is_context(annotation):
        _take_context(result, param, problem)
    elif hand_schema:
        result.parameters.append(param)
    elif annotation is _EMPTY:
        problem(f"has no type annotation; add one, e.g. `{name}: str`")
    else:
        before = len(problems)
        for message in _type_problems(annotation):
            problem(message)
        annotation = _with_description(name, annotation, documented.get(name), result.warnings)
        default = _field_default(annotation) if param.default is _EMPTY else param.default
        if default is not _EMPTY:
            _check_default(default, annotation, problem)
        if len(problems) == before:  # a parameter already at fault is not described twice
            kind = inspect.Parameter.KEYWORD_ONLY
            result.parameters.append(param.replace(kind=kind, annotation=annotation))


def _not_by_name(
    result: Signature,
    param: inspect.Parameter,
    problem: Callable[[str], None],
    *,
    hand_schema: bool,
) -> None:
    """``*args``, ``**kwargs`` and positional-only parameters: JSON arguments have names."""
    name = param.name
    if param.kind is param.VAR_POSITIONAL:
        problem(
            f"*{name} is not supported: tools take named JSON arguments; use `{name}: list[...]`"
        )
    elif param.kind is param.VAR_KEYWORD:
        if hand_schema:
            result.accepts_any_keyword = True
        else:
            problem(
                f"**{name} is not supported: declare each argument, "
                "or give the whole schema with @tool(input_schema=...)"
            )
    else:
        problem("positional-only parameters cannot be passed by name; remove the '/' marker")


def _take_context(
    result: Signature, param: inspect.Parameter, problem: Callable[[str], None]
) -> None:
    if result.context_parameter is not None:
        problem(f"a second ToolContext parameter; '{result.context_parameter}' already gets it")
    elif param.default is not _EMPTY and param.default is not None:
        problem("a ToolContext parameter can only default to None")
    else:
        result.context_parameter = param.name


def _is_context(annotation: Any) -> bool:
    members = [a for a in union_args(annotation) if a not in _NONE_TYPES]
    return len(members) == 1 and _injected(members[0])


def _injected(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Injected)


def _admits_none(annotation: Any) -> bool:
    for member in union_args(annotation):
        if member in _NONE_TYPES or member is Any or member is object:
            return True
        if typing.get_origin(member) is Literal and None in typing.get_args(member):
            return True
    return False


def _type_problems(annotation: Any) -> list[str]:
    """Problems pydantic would accept silently but that break a JSON tool contract."""
    found: list[str] = []
    stack = [annotation]
    while stack:
        node = strip_annotated(stack.pop())
        if _injected(node):
            found.append("ToolContext can only be the whole annotation of its own parameter")
            continue
        origin = typing.get_origin(node)
        args = typing.get_args(node)
        if origin in (dict, Mapping) and args and not _is_string_key(args[0]):
            found.append(
                f"dict keys of type {type_name(args[0])} cannot come from JSON, "
                "whose object keys are strings; use dict[str, ...]"
            )
        if origin is not Literal:
            stack.extend(a for a in args if a is not Ellipsis)
    return found


def _is_string_key(key: Any) -> bool:
    key = strip_annotated(key)
    if key is str or key is Any:
        return True
    if typing.get_origin(key) is Literal:
        return all(isinstance(v, str) for v in typing.get_args(key))
    return inspect.isclass(key) and issubclass(key, str)


def _field_description(annotation: Any) -> str | None:
    """The description an annotation carries: ``Field(description=...)``, else a string."""
    if typing.get_origin(annotation) is not Annotated:
        return None
    metadata = annotation.__metadata__
    for meta in reversed(metadata):
        if isinstance(meta, FieldInfo) and meta.description:
            return meta.description
    texts = [meta for meta in metadata if isinstance(meta, str)]
    return texts[-1] if texts else None


def _field_default(annotation: Any) -> Any:
    """The default a ``Field`` inside ``Annotated`` gives (``_EMPTY`` if none, or a factory)."""
    if typing.get_origin(annotation) is Annotated:
        for meta in reversed(annotation.__metadata__):
            if isinstance(meta, FieldInfo) and meta.default is not PydanticUndefined:
                return meta.default
    return _EMPTY


def _with_description(
    name: str, annotation: Any, from_docstring: str | None, warnings: list[str]
) -> Any:
    """``annotation`` with the parameter's description where pydantic will publish it."""
    from_annotation = _field_description(annotation)
    if from_docstring and from_annotation and one_line(from_annotation) != from_docstring:
        warnings.append(
            f"parameter '{name}': two different descriptions, {from_annotation!r} in the "
            f"annotation and {from_docstring!r} in the docstring; the annotation's is used"
        )
    text = from_annotation or from_docstring
    if text and not _has_field_description(annotation):
        return Annotated[annotation, Field(description=text)]
    return annotation


def _has_field_description(annotation: Any) -> bool:
    return typing.get_origin(annotation) is Annotated and any(
        isinstance(meta, FieldInfo) and meta.description for meta in annotation.__metadata__
    )


_JSON_SCALARS = frozenset({str, int, float, bool})


def _check_default(default: Any, annotation: Any, problem: Callable[[str], None]) -> None:
    if default is None:
        if not _admits_none(annotation):
            problem(
                f"defaults to None but its type {type_name(annotation)} does not allow None; "
                f"write `{type_name(annotation)} | None = None`"
            )
        return
    if type(default) in _JSON_SCALARS:
        return
    try:
        pydantic_core.to_jsonable_python(default)
    except Exception:  # noqa: BLE001 - plugin code: reported as a problem
        problem(
            f"default value {default!r} cannot be written as JSON; use a JSON-compatible "
            "default, or None and compute the value inside the function"
        )


def parameter_lines(target: Any) -> dict[str, int]:
    """Line of each parameter in the source (only used to point at problems)."""
    try:
        lines, start = inspect.getsourcelines(target)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            every += [a for a in (args.vararg, args.kwarg) if a is not None]
            return {a.arg: start + a.lineno - 1 for a in every}
    return {}
