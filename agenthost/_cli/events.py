"""The plugin log as ``watch`` and ``serve`` print it: a line per event, or JSON."""

from __future__ import annotations

import json
import os
import time
from typing import TextIO

from agenthost._cli.arguments import count, indent
from agenthost._directory.records import PluginEvent
from agenthost._host import PluginHost

__all__ = ["json_event", "summary", "text_event"]

_COLOURS = {"loaded": "32", "reloaded": "36", "unloaded": "33", "failed": "31", "conflict": "35"}


def _coloured(word: str, out: TextIO) -> str:
    """The status word in colour on a terminal; plain when piped or with NO_COLOR set."""
    padded = f"{word:<8}"
    tty = getattr(out, "isatty", lambda: False)()
    if not tty or os.environ.get("NO_COLOR") or word not in _COLOURS:
        return padded
    return f"\033[{_COLOURS[word]}m{padded}\033[0m"


def text_event(event: PluginEvent, out: TextIO) -> None:
    stamp = time.strftime("%H:%M:%S")
    head = f"{stamp} {_coloured(event.kind, out)} {event.plugin}"
    if event.kind in ("loaded", "reloaded"):
        version = f" {event.version}" if event.version else ""
        took = f"in {event.duration_ms:.1f} ms ({event.path})"
        where = f" [process, pid {event.worker_pid}]" if event.isolation == "process" else ""
        line = f"{head}{version}: {_what_changed(event)} {took}{where}"
        if event.message:
            line += "\n" + indent(event.message)
    elif event.kind == "failed":
        where = event.location or event.path
        line = f"{head}: {where}: {event.message}"
        if event.previous_serving and "keeps serving" not in event.message:
            line += " (the previous version keeps serving)"
        if event.traceback:
            line += "\n" + indent(_after(event.traceback, line))
    elif event.kind == "conflict":
        line = f"{head}: {event.message}"
        if "is owned by" in event.message:  # a tool name taken first by another plugin
            line += "; give yours another name with @tool(name=...)"
    else:
        line = f"{head} ({event.path})"
    print(line, file=out, flush=True)


def _after(details: str, said: str) -> str:
    """``details`` without its first line when ``said`` has it (a definition error's header)."""
    first, _, rest = details.partition("\n")
    return rest if first and first in said else details


def summary(host: PluginHost) -> str:
    """The start-up line: plugins, tools, and what did not load."""
    plugins = host.plugins()
    failed = [p.name for p in plugins if p.status == "failed"]
    conflicts = [p.name for p in plugins if p.status == "conflict"]
    tools = len(host.tools())
    line = f"ready: {count(len(plugins), 'plugin')}, {count(tools, 'tool')}"
    line += f", {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "")
    if conflicts:
        line += f", {len(conflicts)} in conflict ({', '.join(conflicts)})"
    return line


def _what_changed(event: PluginEvent) -> str:
    """``2 tools (add, sub)`` on a load; ``+sub -old ~add (breaking: ...)`` on a reload."""
    noun = "tool" if event.tools == 1 else "tools"
    names = f" ({', '.join(event.tool_names)})" if event.tool_names else ""
    if event.kind == "loaded":
        return f"{event.tools} {noun}{names}"
    marks = [f"+{name}" for name in event.added] + [f"-{name}" for name in event.removed]
    for name in event.changed:
        reasons = event.breaking.get(name)
        marks.append(f"~{name}" + (f" (breaking: {'; '.join(reasons)})" if reasons else ""))
    return f"{event.tools} {noun}, " + (" ".join(marks) if marks else "no tool changed")


def json_event(event: PluginEvent, out: TextIO) -> None:
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "event": event.kind,
        "plugin": event.plugin,
        "version": event.version,
        "tools": event.tools,
        "ms": round(event.duration_ms, 3),
        "path": event.path,
        "message": event.message or None,
        "location": event.location or None,
        "tool_names": list(event.tool_names),
        "added": list(event.added),
        "removed": list(event.removed),
        "changed": list(event.changed),
        "breaking": {name: list(reasons) for name, reasons in event.breaking.items()},
        "previous_serving": event.previous_serving,
        "traceback": event.traceback or None,
    }
    print(json.dumps(record), file=out, flush=True)
