"""Guards that make a pydantic validator accept exactly what its JSON Schema publishes.

pydantic matches choices by Python equality, so ``true`` would pass as
``Literal[1]`` or an ``IntEnum`` member, which JSON Schema's ``enum`` refuses;
and it parses more string forms than the formats it publishes (see ``formats``).
:func:`guarded` rewrites a core schema so the two agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError, SchemaValidator
from pydantic_core import core_schema as cs

from agenthost._authoring.formats import CHECKS, MESSAGES, url_pattern

__all__ = ["guarded", "same_json_kind"]


def guarded(node: Any, hidden: list[bool]) -> tuple[Any, bool]:
    """A copy of a core schema that accepts exactly what its JSON Schema publishes, and
    whether anything changed.

    pydantic matches choices by Python equality, so ``true`` would pass as
    ``Literal[1]`` or an ``IntEnum`` member, which JSON Schema's ``enum`` refuses;
    and it parses more string forms than the formats it publishes (see ``formats``).
    pydantic-core validates a complete model (or pydantic dataclass) with the
    class's own prebuilt validator, whatever schema it is given: when a guard is
    needed inside one, ``hidden[0]`` is set and the caller checks another way.
    """
    if isinstance(node, list):
        items = [guarded(item, hidden) for item in node]
        return [item for item, _ in items], any(changed for _, changed in items)
    if not isinstance(node, dict):
        return node, False
    if _prebuilt(node):
        hidden[0] = hidden[0] or _needs_guard(node.get("schema"))
        return node, False
    copied: dict[str, Any] = {}
    changed = False
    for key, value in node.items():
        copied[key], inner = guarded(value, hidden)
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
    guard = cs.no_info_before_validator_function(same_json_kind(choices), copied, ref=ref)
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


def same_json_kind(choices: list[Any]) -> Callable[[Any], Any]:
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
