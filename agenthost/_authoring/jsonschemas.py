"""Hand-written JSON Schemas, checked so that a hostile schema or value cannot stall the host.

``jsonschema`` on its own follows a ``$ref`` to any URL or file (it reads them
as the host) and matches ``pattern`` with Python's ``re``, which backtracks:
``^(a+)+$`` against thirty characters holds the interpreter for minutes, and a
worker's schema or a model's argument chooses both. So a schema may refer only
inside itself, validators are built on an empty registry (nothing is fetched),
and patterns are matched by RE2, in time linear in the text and within
:data:`PATTERN_MEMORY` each (Rust's regex engine, as linear, took 12 MB for
``(?:\\w|\\d){0,200}``, so a few hundred patterns in a worker's schema
exhausted the host). RE2's ``\\d`` and ``\\w`` are ASCII, as in the ECMA-262
dialect JSON Schema names. A pattern RE2 cannot compile
(look-around, back-references, too large) is matched by ``re`` only when the
schema is trusted: agenthost's own published patterns or an in-process tool's;
:func:`untrusted_problem` refuses it in a worker's schema, as it refuses more
than :data:`MAX_PATTERNS` patterns in one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from agenthost._authoring.formats import format_checker, is_ours

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "MAX_PATTERNS",
    "PATTERN_MEMORY",
    "patterns",
    "reference_problem",
    "search",
    "untrusted_problem",
    "validator",
]

_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
PATTERN_MEMORY = 2**20  # bytes RE2 may use for one pattern, its automata included
MAX_PATTERNS = 64  # patterns in one schema from a worker


def validator(schema: Mapping[str, Any], *, formats: bool = True) -> jsonschema.protocols.Validator:
    """A validator for ``schema`` (formats asserted unless ``formats`` is false) that
    fetches nothing and matches patterns in linear time."""
    import jsonschema  # on first use: see format_checker()
    import referencing

    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = _linear(base)
    checker = format_checker() if formats else None
    made: jsonschema.protocols.Validator = cls(
        schema, format_checker=checker, registry=referencing.Registry()
    )
    return made


@functools.cache
def _linear(base: type[jsonschema.protocols.Validator]) -> type[jsonschema.protocols.Validator]:
    """``base`` with the keywords that match patterns matching them with :func:`search`."""
    import jsonschema

    keywords: dict[str, Callable[..., Iterator[Any]]] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
    }
    if "additionalProperties" in base.VALIDATORS:
        keywords["additionalProperties"] = functools.partial(
            _additional_properties, base.VALIDATORS["additionalProperties"]
        )
    extended: type[jsonschema.protocols.Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, keywords
    )
    return extended


# The keywords' signature is jsonschema's: (validator, keyword value, instance, schema).
def _pattern(validator: Any, expected: str, instance: Any, schema: Any) -> Iterator[Any]:
    import jsonschema

    if validator.is_type(instance, "string") and not search(expected, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {expected!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for expected, subschema in patterns.items():
        for key, value in instance.items():
            if search(expected, key):
                yield from validator.descend(value, subschema, path=key, schema_path=expected)


def _additional_properties(
    usual: Callable[..., Iterator[Any]], validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    import jsonschema

    if "patternProperties" not in schema or not validator.is_type(instance, "object"):
        yield from usual(validator, allowed, instance, schema)
        return
    named = schema.get("properties", {})
    patterns = list(schema["patternProperties"])
    extras = [k for k in instance if k not in named and not any(search(p, k) for p in patterns)]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        shown = ", ".join(repr(k) for k in sorted(extras))
        verb = "does" if len(extras) == 1 else "do"
        regexes = ", ".join(repr(p) for p in sorted(patterns))
        yield jsonschema.ValidationError(f"{shown} {verb} not match any of the regexes: {regexes}")


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``, as JSON Schema's ``pattern`` asks
    (text with a lone surrogate, which RE2 cannot hold, matches nothing)."""
    linear = _re2(pattern)
    if linear is None:
        return re.search(pattern, text) is not None  # trusted: see the module docstring
    try:
        return linear.search(text) is not None
    except UnicodeEncodeError:
        return False


