"""Secret masking for logs and traces: values under secret-looking keys become ``***``.

Keys are compared without case, ``-`` or ``_``, by containment: ``api_key``
also masks ``X-Api-Key`` and ``openai_api_key``, ``token`` masks
``access_token``. Nested dicts and lists are followed.

A secret can also leak as text: a tool's exception message or traceback that
quotes its own arguments. :func:`secret_values` collects the values to look
for and :func:`redact` replaces them wherever they appear in a text. Values
shorter than :data:`MIN_SECRET_LENGTH` are only masked under their key: looking
for a one-letter "password" inside text would blank out every message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic_core

__all__ = [
    "DEFAULT_SECRET_KEYS",
    "MASK",
    "MIN_SECRET_LENGTH",
    "is_secret_key",
    "jsonable",
    "mask_secrets",
    "redact",
    "secret_values",
]

MASK = "***"
MIN_SECRET_LENGTH = 4
DEFAULT_SECRET_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "token",
    "api_key",
    "apikey",
    "secret",
    "authorization",
    "cookie",
    "private_key",
    "credential",
)


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


_DEFAULT_NEEDLES = tuple({_norm(k) for k in DEFAULT_SECRET_KEYS})


def is_secret_key(key: object) -> bool:
    """Whether a key looks like it holds a secret (by the default keys)."""
    return isinstance(key, str) and any(n in _norm(key) for n in _DEFAULT_NEEDLES)


def jsonable(value: Any) -> Any:
    """``value`` as JSON-like data (models and dataclasses as dicts, the rest as text)."""
    try:
        return pydantic_core.to_jsonable_python(value, fallback=str)
    except Exception:  # noqa: BLE001 - a value that cannot be serialised is shown by type only
        return f"<{type(value).__name__}>"


def mask_secrets(value: Any, keys: Iterable[str] = DEFAULT_SECRET_KEYS) -> Any:
    """A copy of ``value`` with the values of secret-looking keys replaced by ``***``."""
    needles = tuple({_norm(k) for k in keys})
    return _mask(value, needles)


def _mask(value: Any, needles: tuple[str, ...]) -> Any:
    if isinstance(value, Mapping):
        return {
            key: MASK
            if isinstance(key, str) and any(n in _norm(key) for n in needles)
            else _mask(item, needles)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask(item, needles) for item in value]
    return value


def secret_values(value: Any, keys: Iterable[str] = DEFAULT_SECRET_KEYS) -> tuple[str, ...]:
    """Every scalar under a secret-looking key of ``value``, as text, longest first."""
    needles = tuple({_norm(k) for k in keys})
    found: set[str] = set()
    pending: list[tuple[Any, bool]] = [(value, False)]
    while pending:
        node, secret = pending.pop()
        if isinstance(node, Mapping):
            for key, item in node.items():
                hidden = secret or (isinstance(key, str) and any(n in _norm(key) for n in needles))
                pending.append((item, hidden))
        elif isinstance(node, list | tuple):
            pending.extend((item, secret) for item in node)
        elif secret and node is not None and not isinstance(node, bool):
            text = node if isinstance(node, str) else str(node)
            if len(text) >= MIN_SECRET_LENGTH:
                found.add(text)
    return tuple(sorted(found, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret (also as ``repr`` or JSON writes it) masked."""
    for secret in secrets:
        for form in {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]}:
            if form and form in text:
                text = text.replace(form, MASK)
    return text
