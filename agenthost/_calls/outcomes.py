"""The results the host writes itself: a call refused, handed back, or out of time.

Each says what happened and how to fix it, and carries the details a program
needs (``missing`` permissions, close-name ``suggestions``, the failing paths).
"""

from __future__ import annotations

import difflib

from agenthost._authoring.context import ToolContext
from agenthost._calls.results import ToolResult
from agenthost._common.masking import jsonable
from agenthost._common.text import describe, type_name
from agenthost._directory.records import Snapshot
from agenthost._directory.scan import defines
from agenthost._errors import InvalidArgumentsError

__all__ = ["denied", "invalid", "requires_action", "stopped", "timed_out", "unknown"]


def stopped() -> ToolResult:
    return ToolResult.fail("unavailable", "the tool host is stopped; no calls are taken")


def unknown(name: object, snapshot: Snapshot) -> ToolResult:
    """No such tool: say so, with close names, or why the plugin that defines it is missing."""
    if not isinstance(name, str):
        return ToolResult.fail(
            "unknown_tool", f"a tool name is a string, not {type_name(name)}", suggestions=[]
        )
    failed = [
        p for p in snapshot.plugins.values() if p.status == "failed" and defines(p.path, name)
    ]
    if failed:  # the tool exists on disk; its plugin did not load
        plugin = failed[0]
        return ToolResult.fail(
            "unknown_tool",
            f"unknown tool {describe(name)!r}: plugin '{plugin.name}' ({plugin.path}) defines "
            f"it but failed to load: {plugin.error}",
            failed_plugin=plugin.name,
        )
    suggestions = difflib.get_close_matches(name, list(snapshot.tools), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
    return ToolResult.fail(
        "unknown_tool", f"unknown tool {describe(name)!r}{hint}", suggestions=suggestions
    )


def denied(name: str, session: str | None, missing: list[str]) -> ToolResult:
    listed = ", ".join(repr(p) for p in missing)
    who = f"session {session!r}" if session is not None else "calls without a session"
    message = (
        f"tool {name!r} needs {listed}, not granted to {who}; grant with "
        f"host.permissions.grant({session!r}, {listed}) or PluginHost(default_permissions=...)"
    )
    return ToolResult.fail("permission_denied", message, missing=missing, session=session)


def invalid(exc: InvalidArgumentsError) -> ToolResult:
    problems = [p.as_dict() for p in exc.problems]
    return ToolResult.fail("invalid_arguments", str(exc), errors=problems, error_count=exc.total)


def requires_action(ctx: ToolContext) -> ToolResult:
    call = {"id": ctx.call_id, "name": ctx.name, "arguments": jsonable(ctx.arguments)}
    message = f"tool '{ctx.name}' is run by the client; the call is handed back to it"
    return ToolResult.fail("requires_action", message, call=call)


def timed_out(
    ctx: ToolContext, limit: float, *, abandoned: bool, queued: bool = False
) -> ToolResult:
    message = f"tool '{ctx.name}' did not finish within {limit:g} s"
    if queued:
        message += " (it waited for a free worker and never started)"
    elif abandoned:
        message += "; its thread keeps running (only process isolation can stop it)"
    return ToolResult.fail("timeout", message, timeout=limit, abandoned=abandoned)