@functools.lru_cache(maxsize=256)
def _re2(pattern: str) -> Any:
    """``pattern`` compiled by RE2 within :data:`PATTERN_MEMORY`, or None if it cannot be."""
    import re2  # type: ignore[import-untyped]  # untyped binding

    options = re2.Options()
    options.max_mem, options.log_errors = PATTERN_MEMORY, False
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return None


def reference_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` may not be used: a reference that leads out of it, or nowhere."""
    nested_ids = False
    for node, depth in _nodes(schema):
        nested_ids |= depth > 0 and "$id" in node
        for keyword in _REFERENCES:
            target = node.get(keyword)
            if isinstance(target, str) and not target.startswith("#"):
                return (
                    f"{keyword} {target[:100]!r} refers outside the schema; only references "
                    "inside it (#/$defs/...) are followed: copy the definition into $defs"
                )
    if nested_ids:
        return None  # references are relative to the nearest $id: left to the validator
    return _dangling(schema)


def _dangling(schema: Mapping[str, Any]) -> str | None:
    import referencing.exceptions
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012, specification_with

    dialect = schema.get("$schema")
    spec = specification_with(dialect if isinstance(dialect, str) else "", default=DRAFT202012)
    resolver = Registry().with_resource("", spec.create_resource(schema)).resolver()
    for node, _ in _nodes(schema):
        target = node.get("$ref")
        if isinstance(target, str):
            try:
                resolver.lookup(target)
            except referencing.exceptions.Unresolvable:
                return f"$ref {target[:100]!r} points to nothing in the schema"
    return None


def untrusted_problem(schema: Mapping[str, Any]) -> str | None:
    """Why a schema from outside the host (a worker's) may not be used: a pattern the
    linear engine cannot match (``re`` could backtrack for minutes), or too many."""
    found = patterns(schema)
    if len(found) > MAX_PATTERNS:
        return f"it holds {len(found):,} patterns; a tool in a worker may have {MAX_PATTERNS}"
    for pattern in found:
        if not _linear_or_ours(pattern):
            return (
                f"pattern {pattern[:100]!r} cannot be matched in linear time (look-around, "
                "back-references, or too large), which the host requires of a tool in a "
                "worker; write it without them"
            )
    keywords = {keyword for node, _ in _nodes(schema) for keyword in node}
    if {"patternProperties", "unevaluatedProperties"} <= keywords:
        return (
            "patternProperties with unevaluatedProperties is not checked for a tool in a "
            "worker; use additionalProperties"
        )
    return None


def patterns(schema: Mapping[str, Any]) -> list[str]:
    """The regular expressions in ``schema`` (``pattern``, ``patternProperties``)."""
    found = []
    for node, _ in _nodes(schema):
        if isinstance(node.get("pattern"), str):
            found.append(node["pattern"])
        if isinstance(node.get("patternProperties"), Mapping):
            found += [p for p in node["patternProperties"] if isinstance(p, str)]
    return found


def _linear_or_ours(pattern: str) -> bool:
    return _re2(pattern) is not None or is_ours(pattern)


def _nodes(schema: Any, depth: int = 0) -> Iterator[tuple[Mapping[str, Any], int]]:
    """Every subschema, with how deep it is; values that are data (``const``, ``enum``,
    ``default``, ``examples``) are not looked into."""
    if isinstance(schema, Mapping):
        yield schema, depth
        for key, value in schema.items():
            if key not in _DATA:
                yield from _nodes(value, depth + 1)
    elif isinstance(schema, (list, tuple)):
        for value in schema:
            yield from _nodes(value, depth + 1)


_DATA = frozenset({"const", "enum", "default", "examples", "example"})
