"""``agenthost list``: load a directory and list its plugins and tools, or print them as JSON."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agenthost._cli.arguments import add_command, count, directory, host_options, isolation
from agenthost._cli.hidden import Audience, grant_flags, hidden, hidden_line
from agenthost._directory.records import PluginInfo, ToolInfo
from agenthost._host import PluginHost

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands, "list", run, needs_directory=True,
        help="load a directory and list its plugins and tools",
    )  # fmt: skip
    directory(sub)
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="PERMISSION",
        help="say which tools `serve --grant PERMISSION` would still hide (repeatable)",
    )
    isolation(sub)


def run(args: argparse.Namespace) -> int:
    with PluginHost(args.dir, **host_options(args)) as host:
        host.permissions.grant(None, *args.grant)
        plugins, tools = host.plugins(), host.tools()
        runs = {p.path: _runs_in(p) for p in plugins}  # while the workers are still there
        hiding = {p.path: hidden(host, p.name, p.tools, None) for p in plugins}
        records = [{**_plugin_record(p, tools, hiding[p.path]), **_worker_record(p)}
                   for p in plugins]  # fmt: skip
        audience = _audience(args.grant)
        lines = {p.path: hidden_line(host, p.name, p.tools, audience) for p in plugins}
    if args.json:
        print(json.dumps(records, indent=2, default=str))
    elif not plugins:
        print(f"no plugins in {Path(args.dir).absolute()}")
    else:
        _print_table(plugins, runs)
        _print_notes(plugins, lines)
    return 0


def _audience(grants: Sequence[str]) -> Audience:
    who = f"serve's callers with {grant_flags(grants)}" if grants else "serve's callers"
    return Audience(who, None, lambda needed: f"serve with {grant_flags([*grants, *needed])}")


def _print_table(plugins: Sequence[PluginInfo], runs: dict[str, str]) -> None:
    rows = [("PLUGIN", "VERSION", "STATUS", "TOOLS", "RUNS IN", "PATH")]
    rows += [
        (p.name, p.version or "-", p.status, ", ".join(p.tools) or "-", runs[p.path], p.path)
        for p in plugins
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[5]]))


def _print_notes(plugins: Sequence[PluginInfo], hiding: Mapping[str, str | None]) -> None:
    """What is wrong with each plugin, not only its status word, and which tools are hidden."""
    for plugin in plugins:
        notes = [*([f"error: {plugin.error}"] if plugin.error else [])]
        notes += [line for line in [hiding.get(plugin.path)] if line]
        notes += [f"problem: {problem}" for problem in plugin.problems]
        notes += [f"warning: {warning}" for warning in plugin.warnings]
        if notes:
            print(f"\n{plugin.name}:")
            for note in notes:
                print(f"  {note}")


def _runs_in(plugin: PluginInfo) -> str:
    worker = plugin.worker
    if plugin.isolation == "process" and worker is None and plugin.status == "failed":
        return "process (no worker: the load failed)"
    if plugin.isolation != "process" or worker is None:
        return plugin.isolation
    sandbox = "sandboxed" if worker.sandbox == "bwrap" else "no sandbox"
    return (
        f"process (pid {worker.pid}, {sandbox}, {worker.state}, "
        f"{count(worker.calls, 'call')}, {count(worker.restarts, 'restart')})"
    )


def _worker_record(plugin: PluginInfo) -> dict[str, Any]:
    worker = plugin.worker
    state = None
    if worker is not None:
        state = {"state": worker.state, "pid": worker.pid, "calls": worker.calls,
                 "restarts": worker.restarts, "last_exit": worker.last_exit,
                 "sandbox": worker.sandbox}  # fmt: skip
    return {"isolation": plugin.isolation, "worker": state}


def _plugin_record(
    plugin: PluginInfo, tools: Sequence[ToolInfo], hiding: Mapping[str, list[str]]
) -> dict[str, Any]:
    return {
        "name": plugin.name,
        "version": plugin.version,
        "status": plugin.status,
        "error": plugin.error,
        "path": plugin.path,
        "kind": plugin.kind,
        "problems": [error.as_dict() for error in plugin.definition_errors],
        "warnings": list(plugin.warnings),
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
                "permissions": sorted(t.permissions),
                "hidden_without": hiding.get(t.name, []),
            }
            for t in tools
            if t.name in plugin.tools
        ],
    }
