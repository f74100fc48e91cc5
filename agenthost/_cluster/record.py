"""A replica's record in Redis: what every other replica and ``cluster status`` read."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

__all__ = ["Member", "tool_key"]


def tool_key(name: str) -> str:
    """How a tool is named in Redis: not by its name, which other tenants must not learn."""
    return hashlib.sha256(name.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Member:
    """One replica's record, as stored in Redis."""

    replica: str
    url: str
    state: str
    started: float
    version: str
    plugins: dict[str, str] = field(default_factory=dict)  # name -> content hash
    tools: dict[str, list[str]] = field(default_factory=dict)  # tool_key -> permissions
    beat: float = 0.0

    @classmethod
    def parse(cls, text: str | bytes) -> Member | None:
        try:
            data = json.loads(text)
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (ValueError, TypeError):
            return None
