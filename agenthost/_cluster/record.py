"""A replica's record in Redis: what every other replica and ``cluster status`` read."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

__all__ = ["Member", "members_pattern", "tool_key"]


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
    access: str = ""  # a digest of the tokens and grants it was started with

    @classmethod
    def parse(cls, text: str | bytes) -> Member | None:
        """The record, or None when it does not read as one: it comes from a shared Redis."""
        try:
            data = json.loads(text)
            member = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (ValueError, TypeError):
            return None
        return member if _sound(member) else None


def members_pattern(cluster: str) -> str:
    """The Redis glob of every record of ``cluster``, its name matched literally: a cluster
    named ``a*`` is not every cluster whose name starts with ``a``."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", f"{cluster}:replica:") + "*"


def _sound(member: Member) -> bool:
    """Whether every field has its type: a record is read from a shared Redis."""
    texts = (member.replica, member.url, member.state, member.version, member.access)
    numbers = (member.started, member.beat)
    return (
        all(isinstance(t, str) for t in texts)
        and all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers)
        and isinstance(member.plugins, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in member.plugins.items())
        and isinstance(member.tools, dict)
        and all(
            isinstance(v, list) and all(isinstance(p, str) for p in v)
            for v in member.tools.values()
        )
    )
