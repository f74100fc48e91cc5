"""A replica's record in Redis: what every other replica and ``cluster status`` read."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Member", "members_pattern", "tool_key"]


MAX_RECORD = 8 * 1024 * 1024  # bytes of a record read from Redis: 10,000 tools take 0.5 MB


def tool_key(name: str, salt: bytes = b"") -> str:
    """How a tool is named in Redis: not by its name, which other tenants must not learn
    (a guess is checked by hashing it, unless the hash is salted with a key Redis lacks)."""
    return hashlib.sha256(salt + b"\x00" + name.encode()).hexdigest()[:16]


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

    def dump(self, seal: Callable[[str], str] = lambda text: "") -> str:
        """The record as stored, with ``seal``'s signature of it."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return json.dumps({**json.loads(text), "sig": seal(text)}, sort_keys=True)

    @classmethod
    def parse(
        cls, text: str | bytes, signed: Callable[[str, str], bool] = lambda text, sig: True
    ) -> Member | None:
        """The record, or None when it does not read as one or ``signed`` refuses its
        signature: it comes from a shared Redis, where anything may be written (nested a
        million deep, a gigabyte, a list, another replica's id)."""
        if len(text) > MAX_RECORD:
            return None
        try:
            data = json.loads(text)
            signature = data.pop("sig", "")
            member = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
            sound = _sound(member) and isinstance(signature, str)
            if not sound or not signed(json.dumps(data, sort_keys=True), signature):
                return None
        except Exception:  # noqa: BLE001 - RecursionError included: no record
            return None
        return member


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
