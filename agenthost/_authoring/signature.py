"""From a Python signature to JSON Schemas and a compiled argument validator.

The schema and the validator come from one pydantic object, so they cannot
drift apart: a keyword-only stand-in function carries the tool's parameters
(without the injected ``ToolContext``, with docstring descriptions folded into
``Annotated[..., Field(description=...)]``), and ``TypeAdapter`` of that
stand-in yields both the JSON Schema and a validator whose result is the
keyword-argument dict itself.

Every problem found is collected, never raised one at a time, so an author
sees everything wrong with a tool in one go. What peers accept but a careful
author would want to hear about (a docstring naming a parameter the function
lacks, a return type without a JSON form) is a warning, not a problem.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import inspect
import itertools
import json
import linecache
import re
import sys
import textwrap
import types
import typing
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple, cast

import docstring_parser
import pydantic_core
import typing_extensions
from pydantic import BaseModel, Field, PydanticUserError, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import CoreConfig, PydanticCustomError, PydanticUndefined, SchemaValidator
from pydantic_core import core_schema as cs

from agenthost._authoring.formats import (
    CHECKS,
    DECIMAL_PATTERN,
    DURATION_PATTERN,
    MESSAGES,
    url_pattern,
)
from agenthost._authoring.injected import Injected
from agenthost._authoring.schema import canonicalize
from agenthost._authoring.simple_schema import simple_schema
from agenthost._errors import DefinitionProblem

__all__ = ["Signature", "ToolKind", "analyse", "build_input", "build_output", "source_of"]

ToolKind = Literal["sync", "async", "generator", "async_generator"]
_EMPTY = inspect.Parameter.empty
_NONE_TYPES: tuple[Any, ...] = (None, type(None))


class _SchemaGenerator(GenerateJsonSchema):
    """pydantic's generator without field titles, key sorting or a TypeAdapter per default.

    It also binds its per-type methods on first use instead of all ~70 up front,
    which is a fifth of the cost of a small tool's schema.
    """

    def build_schema_type_to_method(self) -> Any:
        return _MethodsOnDemand(weakref.ref(self))

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def encode_default(self, dft: Any) -> Any:
        return pydantic_core.to_jsonable_python(dft)

    def sort(self, value: Any, parent_key: str | None = None) -> Any:
        return value

    # Attribute docstrings describe the properties of models, dataclasses and TypedDicts.
    def model_schema(self, schema: Any) -> Any:
        return _with_attribute_docs(super().model_schema(schema), schema.get("cls"))

    def dataclass_schema(self, schema: Any) -> Any:
        return _with_attribute_docs(super().dataclass_schema(schema), schema.get("cls"))

    def typed_dict_schema(self, schema: Any) -> Any:
        return _with_attribute_docs(super().typed_dict_schema(schema), schema.get("cls"))

    # What the validator requires beyond the format, published as a pattern (see _formats).
    def url_schema(self, schema: Any) -> Any:
        out = super().url_schema(schema)
        if self.mode == "validation":
            out["pattern"] = url_pattern(schema.get("allowed_schemes"))
        return out

    def timedelta_schema(self, schema: Any) -> Any:
        out = super().timedelta_schema(schema)
        if self.mode == "validation" and out.get("format") == "duration":
            out["pattern"] = DURATION_PATTERN
        return out

    def decimal_schema(self, schema: Any) -> Any:
        out = super().decimal_schema(schema)
        for branch in out.get("anyOf", ()) if self.mode == "validation" else ():
            if branch.get("type") == "string":
                branch["pattern"] = DECIMAL_PATTERN
        return out


class _MethodsOnDemand(dict[str, Any]):
    def __init__(self, owner: weakref.ref[GenerateJsonSchema]) -> None:
        super().__init__()
        self._owner = owner

    def __missing__(self, kind: str) -> Any:
        method = getattr(self._owner(), f"{kind.replace('-', '_')}_schema")
        self[kind] = method
        return method


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
    docs = _parse_docstring(target, problems)
    result.summary = docs.summary
    result.returns = hints.get("return", _EMPTY)
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


@dataclass(slots=True)
class _Docstring:
    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)


def _parse_docstring(target: Any, problems: list[DefinitionProblem]) -> _Docstring:
    doc = _docstring(target)
    if not doc:
        return _Docstring()
    style = _docstring_style(doc)
    if style is None:  # prose only: no need to try every parser
        return _Docstring(_one_line(doc.split("\n\n", 1)[0]))
    try:
        parsed = docstring_parser.parse(doc, style)
    except docstring_parser.ParseError as exc:
        problems.append(
            DefinitionProblem(f"the docstring cannot be parsed ({exc}); fix its layout")
        )
        return _Docstring()
    summary = parsed.short_description or ""
    if parsed.long_description and not parsed.blank_after_short_description:
        summary += " " + parsed.long_description.split("\n\n", 1)[0]
    params = {
        p.arg_name: _one_line(p.description)
        for p in parsed.params
        if p.description and not p.arg_name.startswith("*")
    }
    return _Docstring(_one_line(summary), params)


_GOOGLE_SECTIONS = (
    "Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    "Returns?|Yields?|Raises|Exceptions|Attributes|Examples?|Notes?|Todo"
)
_STYLE_MARKERS = (
    (r"^\s*:(param|parameter|arg|argument|key|keyword|returns?|raises?)\b", "REST"),
    (r"^\s*\w[\w ]*\n\s*-{3,}\s*$", "NUMPYDOC"),
    (rf"^\s*({_GOOGLE_SECTIONS})\s*:\s*$", "GOOGLE"),
    (r"^\s*@(param|return|raise)", "EPYDOC"),
)
_STYLES = [(re.compile(p, re.M), docstring_parser.DocstringStyle[s]) for p, s in _STYLE_MARKERS]


def _docstring(target: Any) -> str | None:
    """The cleaned docstring, made parseable when it opens with a section (``Args:``)."""
    doc = inspect.getdoc(target)
    if not doc:
        return doc
    first, _, rest = doc.partition("\n")
    if not _SECTION.fullmatch(first.strip()):
        return doc
    raw = (getattr(target, "__doc__", None) or "").expandtabs()
    opening, _, after = raw.partition("\n")
    if opening.strip():  # the section starts on the quotes' line: cleandoc lost its indent
        lines = textwrap.dedent(after).strip("\n").splitlines()
        if lines and not lines[0][:1].isspace():
            lines = [
                line if not line or _SECTION.fullmatch(line.strip()) else "    " + line
                for line in lines
            ]
        rest = "\n".join(lines)
    return f"\n{first.strip()}\n{rest}"  # docstring_parser wants a summary line first


_SECTION = re.compile(rf"(?:{_GOOGLE_SECTIONS})\s*:")


def _docstring_style(doc: str) -> docstring_parser.DocstringStyle | None:
    """The style whose section markers appear in ``doc``; None for plain prose."""
    for pattern, style in _STYLES:
        if pattern.search(doc):
            return style
    return None


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def _add_parameter(
    result: Signature,
    param: inspect.Parameter,
    hints: Mapping[str, Any],
    documented: Mapping[str, str],
    problems: list[DefinitionProblem],
    *,
    hand_schema: bool,
) -> None:
    name = param.name

    def problem(message: str) -> None:
        problems.append(DefinitionProblem(message, parameter=name))

    if param.kind is param.VAR_POSITIONAL:
        problem(
            f"*{name} is not supported: tools take named JSON arguments; use `{name}: list[...]`"
        )
        return
    if param.kind is param.VAR_KEYWORD:
        if hand_schema:
            result.accepts_any_keyword = True
        else:
            problem(
                f"**{name} is not supported: declare each argument, "
                "or give the whole schema with @tool(input_schema=...)"
            )
        return
    if param.kind is param.POSITIONAL_ONLY:
        problem("positional-only parameters cannot be passed by name; remove the '/' marker")
        return
    annotation = hints.get(name, _EMPTY)
    if annotation is _UNRESOLVED:
        return
    if isinstance(param.default, FieldInfo):  # `x: T = Field(...)`, read as Annotated[T, Field]
        if annotation is not _EMPTY:
            annotation = Annotated[annotation, param.default]
        param = param.replace(default=_EMPTY)
    if _is_context(annotation):
        if result.context_parameter is not None:
            problem(f"a second ToolContext parameter; '{result.context_parameter}' already gets it")
        elif param.default is not _EMPTY and param.default is not None:
            problem("a ToolContext parameter can only default to None")
        else:
            result.context_parameter = name
        return
    if hand_schema:
        result.parameters.append(param)
        return
    if annotation is _EMPTY:
        problem(f"has no type annotation; add one, e.g. `{name}: str`")
        return
    before = len(problems)
    for message in _type_problems(annotation):
        problem(message)
    annotation = _with_description(name, annotation, documented.get(name), result.warnings)
    default = _field_default(annotation) if param.default is _EMPTY else param.default
    if default is not _EMPTY:
        _check_default(default, annotation, problem)
    if len(problems) == before:  # a parameter already at fault is not described twice
        result.parameters.append(
            param.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
        )


def _strip_annotated(annotation: Any) -> Any:
    while typing.get_origin(annotation) is Annotated:
        annotation = annotation.__origin__
    return annotation


def _union_args(annotation: Any) -> tuple[Any, ...]:
    annotation = _strip_annotated(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _is_context(annotation: Any) -> bool:
    members = [a for a in _union_args(annotation) if a not in _NONE_TYPES]
    return len(members) == 1 and _injected(members[0])


def _injected(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Injected)


def _admits_none(annotation: Any) -> bool:
    for member in _union_args(annotation):
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
        node = _strip_annotated(stack.pop())
        if _injected(node):
            found.append("ToolContext can only be the whole annotation of its own parameter")
            continue
        origin = typing.get_origin(node)
        args = typing.get_args(node)
        if origin in (dict, Mapping) and args and not _is_string_key(args[0]):
            found.append(
                f"dict keys of type {_type_name(args[0])} cannot come from JSON, "
                "whose object keys are strings; use dict[str, ...]"
            )
        if origin is not Literal:
            stack.extend(a for a in args if a is not Ellipsis)
    return found


def _is_string_key(key: Any) -> bool:
    key = _strip_annotated(key)
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
    if from_docstring and from_annotation and _one_line(from_annotation) != from_docstring:
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
                f"defaults to None but its type {_type_name(annotation)} does not allow None; "
                f"write `{_type_name(annotation)} | None = None`"
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


def _type_name(annotation: Any) -> str:
    annotation = _strip_annotated(annotation)
    if inspect.isclass(annotation) and typing.get_origin(annotation) is None:
        return annotation.__qualname__
    return re.sub(r"\b(typing|collections\.abc|builtins)\.", "", repr(annotation))


class Built(NamedTuple):
    """An input schema and the validator that accepts exactly what it says."""

    schema: dict[str, Any]
    validator: SchemaValidator
    python: bool  # the validator takes the parsed JSON value (else the JSON text)
    recheck: bool = False  # some positions need the schema itself checked (see _guarded)


def build_input(
    name: str,
    parameters: list[inspect.Parameter],
    problems: list[DefinitionProblem],
    *,
    fast: bool = True,
) -> Built | None:
    """The canonical input schema and compiled validator, or None after adding problems."""
    if fast:
        built = _build_simple(parameters)
        if built is not None:
            return built

    def arguments(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    arguments.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    arguments.__annotations__ = {p.name: p.annotation for p in parameters}
    arguments.__name__ = arguments.__qualname__ = name
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(cast(Any, arguments))
        schema = adapter.json_schema(schema_generator=_SchemaGenerator)
    except Exception as exc:  # noqa: BLE001 - pinpointed per parameter below
        _diagnose(parameters, exc, problems)
        return None
    schema.setdefault("properties", {})
    hidden = [False]
    guarded, changed = _guarded(adapter.core_schema, hidden)
    validator = SchemaValidator(guarded) if changed else adapter.validator
    return Built(canonicalize(schema), validator, False, hidden[0])  # type: ignore[arg-type]


def _build_simple(parameters: list[inspect.Parameter]) -> Built | None:
    """The fast path for signatures made only of simple types (see ``_simple_schema``).

    The validator is a strict typed dict over the parsed JSON object: for these
    types strict Python validation of a JSON value decides exactly as strict
    JSON validation does, and skips parsing the text a second time.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    fields: dict[str, cs.TypedDictField] = {}
    for param in parameters:
        found = simple_schema(param.annotation, _same_json_kind)
        if found is None:
            return None
        schema, core = found
        if param.default is _EMPTY:
            required.append(param.name)
        else:
            schema = {**schema, "default": pydantic_core.to_jsonable_python(param.default)}
            core = cs.with_default_schema(core, default=param.default)
        properties[param.name] = schema
        fields[param.name] = cs.typed_dict_field(core, required=param.default is _EMPTY)
    root: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        root["required"] = required
    root["additionalProperties"] = False
    strict = CoreConfig(strict=True)  # on the schema itself: a typed dict's own config wins
    core_schema = cs.typed_dict_schema(fields, extra_behavior="forbid", config=strict)
    return Built(root, SchemaValidator(core_schema), True)


