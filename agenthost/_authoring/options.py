"""Checking what an author wrote in ``@tool(...)``, one option at a time.

Each checker returns the value a ``ToolDefinition`` stores and appends a
problem, saying how to fix it, for anything wrong; none raises, so every
problem of a tool is reported at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from agenthost._common.frozen import freeze
from agenthost._errors import DefinitionProblem

__all__ = [
    "OPTION_HINTS",
    "cache_ttl",
    "examples",
    "icons",
    "meta",
    "retries",
    "strings",
    "timeout",
]

OPTION_HINTS = {
    "permission": "permissions",
    "tag": "tags",
    "readonly": "read_only",
    "read-only": "read_only",
    "example": "examples",
    "schema": "input_schema",
    "timeout_seconds": "timeout",
}


def strings(values: Iterable[str], option: str, problems: list[DefinitionProblem]) -> list[str]:
    if isinstance(values, str):
        problems.append(
            DefinitionProblem(f"{option} must be a set of strings, not one string: {{{values!r}}}")
        )
        return []
    try:
        items = list(values)
    except TypeError:
        problems.append(DefinitionProblem(f"{option} must be a set of strings"))
        return []
    bad = [v for v in items if not isinstance(v, str) or not v]
    if bad:
        problems.append(DefinitionProblem(f"{option} must be non-empty strings, got {bad!r}"))
    return [v for v in items if isinstance(v, str) and v]


def timeout(value: float | bool | None, problems: list[DefinitionProblem]) -> float | None:
    if value is None or value is True:
        return None
    if value is False:
        return math.inf
    if not isinstance(value, int | float) or math.isnan(value) or value <= 0:
        problems.append(
            DefinitionProblem(
                f"timeout must be a positive number of seconds (or False for none), got {value!r}"
            )
        )
        return None
    return float(value)


def cache_ttl(value: float | None, problems: list[DefinitionProblem]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        problems.append(
            DefinitionProblem(f"cache_ttl must be a positive number of seconds, got {value!r}")
        )
        return None
    return float(value)


def retries(value: int, idempotent: bool | None, problems: list[DefinitionProblem]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(
            DefinitionProblem(f"retries must be a whole number of at least 0, got {value!r}")
        )
        return 0
    if value and not idempotent:
        problems.append(
            DefinitionProblem("retries need idempotent=True: a retried call may run twice")
        )
    return value


def examples(values: Iterable[object], problems: list[DefinitionProblem]) -> list[Any]:
    if isinstance(values, str | Mapping):
        values = [values]
    out: list[Any] = []
    for example in values:
        if isinstance(example, str | Mapping):
            out.append(freeze(dict(example)) if isinstance(example, Mapping) else example)
        else:
            problems.append(
                DefinitionProblem(
                    f"example {example!r} must be an argument object (dict) or usage text (str)"
                )
            )
    return out


_ICON_KEYS = frozenset({"src", "mimeType", "sizes", "theme"})
_ICON_SOURCES = ("https://", "http://", "data:")


def icons(values: Iterable[Any], problems: list[DefinitionProblem]) -> list[Any]:
    """MCP ``Icon`` objects: a ``src`` URL or data URI, optional mimeType, sizes, theme."""
    if isinstance(values, Mapping):
        values = [values]
    out: list[Any] = []
    for icon in values:
        if not isinstance(icon, Mapping):
            problems.append(
                DefinitionProblem(f'icon {icon!r} must be a dict: {{"src": "https://..."}}')
            )
            continue
        wrong = []
        src = icon.get("src")
        if not isinstance(src, str) or not src.startswith(_ICON_SOURCES):
            wrong.append("'src' must be an https://, http:// or data: URI")
        if set(icon) - _ICON_KEYS:
            wrong.append(
                f"unknown keys {sorted(set(icon) - _ICON_KEYS)} (use {sorted(_ICON_KEYS)})"
            )
        if "mimeType" in icon and not isinstance(icon["mimeType"], str):
            wrong.append("'mimeType' must be a string such as 'image/png'")
        sizes = icon.get("sizes", [])
        if not isinstance(sizes, list | tuple) or not all(isinstance(x, str) for x in sizes):
            wrong.append("'sizes' must be a list of strings such as ['48x48']")
        if icon.get("theme", "light") not in ("light", "dark"):
            wrong.append("'theme' must be 'light' or 'dark'")
        if wrong:
            problems.append(DefinitionProblem(f"icon {dict(icon)!r}: " + "; ".join(wrong)))
        else:
            out.append(freeze(dict(icon)))
    return out


def meta(value: Mapping[str, Any] | None, problems: list[DefinitionProblem]) -> Any:
    """The MCP ``meta`` object: string keys, JSON values."""
    if value is None:
        return None
    try:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise TypeError("meta must be a dict with string keys")
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        problems.append(DefinitionProblem(f"meta must be JSON (a dict with string keys): {exc}"))
        return None
    return freeze(dict(value))
