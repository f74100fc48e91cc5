"""Small, pure helpers over JSON Schema documents (dicts in, new dicts out).

Every transform here copies; none mutates its input, so a schema can be shared
between a definition and all the exports derived from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

__all__ = [
    "DEFS_PREFIX",
    "MAX_INLINED",
    "admits_null",
    "breaking_changes",
    "canonicalize",
    "map_subschemas",
    "recursive_definitions",
    "ref_name",
]

JsonSchema = dict[str, Any]

DEFS_PREFIX = "#/$defs/"
_MAP_KEYWORDS = ("properties", "patternProperties", "dependentSchemas", "$defs")
_SINGLE_KEYWORDS = (
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
# Keywords dropped from canonical schemas: ``title`` is noise for models, and
# ``uniqueItems`` is what pydantic emits for sets, whose validator merges
# duplicates instead of rejecting them (the schema must accept what we accept).
_DROPPED = frozenset({"title", "uniqueItems"})


def map_subschemas(node: Mapping[str, Any], fn: Callable[[Any], Any]) -> JsonSchema:
    """A shallow copy of ``node`` with ``fn`` applied to every direct subschema."""
    out: JsonSchema = {}
    for key, value in node.items():
        if key in _MAP_KEYWORDS and isinstance(value, Mapping):
            out[key] = {name: fn(sub) for name, sub in value.items()}
        elif key in _SINGLE_KEYWORDS and isinstance(value, Mapping):
            out[key] = fn(value)
        elif key in _LIST_KEYWORDS and isinstance(value, list):
            out[key] = [fn(sub) for sub in value]
        else:
            out[key] = value
    return out


def ref_name(ref: object) -> str | None:
    """The definition name of a local ``#/$defs/Name`` reference."""
    if isinstance(ref, str) and ref.startswith(DEFS_PREFIX):
        return ref[len(DEFS_PREFIX) :]
    return None


def _refs_in(node: Any, found: set[str]) -> set[str]:
    if isinstance(node, Mapping):
        name = ref_name(node.get("$ref"))
        if name is not None:
            found.add(name)
        for value in node.values():
            _refs_in(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs_in(value, found)
    return found


def recursive_definitions(defs: Mapping[str, Any]) -> frozenset[str]:
    """Names of the definitions that can reach themselves through ``$ref`` (cycles)."""
    edges = {name: _refs_in(schema, set()) & set(defs) for name, schema in defs.items()}
    cyclic: set[str] = set()
    for start in edges:
        stack, seen = list(edges[start]), set()
        while stack:
            name = stack.pop()
            if name == start:
                cyclic.add(start)
                break
            if name not in seen:
                seen.add(name)
                stack.extend(edges.get(name, ()))
    return frozenset(cyclic)


def canonicalize(schema: Mapping[str, Any]) -> JsonSchema:
    """Inline every non-recursive ``$defs`` entry and drop noise keywords.

    Recursive definitions cannot be inlined; they stay under ``$defs`` and are
    referenced with ``$ref`` (providers that reject recursion are told so by the
    compatibility check).
    """
    defs: Mapping[str, Any] = schema.get("$defs") or {}
    keep = recursive_definitions(defs)
    if _inlined_size(schema, defs, keep) > MAX_INLINED:
        keep = frozenset(
            defs
        )  # definitions that refer to each other twice over double at each step

    def walk(node: Any) -> Any:
        if not isinstance(node, Mapping):
            return node
        name = ref_name(node.get("$ref"))
        if name is not None and name in defs and name not in keep:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return {**walk(defs[name]), **walk(siblings)}
        cleaned = {k: v for k, v in node.items() if k not in _DROPPED and k != "$defs"}
        return map_subschemas(cleaned, walk)

    out = walk(schema)
    if keep:
        out["$defs"] = {name: walk(defs[name]) for name in sorted(keep)}
    return out  # type: ignore[no-any-return]


MAX_INLINED = 20_000  # nodes a schema may grow to when its definitions are inlined


def _inlined_size(
    schema: Mapping[str, Any], defs: Mapping[str, Any], keep: AbstractSet[str]
) -> int:
    """How many nodes ``schema`` has once its non-recursive definitions are inlined,
    counted without inlining (each definition's size once)."""
    sizes: dict[str, int] = {}

    def size(node: Any) -> int:
        if isinstance(node, Mapping):
            name = ref_name(node.get("$ref"))
            if name is not None and name in defs and name not in keep:
                if name not in sizes:
                    sizes[name] = 0  # a cycle the recursion check missed counts as nothing
                    sizes[name] = size(defs[name])
                return sizes[name] + sum(size(v) for k, v in node.items() if k != "$ref")
            return 1 + sum(size(v) for k, v in node.items() if k != "$defs")
        if isinstance(node, list | tuple):
            return 1 + sum(map(size, node))
        return 1

    return size(schema)


def admits_null(schema: Mapping[str, Any]) -> bool:
    """Whether ``null`` is obviously a valid instance (nullable type, anyOf or enum)."""
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    if None in (schema.get("enum") or ()):
        return True
    variants = schema.get("anyOf") or schema.get("oneOf") or ()
    return any(isinstance(v, Mapping) and admits_null(v) for v in variants)


_ANNOTATION_KEYS = frozenset({"description", "title", "default", "examples", "deprecated"})


def breaking_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why arguments valid for ``old`` may be refused by ``new`` (empty: a compatible change).

    Compatible: a new optional parameter, a parameter becoming optional, new
    enum values, changed descriptions or defaults. Anything else that touches a
    parameter's schema is reported.
    """
    reasons = []
    old_props, new_props = old.get("properties") or {}, new.get("properties") or {}
    old_required, new_required = set(old.get("required") or ()), set(new.get("required") or ())
    for name in old_props.keys() - new_props.keys():
        reasons.append(f"parameter '{name}' was removed")
    for name in sorted(new_required - old_required):
        reasons.append(f"parameter '{name}' is now required")
    for name in old_props.keys() & new_props.keys():
        before, after = _without_annotations(old_props[name]), _without_annotations(new_props[name])
        if before == after:
            continue
        old_enum, new_enum = before.pop("enum", None), after.pop("enum", None)
        widened = old_enum is not None and new_enum is not None
        if widened and before == after and set(map(repr, old_enum)) <= set(map(repr, new_enum)):
            continue
        reasons.append(f"parameter '{name}' changed type")
    if (old.get("$defs") or {}) != (new.get("$defs") or {}):
        reasons.append("a recursive model changed")
    return reasons


def _without_annotations(schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    kept = {key: value for key, value in schema.items() if key not in _ANNOTATION_KEYS}
    return map_subschemas(kept, _without_annotations)