def _guarded(node: Any, hidden: list[bool]) -> tuple[Any, bool]:
    """A copy of a core schema that accepts exactly what its JSON Schema publishes, and
    whether anything changed.

    pydantic matches choices by Python equality, so ``true`` would pass as
    ``Literal[1]`` or an ``IntEnum`` member, which JSON Schema's ``enum`` refuses;
    and it parses more string forms than the formats it publishes (see ``_formats``).
    pydantic-core validates a complete model (or pydantic dataclass) with the
    class's own prebuilt validator, whatever schema it is given: when a guard is
    needed inside one, ``hidden[0]`` is set and the caller checks another way.
    """
    if isinstance(node, list):
        items = [_guarded(item, hidden) for item in node]
        return [item for item, _ in items], any(changed for _, changed in items)
    if not isinstance(node, dict):
        return node, False
    if _prebuilt(node):
        hidden[0] = hidden[0] or _needs_guard(node.get("schema"))
        return node, False
    copied: dict[str, Any] = {}
    changed = False
    for key, value in node.items():
        copied[key], inner = _guarded(value, hidden)
        changed |= inner
    kind = copied.get("type")
    if kind == "float" and "allow_inf_nan" not in copied:  # 1e400 would arrive as inf
        copied["allow_inf_nan"] = False
        changed = True
    if kind in _FORMATS:
        return _format_checked(copied, _FORMATS[kind]), True
    choices = _numeric_choices(copied)
    if choices is None:
        return copied, changed
    ref = copied.pop("ref", None)
    guard = cs.no_info_before_validator_function(_same_json_kind(choices), copied, ref=ref)
    return guard, True


