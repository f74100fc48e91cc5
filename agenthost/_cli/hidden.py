"""Tools a caller cannot see, said where the operator looks: ``serve``'s log and ``list``.

A tool whose permission nobody granted is left out of every listing: right for
the model, baffling for the person who wrote the tool. ``serve`` says at start
and on every load which tools each caller does not see and the grant that
would show them; ``list`` says what each tool needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from agenthost._host import PluginHost

__all__ = ["Audience", "grant_flags", "hidden", "hidden_line"]


@dataclass(frozen=True)
class Audience:
    """Callers that share their grants: ``who`` names them, ``fix`` says how to grant more."""

    who: str
    session: str | None
    fix: Callable[[Sequence[str]], str]


def grant_flags(permissions: Iterable[str]) -> str:
    return " ".join(f"--grant {permission}" for permission in permissions)


def hidden(
    host: PluginHost, plugin: str, names: Iterable[str], session: str | None
) -> dict[str, list[str]]:
    """The tools of ``plugin`` among ``names`` that ``session`` may not call, with what each
    lacks (a name another plugin owns is that plugin's business)."""
    found: dict[str, list[str]] = {}
    for name in names:
        info = host.tool(name)
        if info is None or info.plugin != plugin:
            continue
        missing = host.permissions.missing(session, info.permissions)
        if missing:
            found[name] = missing
    return found


def hidden_line(
    host: PluginHost, plugin: str, names: Iterable[str], audience: Audience
) -> str | None:
    """``hidden from alice: get_weather (needs http.get); <how to grant it>``, or None."""
    found = hidden(host, plugin, names, audience.session)
    if not found:
        return None
    tools = ", ".join(f"{name} (needs {', '.join(missing)})" for name, missing in found.items())
    needed = sorted({permission for missing in found.values() for permission in missing})
    return f"hidden from {audience.who}: {tools}; {audience.fix(needed)}"
