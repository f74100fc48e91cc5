"""What one caller of the HTTP server may cost, and the count of what each is using.

The SDK's limits (1,024 listen streams, 10,000 sessions) are shared by every
caller, so one token holder could lock the others out. Here each caller (a
token's session name; the client's address without tokens) has its own:
sessions open, event streams open, requests in flight and a request rate, each
refused with 429 and a ``Retry-After`` when exceeded. Time limits bound what a
connection may hold before it is useful: a request head, a body, a handshake.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Limits", "Usage"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-caller quotas and per-connection time limits; ``--limit NAME=VALUE`` sets one."""

    sessions: int = 16  # sessions a caller may hold open
    sessions_per_address: int = 64  # sessions open from one client address, whoever the caller
    streams: int = 8  # event streams a caller may hold open (GET /mcp, subscriptions/listen)
    calls: int = 8  # requests of one caller in flight at once (a quarter of the worker pool)
    rate: float = 200.0  # requests per second a caller may make, in bursts of twice that
    inflight_mb: float = 64  # memory one caller's requests in flight may take once parsed
    initialize_kb: int = 64  # size of an initialize request: it opens a session
    handshake_s: float = 10.0  # from initialize to notifications/initialized
    idle_s: float = 600.0  # a session with nothing in flight and no stream open is closed after
    head_s: float = 10.0  # for a connection to send a whole request head
    body_s: float = 30.0  # for a request body to arrive, once its head has

    @classmethod
    def parse(cls, items: Iterable[str]) -> Limits:
        """``NAME=VALUE`` settings over the defaults; a wrong one raises ``ValueError``."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for item in items:
            name, sep, text = item.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise ValueError(
                    f"--limit wants NAME=VALUE with NAME one of {', '.join(known)}; got {item!r}"
                )
            kind = int if known[name].type in (int, "int") else float
            try:
                value = kind(text)
            except ValueError:
                raise ValueError(f"--limit {name} wants a number, got {text!r}") from None
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"--limit {name} wants a positive number, got {text!r}")
            changes[name] = value
        return dataclasses.replace(cls(), **changes)


@dataclass(slots=True)
class Usage:
    """What one caller holds now, and its request allowance (a token bucket)."""

    sessions: set[str] = field(default_factory=set)
    opening: int = 0  # initialize requests being answered: sessions about to open
    streams: int = 0
    calls: int = 0
    weight: int = 0  # what its requests in flight take once parsed, estimated
    notes: int = 0  # notifications and answers being passed on
    allowance: float = math.inf
    stamp: float = field(default_factory=time.monotonic)

    def take(self, rate: float) -> float:
        """Spend one request: 0 when allowed, else the seconds until one is."""
        now = time.monotonic()
        burst = 2 * rate
        self.allowance = min(burst, self.allowance + (now - self.stamp) * rate)
        self.stamp = now
        if self.allowance >= 1:
            self.allowance -= 1
            return 0.0
        return (1 - self.allowance) / rate

    @property
    def idle(self) -> bool:
        """Holding nothing: its entry may be forgotten once its allowance is full again."""
        return not (self.sessions or self.opening or self.streams or self.calls or self.notes)