def _numeric_choices(node: dict[str, Any]) -> list[Any] | None:
    """The choices of a literal or enum that has number or boolean choices."""
    kind = node.get("type")
    if kind == "literal":
        choices = list(node["expected"])
    elif kind == "enum":
        choices = [member.value for member in node["members"]]
    else:
        return None
    return choices if any(isinstance(c, int | float) for c in choices) else None


def _needs_guard(node: Any) -> bool:
    if isinstance(node, list):
        return any(_needs_guard(item) for item in node)
    if not isinstance(node, dict):
        return False
    if node.get("type") in _FORMATS or _numeric_choices(node) is not None:
        return True
    return any(_needs_guard(value) for value in node.values())


def _prebuilt(node: dict[str, Any]) -> bool:
    """Whether pydantic-core will validate ``node`` with its class's own validator."""
    if node.get("type") not in ("model", "dataclass") or "generic_origin" in node:
        return False
    cls = node.get("cls")
    namespace = getattr(cls, "__dict__", {})
    return bool(namespace.get("__pydantic_complete__")) and "__pydantic_validator__" in namespace


_FORMATS = {
    "uuid": "uuid",
    "datetime": "date-time",
    "date": "date",
    "time": "time",
    "timedelta": "duration",
    "url": "uri",
    "multi-host-url": "uri",
    "decimal": "decimal",
}


