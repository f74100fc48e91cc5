"""Argument validators: a call's raw JSON in, the tool's keyword arguments out.

This is on the hot path of every call, so the common case is one compiled
pydantic-core validation of the JSON text, in strict mode (no "1" for an
integer, no 1 for a boolean) so that it accepts what the published schema
accepts. Two JSON facts strict mode would otherwise get wrong are repaired on
the failure path only, so they cost nothing when arguments are right:

* ``1.0`` is an integer in JSON Schema; pydantic's strict int refuses it.
* ``null`` for a parameter that has a default means "use the default": OpenAI
  strict mode can only express an optional parameter as nullable.

Hand-written schemas (programmatic and definition-only tools) are validated
with ``jsonschema`` instead, which is slower but exact for any schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
from pydantic import ValidationError
from pydantic_core import SchemaValidator

from agenthost._errors import ArgumentProblem, InvalidArgumentsError

__all__ = [
    "ArgumentValidator",
    "JsonSchemaArgumentValidator",
    "PydanticArgumentValidator",
    "RawArguments",
    "json_path",
]

RawArguments = str | bytes | bytearray | Mapping[str, Any] | None

_MISSING_TYPES = frozenset({"missing", "missing_argument", "missing_keyword_only_argument"})
_EXTRA_TYPES = frozenset({"unexpected_keyword_argument", "extra_forbidden"})


class ArgumentValidator:
    """Validates the arguments of one tool; built once, used for every call."""

    __slots__ = ("tool",)

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        """Return the validated keyword arguments or raise :class:`InvalidArgumentsError`."""
        raise NotImplementedError

    def _fail(self, path: str, message: str, kind: str) -> InvalidArgumentsError:
        return InvalidArgumentsError(self.tool, [ArgumentProblem(path, message, kind)])

    def _as_json(self, arguments: RawArguments) -> str | bytes | bytearray:
        """The arguments as JSON text that starts with ``{``, or an error."""
        if type(arguments) is str and arguments[:1] == "{":
            return arguments  # the common case, without copies
        if isinstance(arguments, str | bytes | bytearray):
            text = arguments.strip()
            if not text:
                return "{}"  # models send "" for tools without parameters
            if text[:1] not in ("{", b"{"):
                raise self._fail("$", "arguments must be a JSON object", "object_type")
            return arguments
        if arguments is None:
            return "{}"
        if isinstance(arguments, Mapping):
            try:
                return json.dumps(arguments, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise self._fail(
                    "$", f"arguments are not JSON values: {exc}", "json_type"
                ) from None
        raise self._fail(
            "$",
            f"arguments must be a JSON object string or a dict, not {type(arguments).__name__}",
            "object_type",
        )


class PydanticArgumentValidator(ArgumentValidator):
    """Validation through a compiled pydantic-core validator of the tool's signature."""

    __slots__ = ("_parameters", "_schema", "_validator")

    def __init__(self, tool: str, validator: SchemaValidator, schema: Mapping[str, Any]) -> None:
        super().__init__(tool)
        self._validator = validator
        self._schema = schema
        self._parameters = tuple(schema.get("properties") or ())

    @property
    def compiled(self) -> SchemaValidator:
        """The pydantic-core validator; ``validate_json(text, strict=True)`` is the fast path."""
        return self._validator

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        if type(arguments) is str and arguments[:1] == "{":
            data: str | bytes | bytearray = arguments  # the common case, checked inline
        else:
            data = self._as_json(arguments)
        try:
            result: dict[str, Any] = self._validator.validate_json(data, strict=True)
        except ValidationError as error:
            return self._validate_after_failure(data, error)
        return result

    def _validate_after_failure(
        self, data: str | bytes | bytearray, error: ValidationError
    ) -> dict[str, Any]:
        errors = error.errors(include_url=False)
        parsed = _loads_object(data)
        if parsed is not None:
            repaired = _repair(parsed, errors, self._schema)
            if repaired is not None:
                try:
                    result: dict[str, Any] = self._validator.validate_json(
                        json.dumps(repaired), strict=True
                    )
                except ValidationError:
                    pass
                else:
                    return result
        raise InvalidArgumentsError(self.tool, self._problems(errors, parsed))

    def _problems(self, errors: list[Any], parsed: Any) -> list[ArgumentProblem]:
        merged: dict[str, list[str]] = {}
        kinds: dict[str, str] = {}
        for err in errors:
            steps = _data_steps(parsed, err["loc"]) if parsed is not None else list(err["loc"])
            path = json_path(steps)
            message = self._message(err, len(steps))
            if message not in merged.setdefault(path, []):
                merged[path].append(message)
            kinds.setdefault(path, err["type"])
        return [
            ArgumentProblem(path, " | ".join(msgs), kinds[path]) for path, msgs in merged.items()
        ]

    def _message(self, err: Mapping[str, Any], depth: int) -> str:
        kind = err["type"]
        if kind == "json_invalid":
            return f"invalid JSON: {err.get('ctx', {}).get('error', err['msg'])}"
        if kind in _MISSING_TYPES:
            return "missing required argument" if depth == 1 else "missing required field"
        if kind in _EXTRA_TYPES:
            if depth == 1:
                accepted = ", ".join(self._parameters) or "none"
                return f"unexpected argument (this tool accepts: {accepted})"
            return "unexpected field"
        message = str(err["msg"])
        value = err.get("input")
        if not isinstance(value, dict | list):
            shown = json.dumps(value, default=repr)
            message += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
        return message


class JsonSchemaArgumentValidator(ArgumentValidator):
    """Validation against a hand-written JSON Schema with ``jsonschema`` (formats asserted)."""

    __slots__ = ("_validator",)

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        super().__init__(tool)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        self._validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        data = self._as_json(arguments)
        try:
            parsed = json.loads(data)
        except ValueError as exc:
            raise self._fail("$", f"invalid JSON: {exc}", "json_invalid") from None
        if not isinstance(parsed, dict):
            raise self._fail("$", "arguments must be a JSON object", "object_type")
        errors = sorted(self._validator.iter_errors(parsed), key=lambda e: list(e.absolute_path))
        if errors:
            problems = [
                ArgumentProblem(json_path(list(e.absolute_path)), e.message, str(e.validator))
                for e in errors
            ]
            raise InvalidArgumentsError(self.tool, problems)
        return parsed


def json_path(steps: list[Any] | tuple[Any, ...]) -> str:
    """``['items', 2, 'name']`` -> ``$.items[2].name``."""
    out = "$"
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        elif isinstance(step, str) and step.isidentifier():
            out += f".{step}"
        else:
            out += f"[{json.dumps(str(step))}]"
    return out


def _loads_object(data: str | bytes | bytearray) -> dict[str, Any] | None:
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _data_steps(data: Any, loc: tuple[Any, ...]) -> list[Any]:
    """The steps of ``loc`` that address real data, without pydantic's union-member tags.

    A key absent from the data is a real step only at the end of ``loc`` (a
    missing field); anywhere else it is a tag such as ``'int'`` or ``'Address'``.
    """
    steps: list[Any] = []
    node = data
    last = len(loc) - 1
    for index, step in enumerate(loc):
        if isinstance(node, dict) and isinstance(step, str) and (step in node or index == last):
            steps.append(step)
            node = node.get(step)
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            steps.append(step)
            node = node[step]
    return steps


def _repair(
    data: dict[str, Any], errors: list[Any], schema: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Apply the two JSON-equivalence repairs to a copy; None when neither applies."""
    nulls = [
        steps
        for err in errors
        if err.get("input", 0) is None and err["type"] not in _EXTRA_TYPES
        for steps in [_data_steps(data, err["loc"])]
        if _is_optional_property(schema, steps)
    ]
    floats = any(
        isinstance(err.get("input"), float) and err["input"].is_integer() for err in errors
    )
    if not nulls and not floats:
        return None
    fixed: dict[str, Any] = _copy_json(data, floats)
    for steps in nulls:
        parent: Any = fixed
        for step in steps[:-1]:
            parent = parent[step]
        if steps and isinstance(parent, dict) and parent.get(steps[-1], 0) is None:
            del parent[steps[-1]]
    return fixed


def _is_optional_property(schema: Mapping[str, Any], steps: list[Any]) -> bool:
    """Whether ``steps`` ends at a declared, non-required property (not at a dict value)."""
    defs = schema.get("$defs") or {}
    nodes = [schema]
    for index, step in enumerate(steps):
        found = None
        for node in _branches(nodes, defs):
            if isinstance(step, str) and step in (node.get("properties") or {}):
                if index == len(steps) - 1:
                    return step not in (node.get("required") or ())
                found = node["properties"][step]
                break
            if isinstance(step, int) and isinstance(node.get("items"), Mapping):
                found = node["items"]
                break
            if isinstance(step, int) and step < len(node.get("prefixItems") or ()):
                found = node["prefixItems"][step]
                break
        if found is None:
            return False
        nodes = [found]
    return False


def _branches(nodes: list[Mapping[str, Any]], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``nodes`` with ``$ref`` resolved and ``anyOf``/``oneOf`` branches flattened."""
    out: list[Mapping[str, Any]] = []
    pending = list(nodes)
    while pending and len(out) < 64:
        node = pending.pop(0)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            pending.append(defs.get(ref[len("#/$defs/") :], {}))
            continue
        out.append(node)
        pending.extend(node.get("anyOf") or node.get("oneOf") or ())
    return out


def _copy_json(value: Any, integral_floats_to_ints: bool) -> Any:
    if integral_floats_to_ints and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _copy_json(v, integral_floats_to_ints) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v, integral_floats_to_ints) for v in value]
    return value
