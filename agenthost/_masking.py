"""Secret masking for logs and traces: values under secret-looking keys become ``***``.

Keys are compared without case, ``-`` or ``_``, by containment: ``api_key``
also masks ``X-Api-Key`` and ``openai_api_key``, ``token`` masks
``access_token``. Nested dicts and lists are followed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_SECRET_KEYS", "MASK", "mask_secrets"]

MASK = "***"
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