def _format_checked(node: dict[str, Any], name: str) -> Any:
    """``node`` as: a strict JSON string (or number, for decimals) in the published format,
    then parsed by a validator of ``node`` alone. Dates, times, UUIDs and decimals are
    parsed leniently there, since the value is Python text by then, which strict mode
    would refuse; URLs keep strict URL syntax and the pattern their schema publishes."""
    ref = node.pop("ref", None)
    url = name == "uri"
    parse = SchemaValidator({**node, "strict": url})
    check, expected = CHECKS[name], MESSAGES[name]
    pattern = re.compile(url_pattern(node.get("allowed_schemes"))) if url else None

    def checked(value: Any) -> Any:
        if isinstance(value, str) and not (
            check(value) and (pattern is None or pattern.search(value))
        ):
            raise PydanticCustomError(
                "format_error", "Input should be {expected}", {"expected": expected}
            )
        try:
            return parse.validate_python(value)
        except ValidationError as error:
            first = error.errors(include_url=False)[0]
            raise PydanticCustomError(
                first["type"], "{message}", {"message": first["msg"]}
            ) from None

    accepted: Any = cs.str_schema()
    if name == "decimal":
        accepted = cs.union_schema([cs.int_schema(), cs.float_schema(), cs.str_schema()])
    return cs.chain_schema([accepted, cs.no_info_plain_validator_function(checked)], ref=ref)


def _same_json_kind(choices: list[Any]) -> Callable[[Any], Any]:
    bools = any(isinstance(v, bool) for v in choices)
    numbers = any(isinstance(v, int | float) and not isinstance(v, bool) for v in choices)

    def check(value: Any) -> Any:
        is_bool = isinstance(value, bool)
        if (is_bool and not bools) or (
            isinstance(value, int | float) and not is_bool and not numbers
        ):
            shown = " or ".join(json.dumps(c, default=str) for c in choices)
            raise PydanticCustomError(
                "literal_error", "Input should be {expected}", {"expected": shown}
            )
        return value

    return check


