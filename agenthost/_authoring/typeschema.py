"""From parameter and return types to JSON Schemas and a compiled argument validator.

The schema and the validator come from one pydantic object, so they cannot
drift apart: a keyword-only stand-in function carries the tool's parameters
(without injected ones, with docstring descriptions folded into
``Annotated[..., Field(description=...)]``), and ``TypeAdapter`` of that
stand-in yields both the JSON Schema and a validator whose result is the
keyword-argument dict itself. Signatures made only of simple types skip
pydantic's schema generator (see ``simple_schema``).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import typing
import weakref
from typing import Any, Literal, NamedTuple, cast

import pydantic_core
import typing_extensions
from pydantic import BaseModel, PydanticUserError, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import CoreConfig, SchemaValidator
from pydantic_core import core_schema as cs

from agenthost._authoring.annotations import strip_annotated, type_name
from agenthost._authoring.docstrings import attribute_docs
from agenthost._authoring.formats import DECIMAL_PATTERN, DURATION_PATTERN, url_pattern
from agenthost._authoring.guards import guarded, same_json_kind
from agenthost._authoring.schema import canonicalize
from agenthost._authoring.simple_schema import simple_schema
from agenthost._errors import DefinitionProblem

__all__ = ["Built", "build_input", "build_output"]

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

    # What the validator requires beyond the format, published as a pattern (see formats).
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


class Built(NamedTuple):
    """An input schema and the validator that accepts exactly what it says."""

    schema: dict[str, Any]
    validator: SchemaValidator
    python: bool  # the validator takes the parsed JSON value (else the JSON text)
    recheck: bool = False  # some positions need the schema itself checked (see guarded)


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
    core, changed = guarded(adapter.core_schema, hidden)
    validator = SchemaValidator(core) if changed else adapter.validator
    return Built(canonicalize(schema), validator, False, hidden[0])  # type: ignore[arg-type]


def _build_simple(parameters: list[inspect.Parameter]) -> Built | None:
    """The fast path for signatures made only of simple types (see ``simple_schema``).

    The validator is a strict typed dict over the parsed JSON object: for these
    types strict Python validation of a JSON value decides exactly as strict
    JSON validation does, and skips parsing the text a second time.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    fields: dict[str, cs.TypedDictField] = {}
    for param in parameters:
        found = simple_schema(param.annotation, same_json_kind)
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
    return f"type {type_name(annotation)} is not supported ({first_line})"


def _plain_class(annotation: Any) -> type | None:
    stack = [annotation]
    while stack:
        node = strip_annotated(stack.pop())
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


def build_output(returns: Any, kind: str, warnings: list[str]) -> dict[str, Any] | None:
    """The output schema of the return type; non-objects are wrapped as ``{"result": ...}``.

    A return type without a JSON form leaves the tool without an output schema
    (its results are still rendered as text) and adds a warning.
    """
    if returns is _EMPTY or returns in _NONE_TYPES or returns is Any:
        return None
    if kind in ("generator", "async_generator"):
        return None  # streamed output has no single structured value
    simple = simple_schema(returns, same_json_kind)
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
