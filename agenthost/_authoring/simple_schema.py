"""Schemas for simple signatures without pydantic's (slow, Python-side) schema generator.

Most tools take strings, numbers, booleans, literals, optionals and lists of
those. For such parameters the JSON Schema is a few dict literals and the
pydantic-core validator can be assembled directly from ``core_schema``
builders, which is several times faster than ``TypeAdapter`` and matters when a
host loads thousands of tools. Anything else (models, enums, dataclasses,
datetimes, constraints...) returns None and goes through pydantic.

The validator these builders make reads the *parsed* JSON object (see
``validation``), strictly, except that a JSON array may fill a set or tuple.
Tests assert that, for every type handled here, the schema is identical to
the one pydantic generates and that both validators accept the same inputs.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema
from pydantic_core import core_schema as cs

__all__ = ["SimpleSchema", "simple_schema"]

SimpleSchema = tuple[dict[str, Any], CoreSchema]

_SCALARS: dict[Any, Callable[[], SimpleSchema]] = {
    str: lambda: ({"type": "string"}, cs.str_schema()),
    bool: lambda: ({"type": "boolean"}, cs.bool_schema()),
    int: lambda: ({"type": "integer"}, cs.int_schema()),
    # 1e400 is valid JSON that Python reads as inf: a float parameter refuses it
    float: lambda: ({"type": "number"}, cs.float_schema(allow_inf_nan=False)),
    None: lambda: ({"type": "null"}, cs.none_schema()),
    type(None): lambda: ({"type": "null"}, cs.none_schema()),
    Any: lambda: ({}, cs.any_schema()),
    list: lambda: ({"type": "array", "items": {}}, cs.list_schema(cs.any_schema())),
    dict: lambda: (
        {"type": "object", "additionalProperties": True},
        cs.dict_schema(cs.str_schema(), cs.any_schema()),
    ),
}
_LITERAL_TYPES = {str: "string", int: "integer", bool: "boolean"}


def simple_schema(
    annotation: Any, guard: Callable[[list[Any]], Callable[[Any], Any]]
) -> SimpleSchema | None:
    """JSON Schema and core schema of ``annotation``, or None if it is not simple.

    ``guard`` wraps number and boolean literals so that ``true`` is not ``1``.
    """
    description = None
    if typing.get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if not _only_description(meta):
                return None
            description = meta.description
        annotation = annotation.__origin__
    found = _simple(annotation, guard)
    if found is None or description is None:
        return found
    return {**found[0], "description": description}, found[1]


def _only_description(meta: object) -> bool:
    if not isinstance(meta, FieldInfo) or meta.metadata:
        return False
    explicitly_set = getattr(meta, "_attributes_set", None)
    return isinstance(explicitly_set, dict) and explicitly_set.keys() <= {"description"}


def _simple(tp: Any, guard: Callable[[list[Any]], Callable[[Any], Any]]) -> SimpleSchema | None:
    try:
        scalar = _SCALARS.get(tp)
    except TypeError:  # an unhashable annotation
        return None
    if scalar is not None:
        return scalar()
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return _literal(list(args), guard)
    if origin in (typing.Union, types.UnionType):
        return _union(args, guard)
    if origin in (list, set, frozenset) and len(args) == 1:
        item = _simple(args[0], guard)
        if item is None:
            return None
        if origin is list:
            return {"type": "array", "items": item[0]}, cs.list_schema(item[1])
        # Validated from a parsed JSON list: the container is read leniently, its items strictly.
        builder = cs.set_schema if origin is set else cs.frozenset_schema
        return {"type": "array", "items": item[0]}, builder(item[1], strict=False)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _simple(args[0], guard)
        if item is None:
            return None
        return {"type": "array", "items": item[0]}, cs.tuple_schema(
            [item[1]], variadic_item_index=0, strict=False
        )
    if origin is dict and len(args) == 2 and args[0] is str:
        value = _simple(args[1], guard)
        if value is None:
            return None
        return (
            {"type": "object", "additionalProperties": value[0] or True},
            cs.dict_schema(cs.str_schema(), value[1]),
        )
    return None


def _literal(
    values: list[Any], guard: Callable[[list[Any]], Callable[[Any], Any]]
) -> SimpleSchema | None:
    kinds = {type(v) for v in values}
    if len(kinds) != 1 or next(iter(kinds)) not in _LITERAL_TYPES:
        return None
    kind = _LITERAL_TYPES[next(iter(kinds))]
    js: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": values}
    js["type"] = kind
    core: CoreSchema = cs.literal_schema(values)
    if kind != "string":
        core = cs.no_info_before_validator_function(guard(values), core)
    return js, core


def _union(
    members: tuple[Any, ...], guard: Callable[[list[Any]], Callable[[Any], Any]]
) -> SimpleSchema | None:
    found = [_simple(member, guard) for member in members if member not in (None, type(None))]
    if any(f is None for f in found) or not found:
        return None
    parts = typing.cast(list[SimpleSchema], found)
    nullable = len(parts) < len(members)
    js = [p[0] for p in parts] + ([{"type": "null"}] if nullable else [])
    core = parts[0][1] if len(parts) == 1 else cs.union_schema([p[1] for p in parts])
    return {"anyOf": js}, cs.nullable_schema(core) if nullable else core