def _diagnose(
    parameters: list[inspect.Parameter], exc: Exception, problems: list[DefinitionProblem]
) -> None:
    before = len(problems)
    for param in parameters:
        try:
            TypeAdapter(param.annotation).json_schema(schema_generator=_SchemaGenerator)
        except Exception as param_exc:  # noqa: BLE001 - reported as a problem
            message = _explain_type_error(param.annotation, param_exc)
            problems.append(DefinitionProblem(message, parameter=param.name))
    if len(problems) == before:
        problems.append(DefinitionProblem(f"the parameters cannot be described: {exc}"))


def _explain_type_error(annotation: Any, exc: Exception) -> str:
    if isinstance(exc, PydanticUserError) and exc.code == "typed-dict-version":
        return "uses typing.TypedDict; on Python < 3.12 import TypedDict from typing_extensions"
    plain = _plain_class(annotation)
    if plain is not None:
        return (
            f"type {plain.__qualname__} is a plain class that cannot be read from JSON; "
            "make it a dataclass, TypedDict or pydantic model, or use a supported type"
        )
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"type {_type_name(annotation)} is not supported ({first_line})"


def _plain_class(annotation: Any) -> type | None:
    stack = [annotation]
    while stack:
        node = _strip_annotated(stack.pop())
        args = typing.get_args(node)
        if args and typing.get_origin(node) is not Literal:
            stack.extend(a for a in args if a is not Ellipsis)
            continue
        if (
            inspect.isclass(node)
            and node.__module__ != "builtins"
            and not dataclasses.is_dataclass(node)
            and not issubclass(node, BaseModel | enum.Enum)
            and not typing_extensions.is_typeddict(node)
            and not hasattr(node, "__get_pydantic_core_schema__")
        ):
            return node
    return None


def build_output(returns: Any, kind: ToolKind, warnings: list[str]) -> dict[str, Any] | None:
    """The output schema of the return type; non-objects are wrapped as ``{"result": ...}``.

    A return type without a JSON form leaves the tool without an output schema
    (its results are still rendered as text) and adds a warning.
    """
    if returns is _EMPTY or returns is _UNRESOLVED or returns in _NONE_TYPES or returns is Any:
        return None
    if kind in ("generator", "async_generator"):
        return None  # streamed output has no single structured value
    simple = simple_schema(returns, _same_json_kind)
    schema = simple[0] if simple is not None else None
    if schema is None:
        try:
            raw = TypeAdapter(returns).json_schema(
                mode="serialization", schema_generator=_SchemaGenerator
            )
        except Exception as exc:  # noqa: BLE001 - reported as a warning
            reason = _explain_type_error(returns, exc).split(";")[0]
            warnings.append(
                f"the return annotation cannot be described as JSON ({reason}); "
                "the tool has no output schema"
            )
            return None
        schema = canonicalize(raw)
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def _with_attribute_docs(schema: Any, cls: Any) -> Any:
    """``schema`` with each undescribed property described by its attribute docstring."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not properties or not inspect.isclass(cls):
        return schema
    for name, text in attribute_docs(cls).items():
        prop = properties.get(name)
        if isinstance(prop, dict) and "description" not in prop:
            prop["description"] = text
    return schema


def attribute_docs(cls: type) -> dict[str, str]:
    """``{attribute: docstring}`` from the string literals that follow annotated attributes
    in the class bodies of ``cls`` and its bases (the convention PEP 257 names)."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        module = sys.modules.get(klass.__module__)
        filename = getattr(module, "__file__", None)
        if module is None or not isinstance(filename, str) or klass.__module__ in _NO_DOCS:
            continue
        source = "".join(linecache.getlines(filename, module.__dict__))
        found.update(_documented_attributes(source).get(klass.__qualname__, {}))
    return found


_NO_DOCS = frozenset({"builtins", "typing", "typing_extensions", "pydantic.main"})


@functools.lru_cache(maxsize=32)
def _documented_attributes(source: str) -> dict[str, dict[str, str]]:
    """Attribute docstrings of every class in a module, by qualified name: one parse per
    source text, shared by all the tools and models of a plugin."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, dict[str, str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                docs = {
                    statement.target.id: _one_line(inspect.cleandoc(after.value.value))
                    for statement, after in itertools.pairwise(node.body)
                    if isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                }
                found[prefix + node.name] = docs
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, f"{prefix}{node.name}.<locals>.")

    visit(tree.body, "")
    return found


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
