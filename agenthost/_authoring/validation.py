"""Argument validators: a call's raw JSON in, the tool's keyword arguments out.

Arguments come from a model or an MCP client, so they are read as strict JSON
first, once, with jiter (pydantic-core's own parser): an object whose keys are
unique (two parsers that keep different duplicates are an attack vector), no
``NaN`` or ``Infinity``, at most :data:`NESTING_LIMIT` levels of objects and
arrays inside the arguments object, numbers of at most 4,300 digits. A dict
passed by Python code is written as JSON text first and read the same way.

Then the tool's compiled pydantic-core validator checks the value in strict
mode (no ``"1"`` for an integer, no ``1`` for a boolean), which accepts what
the published schema accepts. Simple signatures (see ``simple_schema``) validate
the parsed value directly; others validate the JSON text, which pydantic's
datetime and model parsing need.

Two JSON facts strict mode would otherwise get wrong are repaired on the
failure path only, so they cost nothing when arguments are right, and only
where the schema says so:

* ``2.0`` is an integer in JSON Schema; pydantic's strict int refuses it.
* ``null`` for a parameter that has a default means "use the default": OpenAI
  strict mode can only express an optional parameter as nullable.

An error lists the first :data:`MAX_LISTED` problems by JSON path and counts
the rest. Hand-written schemas are validated with ``jsonschema`` instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jiter
from pydantic import ValidationError
from pydantic_core import SchemaValidator

from agenthost._authoring import jsonschemas
from agenthost._common.text import clip, type_name
from agenthost._errors import ArgumentProblem, InvalidArgumentsError

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "MAX_LISTED",
    "NESTING_LIMIT",
    "ArgumentValidator",
    "JsonSchemaArgumentValidator",
    "PydanticArgumentValidator",
    "RawArguments",
    "SimpleArgumentValidator",
    "json_path",
]

RawArguments = str | bytes | bytearray | Mapping[str, Any] | None

NESTING_LIMIT = 200  # levels of objects and arrays inside the arguments object (jiter's own)
MAX_LISTED = 10  # problems an error lists; the rest are counted
_MAX_MESSAGE = 300  # characters of one problem's message
_MAX_STEP = 40  # characters of one key in a JSON path

_from_json = jiter.from_json


def _read(raw: bytes) -> Any:
    """Strict JSON: unique keys, no NaN or Infinity, jiter's nesting and number limits."""
    return _from_json(raw, catch_duplicate_keys=True, allow_inf_nan=False, cache_mode="keys")


_MISSING_TYPES = frozenset({"missing", "missing_argument", "missing_keyword_only_argument"})
_EXTRA_TYPES = frozenset({"unexpected_keyword_argument", "extra_forbidden"})
_INT_TYPES = frozenset({"int_type", "int_from_float"})
# pydantic words these in Python terms when it validates a parsed value; a model reads JSON.
_JSON_WORDING = {
    "list_type": "Input should be a valid array",
    "tuple_type": "Input should be a valid array",
    "set_type": "Input should be a valid array",
    "frozen_set_type": "Input should be a valid array",
    "dict_type": "Input should be an object",
    "none_required": "Input should be null",
}


class ArgumentValidator:
    """Validates the arguments of one tool; built once, used for every call."""

    __slots__ = ("tool",)

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        """Return the validated keyword arguments or raise :class:`InvalidArgumentsError`."""
        raise NotImplementedError

    def _fail(self, message: str, kind: str, path: str = "$") -> InvalidArgumentsError:
        return InvalidArgumentsError(self.tool, [ArgumentProblem(path, message, kind)])

    def read(self, arguments: RawArguments) -> tuple[dict[str, Any], bytes]:
        """The arguments as a JSON object, and the JSON text it was read from."""
        if isinstance(arguments, str):
            try:
                raw = arguments.encode()
            except UnicodeEncodeError:
                raise self._fail("arguments are not valid Unicode text", "json_invalid") from None
        elif isinstance(arguments, bytes | bytearray):
            raw = bytes(arguments)
        elif arguments is None:
            return {}, b"{}"
        elif isinstance(arguments, Mapping):
            raw = self._written(arguments)
        else:
            raise self._fail(
                f"arguments must be a JSON object string or a dict, not {type_name(arguments)}",
                "object_type",
            )
        try:
            parsed = _read(raw)
        except ValueError as exc:
            if not raw.strip():
                return {}, b"{}"  # models send "" for tools without parameters
            raise self._unreadable(raw, exc) from None
        if type(parsed) is not dict:
            raise self._fail("arguments must be a JSON object", "object_type")
        return parsed, raw

    def _written(self, arguments: Mapping[str, Any]) -> bytes:
        """A dict from Python code, as the JSON text a model would have sent."""
        try:
            return json.dumps(arguments, allow_nan=False).encode()
        except RecursionError:
            raise self._too_deep() from None
        except ValueError as exc:
            if "Out of range float" in str(exc):
                raise self._non_finite() from None
            raise self._fail(f"arguments are not JSON values: {exc}", "json_type") from None
        except TypeError as exc:
            raise self._fail(f"arguments are not JSON values: {exc}", "json_type") from None

    def _unreadable(self, raw: bytes, exc: ValueError) -> InvalidArgumentsError:
        reason = str(exc)
        if reason.startswith("recursion limit exceeded"):
            return self._too_deep()
        if reason.startswith("Detected duplicate key"):
            return self._fail(
                f"invalid JSON: {reason}; an object must not repeat a key", "json_duplicate_key"
            )
        if "hex escape" in reason:  # jiter's words for a lone surrogate written as \uXXXX
            reason += " (a lone surrogate is not valid Unicode text)"
        try:
            jiter.from_json(raw, allow_inf_nan=True, cache_mode=False)
        except ValueError:
            return self._fail(f"invalid JSON: {reason}", "json_invalid")
        return self._non_finite()  # readable once NaN and Infinity are allowed

    def _too_deep(self) -> InvalidArgumentsError:
        return self._fail(
            f"arguments nest objects and arrays more than {NESTING_LIMIT} levels deep",
            "json_too_deep",
        )

    def _non_finite(self) -> InvalidArgumentsError:
        return self._fail("NaN and Infinity are not JSON numbers", "json_invalid")


