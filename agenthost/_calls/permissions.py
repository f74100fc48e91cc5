"""Permissions: tools declare what they need, sessions are granted what they may do.

A tool's ``permissions`` (``{"http.get", "fs.write"}``) must all be granted to
the calling session, or host-wide by default, before its arguments are even
parsed. A grant may end in ``*`` to cover a family (``"http.*"``), and ``"*"``
grants everything. Reads never lock: grants are replaced, never edited.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

__all__ = ["Permissions"]


class Permissions:
    """Grants per session plus host-wide defaults."""

    def __init__(self, defaults: Iterable[str] = ()) -> None:
        self._defaults = frozenset(_checked(defaults))
        self._sessions: dict[str | None, frozenset[str]] = {}
        self._lock = threading.Lock()

    @property
    def defaults(self) -> frozenset[str]:
        """What every session, including calls without one, is granted."""
        return self._defaults

    def grant(self, session: str | None, *permissions: str) -> None:
        """Grant ``permissions`` to ``session`` (None: calls made without a session)."""
        with self._lock:
            current = self._sessions.get(session, frozenset())
            self._sessions = {**self._sessions, session: current | _checked(permissions)}

    def revoke(self, session: str | None, *permissions: str) -> None:
        """Take back grants from ``session``; with no permissions, all of them."""
        with self._lock:
            sessions = dict(self._sessions)
            if permissions:
                sessions[session] = sessions.get(session, frozenset()) - set(permissions)
            else:
                sessions.pop(session, None)
            self._sessions = sessions

    def set_defaults(self, *permissions: str) -> None:
        """Replace the host-wide default grants."""
        self._defaults = frozenset(_checked(permissions))

    def granted(self, session: str | None) -> frozenset[str]:
        """Everything ``session`` holds: its own grants and the defaults."""
        try:
            own = self._sessions.get(session, frozenset())
        except TypeError:  # not a session name at all (unhashable)
            own = frozenset()
        return self._defaults | own

    def missing(self, session: str | None, required: frozenset[str]) -> list[str]:
        """The required permissions ``session`` does not hold, sorted."""
        held = self.granted(session)
        if required <= held or "*" in held:
            return []
        families = [grant[:-1] for grant in held if grant.endswith("*")]
        return sorted(
            need
            for need in required - held
            if not any(need.startswith(family) for family in families)
        )


def _checked(permissions: Iterable[str]) -> frozenset[str]:
    values = frozenset(permissions)
    bad = [p for p in values if not isinstance(p, str) or not p]
    if bad:
        raise ValueError(f"permissions must be non-empty strings, got {bad!r}")
    return values