class PydanticArgumentValidator(ArgumentValidator):
    """Validation through a compiled pydantic-core validator of the tool's signature.

    It validates the JSON text in strict JSON mode. ``recheck=True``: some
    positions sit inside pydantic models, which validate with their own rules
    (see ``guards``), so accepted values are also checked against
    the schema with ``jsonschema``.
    """

    __slots__ = ("_parameters", "_recheck", "_schema", "_validator")

    def __init__(
        self,
        tool: str,
        validator: SchemaValidator,
        schema: Mapping[str, Any],
        *,
        recheck: bool = False,
    ) -> None:
        super().__init__(tool)
        self._validator = validator
        self._schema = schema
        self._parameters = tuple(schema.get("properties") or ())
        self._recheck = jsonschemas.validator(schema) if recheck else None

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        if type(arguments) is str:  # the common case, read inline
            try:
                text = arguments.encode()
                parsed = _read(text)
            except (ValueError, UnicodeEncodeError):
                parsed, text = self.read(arguments)  # explains the error (or reads "")
            else:
                if type(parsed) is not dict:
                    raise self._fail("arguments must be a JSON object", "object_type")
        else:
            parsed, text = self.read(arguments)
        try:
            result: dict[str, Any] = self._validator.validate_json(text, strict=True)
        except ValidationError as error:
            result, parsed = self._after_failure(parsed, error)
        if self._recheck is not None:
            _check_schema(self._recheck, self.tool, parsed)
        return result

    def _validate_parsed(self, parsed: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._validator.validate_json(json.dumps(parsed), strict=True)
        return result

    def _after_failure(
        self, parsed: dict[str, Any], error: ValidationError
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The result after the JSON repairs and the value that passed, or the error."""
        errors = error.errors(include_url=False)
        repaired = _repair(parsed, errors, self._schema)
        if repaired is not None:
            try:
                return self._validate_parsed(repaired), repaired
            except ValidationError as again:  # the problems that remain after the repair
                errors, parsed = again.errors(include_url=False), repaired
        raise self._explain(errors, parsed)

    def _explain(self, errors: list[Any], parsed: Any) -> InvalidArgumentsError:
        """The first problems by JSON path (messages of one path merged), and their count."""
        merged: dict[tuple[Any, ...], list[str]] = {}
        kinds: dict[tuple[Any, ...], str] = {}
        every: set[tuple[Any, ...]] = set()
        for err in errors:
            steps = tuple(_data_steps(parsed, err["loc"]))
            every.add(steps)
            if steps not in merged:
                if len(merged) == MAX_LISTED:
                    continue
                merged[steps], kinds[steps] = [], err["type"]
            message = self._message(err, len(steps))
            if message not in merged[steps]:
                merged[steps].append(message)
        problems = [
            ArgumentProblem(json_path(steps), clip(" | ".join(msgs), _MAX_MESSAGE), kinds[steps])
            for steps, msgs in merged.items()
        ]
        return InvalidArgumentsError(self.tool, problems, total=len(every))

    def _message(self, err: Mapping[str, Any], depth: int) -> str:
        kind = err["type"]
        if kind in _MISSING_TYPES:
            return "missing required argument" if depth == 1 else "missing required field"
        if kind in _EXTRA_TYPES:
            if depth == 1:
                accepted = ", ".join(self._parameters) or "none"
                return f"unexpected argument (this tool accepts: {accepted})"
            return "unexpected field"
        message = _JSON_WORDING.get(kind) or str(err["msg"])
        value = err.get("input")
        if not isinstance(value, dict | list):
            shown = json.dumps(value, default=repr)
            message += f" (got {clip(shown, 60)})"
        return message


class SimpleArgumentValidator(PydanticArgumentValidator):
    """For simple signatures (see ``simple_schema``): validates the parsed value itself.

    Its schema is a strict typed dict that reads parsed JSON values exactly as
    strict JSON mode reads the text, so the text is parsed once, by the strict
    reader. This is the validator of most tools, on every call: it does nothing
    else.
    """

    __slots__ = ("_check",)

    def __init__(self, tool: str, validator: SchemaValidator, schema: Mapping[str, Any]) -> None:
        super().__init__(tool, validator, schema)
        self._check = validator.validate_python

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        if type(arguments) is str:  # the common case, read inline (as _read does)
            try:
                parsed = _from_json(
                    arguments.encode(),
                    catch_duplicate_keys=True,
                    allow_inf_nan=False,
                    cache_mode=False,
                )
            except (ValueError, UnicodeEncodeError):
                parsed = self.read(arguments)[0]  # explains the error (or reads "")
            else:
                if type(parsed) is not dict:
                    raise self._fail("arguments must be a JSON object", "object_type")
        else:
            parsed = self.read(arguments)[0]
        try:
            result: dict[str, Any] = self._check(parsed)
        except ValidationError as error:
            return self._after_failure(parsed, error)[0]
        return result

    def _validate_parsed(self, parsed: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._check(parsed)
        return result


class JsonSchemaArgumentValidator(ArgumentValidator):
    """Validation against a hand-written JSON Schema with ``jsonschema`` (formats asserted)."""

    __slots__ = ("_validator",)

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        super().__init__(tool)
        self._validator = jsonschemas.validator(schema)

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        parsed, _ = self.read(arguments)
        _check_schema(self._validator, self.tool, parsed)
        return parsed


def _check_schema(validator: jsonschema.protocols.Validator, tool: str, value: Any) -> None:
    """Raise :class:`InvalidArgumentsError` for the first problems ``validator`` finds."""
    try:
        errors = list(validator.iter_errors(value))
    except RecursionError:
        raise InvalidArgumentsError(
            tool, [ArgumentProblem("$", "arguments nest too deeply to check", "json_too_deep")]
        ) from None
    if not errors:
        return
    errors.sort(key=lambda e: [str(step) for step in e.absolute_path])
    problems = [
        ArgumentProblem(
            json_path(list(e.absolute_path)), clip(e.message, _MAX_MESSAGE), str(e.validator)
        )
        for e in errors[:MAX_LISTED]
    ]
    raise InvalidArgumentsError(tool, problems, total=len(errors))


def json_path(steps: list[Any] | tuple[Any, ...]) -> str:
    """``['items', 2, 'name']`` -> ``$.items[2].name`` (long keys are shortened)."""
    out = "$"
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        elif isinstance(step, str) and step.isidentifier() and len(step) <= _MAX_STEP:
            out += f".{step}"
        else:
            out += f"[{clip(json.dumps(str(step)), _MAX_STEP)}]"
    return out


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
    """A copy of ``data`` with the two JSON-equivalence repairs applied where the schema
    calls for them (integral floats where an integer is expected, nulls for optional
    properties); None when neither applies."""
    integers, nulls = [], []
    for err in errors:
        value = err.get("input", 0)
        if err["type"] in _INT_TYPES and isinstance(value, float) and value.is_integer():
            integers.append(_data_steps(data, err["loc"]))
        elif value is None and err["type"] not in _EXTRA_TYPES:
            steps = _data_steps(data, err["loc"])
            if _is_optional_property(schema, steps):
                nulls.append(steps)
    if not integers and not nulls:
        return None
    fixed: dict[str, Any] = _copy_json(data)
    for steps in integers:
        parent, last = _parent(fixed, steps)
        value = parent[last] if parent is not None else None
        if isinstance(value, float) and value.is_integer():
            parent[last] = int(value)
    for steps in nulls:
        parent, last = _parent(fixed, steps)
        if isinstance(parent, dict) and parent.get(last, 0) is None:
            del parent[last]
    return fixed


def _parent(data: Any, steps: list[Any]) -> tuple[Any, Any]:
    """The container holding the value at ``steps``, and its key or index there."""
    if not steps:
        return None, None
    node = data
    for step in steps[:-1]:
        node = node[step]
    return node, steps[-1]


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


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value
