"""The ``agenthost`` command line: a thin layer over :class:`PluginHost`.

``main(argv)`` is what tests call; only the CLI configures logging.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from loguru import logger

from agenthost._directory.loader import LoadFailure, PluginVersion, load_source
from agenthost._directory.registry import PluginEvent, PluginInfo
from agenthost._directory.scan import not_loaded, source_at
from agenthost._host import PluginHost
from agenthost._providers.compatibility import PROVIDERS, Finding, check_compatibility
from agenthost._providers.exporters import FORMATS, STRICT_FORMATS
from agenthost._version import __version__

__all__ = ["main"]

TEMPLATE = '''\
"""{name}: an agenthost plugin.

Every function marked @tool becomes a tool. Its name, parameters, their types,
defaults and the docstring become the JSON Schema the model sees. Save the
file while `agenthost watch` runs and the new version is live at once.
"""

from typing import Annotated, Literal

from pydantic import Field

from agenthost import tool

__version__ = "0.1.0"


@tool
def {name}_echo(
    text: Annotated[str, Field(description="What to send back")],
    times: int = 1,
    style: Literal["plain", "shout"] = "plain",
) -> str:
    """Send the text back, repeated.

    Args:
        times: How many times to repeat it.
        style: "shout" returns upper case.
    """
    result = " ".join([text] * times)
    return result.upper() if style == "shout" else result


# Options: @tool(name=..., permissions={{"http.get"}}, timeout=10, read_only=True, ...)
# A parameter annotated ToolContext receives the call's context and is never in the schema:
#
# from agenthost import ToolContext
#
# @tool(permissions={{"fs.read"}}, timeout=5)
# def read_note(path: str, ctx: ToolContext) -> str:
#     """Read a note."""
#     ...


def on_load() -> None:
    """Runs after this version is imported (open connections here)."""


def on_unload() -> None:
    """Runs when this version is retired, after its last call ended (close them here)."""
'''


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agenthost", description="Host AI-agent tools from a hot-reloaded plugin directory."
    )
    parser.add_argument("--version", action="version", version=f"agenthost {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def isolation(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--isolation",
            choices=("in-process", "process"),
            help="where plugins run: in the host (default, unless a plugin asks for its own "
            "process) or each in a worker process that cannot crash or hang the host",
        )

    def directory(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("dir", nargs="?", default="plugins", help="plugin directory (./plugins)")

    watch = commands.add_parser("watch", help="load a directory and log every reload until Ctrl-C")
    directory(watch)
    watch.add_argument("--json", action="store_true", help="one JSON object per event")
    watch.add_argument("--debounce", type=float, metavar="MS", help="debounce window in ms")
    isolation(watch)
    watch.add_argument("--create", action="store_true", help="create the directory if missing")

    listing = commands.add_parser("list", help="load a directory and list its plugins and tools")
    directory(listing)
    listing.add_argument("--json", action="store_true", help="print JSON")
    isolation(listing)

    check = commands.add_parser("check", help="validate one plugin (file, folder or wheel)")
    check.add_argument("path", nargs="+", help="the plugins to check (files, folders, wheels)")
    check.add_argument("--json", action="store_true", help="print JSON")
    check.add_argument(
        "--provider",
        action="append",
        choices=PROVIDERS,
        default=[],
        help="only this provider's findings, its refusals failing the check (repeatable); "
        "by default a refusal by one provider alone is a warning",
    )

    new = commands.add_parser("new", help="write a commented plugin template")
    new.add_argument("name", help="plugin name (a Python identifier)")
    new.add_argument("--dir", default="plugins", help="where to write it (./plugins)")

    call = commands.add_parser("call", help="run one tool call and print the ToolResult as JSON")
    call.add_argument(
        "target",
        nargs="+",
        metavar="[DIR] TOOL [ARGS]",
        help="plugin directory, tool, JSON arguments",
    )
    call.add_argument("--session", help="the session the call runs as")
    call.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="PERMISSION",
        help="grant the session a permission",
    )
    call.add_argument("--timeout", type=float, help="seconds before the call gives up")
    isolation(call)
    call.add_argument(
        "--output",
        choices=("text", "json"),
        help="text (the answer the model would see) or json (the whole ToolResult); "
        "default: text on a terminal, json otherwise",
    )
    call.add_argument("--stream", action="store_true", help="print output chunks as they come")

    serve = commands.add_parser(
        "serve",
        help="serve the directory to MCP clients; the tool list follows every edit",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_SERVE_EPILOG,
    )
    directory(serve)
    isolation(serve)
    serve.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="PERMISSION",
        help="grant every caller a permission (repeatable); tools needing others are hidden",
    )
    serve.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (host 127.0.0.1)",
    )
    serve.add_argument(
        "--tokens",
        metavar="FILE",
        type=Path,
        help="JSON file of bearer tokens, each with a session name and grants (HTTP only)",
    )

    schema = commands.add_parser("schema", help="print the tool definitions for a provider")
    directory(schema)
    schema.add_argument(
        "--format", choices=FORMATS, default="openai", help="provider format (default: openai)"
    )
    schema.add_argument(
        "--strict", action="store_true", help="strict mode (openai, openai-responses, anthropic)"
    )
    for sub in commands.choices.values():  # `agenthost list -v` as well as `agenthost -v list`
        sub.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="log debug details to stderr",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    logger.remove()
    logger.add(
        sys.stderr,
        level="DEBUG" if getattr(args, "verbose", False) else "WARNING",
        format="{level}: {message}",
    )
    logger.enable("agenthost")
    try:
        command: Callable[[argparse.Namespace], int] = _COMMANDS[args.command]
        if args.command in _NEEDS_DIRECTORY and not _directory_ready(args):
            return 2
        return command(args)
    except BrokenPipeError:  # `agenthost list | head`: the reader left, nothing to report
        _silence_stdout()
        return 0
    finally:
        logger.disable("agenthost")


_NEEDS_DIRECTORY = frozenset({"watch", "list", "schema", "serve"})


def _directory_ready(args: argparse.Namespace) -> bool:
    """A missing or mistyped directory is an error, never an empty success."""
    directory = Path(args.dir)
    if directory.is_dir():
        return True
    if directory.exists():
        print(f"agenthost {args.command}: {directory} is a file, not a directory", file=sys.stderr)
        return False
    if getattr(args, "create", False):
        directory.mkdir(parents=True)
        print(f"created {directory}", file=sys.stderr)
        return True
    hint = " (or pass --create)" if args.command == "watch" else ""
    print(
        f"agenthost {args.command}: no directory {directory} here ({Path.cwd()}); "
        f"create it with `mkdir {directory}`{hint}, or name another",
        file=sys.stderr,
    )
    return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


# --- serve ---------------------------------------------------------------------------------------

_SERVE_EPILOG = """\
stdio carries the protocol; plugin events and logs go to stderr.

Claude Code:     claude mcp add tools -- agenthost serve /abs/path/plugins
Claude Desktop (claude_desktop_config.json), Cursor (.cursor/mcp.json):
  {"mcpServers": {"tools": {"command": "agenthost",
                            "args": ["serve", "/abs/path/plugins"]}}}
VS Code (.vscode/mcp.json):
  {"servers": {"tools": {"type": "stdio", "command": "agenthost",
                         "args": ["serve", "${workspaceFolder}/plugins"]}}}

Over HTTP (agenthost serve plugins --http 8000):
  {"mcpServers": {"tools": {"type": "http", "url": "http://127.0.0.1:8000/mcp"}}}
  VS Code: {"servers": {"tools": {"type": "http", "url": "http://127.0.0.1:8000/mcp"}}}

--tokens FILE maps each bearer token to a session name and its grants:
  {"<token>": {"session": "alice", "grants": ["fs.read"]}}
Clients send it as the header  Authorization: Bearer <token>
"""


def _serve(args: argparse.Namespace) -> int:
    try:
        from agenthost._serve.http import (
            TokenError,
            is_loopback,
            load_tokens,
            parse_address,
            readable_by_others,
            serve_http,
        )
        from agenthost._serve.server import McpServer
    except ImportError:
        print(
            "agenthost serve needs the MCP SDK: pip install 'agenthost[mcp]'",
            file=sys.stderr,
        )
        return 2
    import asyncio

    if args.http is None:
        if args.tokens is not None:
            return _fail("--tokens applies to HTTP: add --http [HOST:]PORT")
        server = McpServer(_serve_host(args), grants=args.grant)
        _freeze_libraries()
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(server.serve_stdio())
        return 0
    try:
        bind, port = parse_address(args.http)
        tokens = load_tokens(args.tokens) if args.tokens is not None else None
    except (ValueError, TokenError) as exc:
        return _fail(str(exc))
    if tokens is None and not is_loopback(bind):
        return _fail(
            f"refusing to serve {bind} without --tokens: anyone who can reach it could call "
            "your tools. Bind 127.0.0.1, or pass --tokens FILE (see agenthost serve --help)."
        )
    if args.tokens is not None and readable_by_others(args.tokens):
        print(f"warning: {args.tokens} is readable by other users (chmod 600 it)", file=sys.stderr)
    host = _serve_host(args)
    server = McpServer(host, grants=args.grant)
    for caller in (tokens or {}).values():
        host.permissions.grant(caller.session, *args.grant, *caller.grants)

    def ready(url: str) -> None:
        who = f" for {len(tokens)} tokens" if tokens else ""
        print(f"serving MCP at {url}{who} (Ctrl-C to stop)", file=sys.stderr, flush=True)

    _freeze_libraries()
    try:
        asyncio.run(serve_http(server, bind, port, tokens=tokens, ready=ready))
    except OSError as exc:
        return _fail(f"cannot listen on {args.http}: {exc.strerror or exc}")
    print("stopped", file=sys.stderr, flush=True)
    return 0


def _freeze_libraries() -> None:
    """Keep the collector from walking the loaded libraries on every full collection.

    A 1,000-tool listing leaves enough garbage to trigger several. Plugins load
    after this, so they stay collectable and replaced versions are still freed.
    """
    import gc

    gc.freeze()


def _serve_host(args: argparse.Namespace) -> PluginHost:
    host = PluginHost(Path(args.dir), watch=True, isolation=args.isolation)
    host.on_event(lambda event: _text_event(event, sys.stderr))
    return host


def _fail(message: str) -> int:
    print(f"agenthost serve: {message}", file=sys.stderr)
    return 2


# --- watch ---------------------------------------------------------------------------------------


def _watch(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    debounce = args.debounce / 1000 if args.debounce is not None else None
    host = PluginHost(directory, watch=True, debounce=debounce, isolation=args.isolation)
    printer = _json_event if args.json else _text_event
    host.on_event(lambda event: printer(event, sys.stdout))
    stop = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, request_stop)
    try:
        host.start()
        print(_summary(host), file=sys.stderr, flush=True)
        print(
            f"watching {host.directory} ({host.watch_mode}, debounce {host.debounce * 1000:g} ms); "
            "Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        # A second Ctrl-C must not interrupt the orderly retirement of every plugin.
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            host.stop()
        finally:
            signal.signal(signal.SIGINT, interrupt)
            signal.signal(signal.SIGTERM, previous)
    print("stopped", file=sys.stderr, flush=True)
    return 0


_COLOURS = {"loaded": "32", "reloaded": "36", "unloaded": "33", "failed": "31", "conflict": "35"}


def _coloured(word: str, out: TextIO) -> str:
    """The status word in colour on a terminal; plain when piped or with NO_COLOR set."""
    import os

    padded = f"{word:<8}"
    tty = getattr(out, "isatty", lambda: False)()
    if not tty or os.environ.get("NO_COLOR") or word not in _COLOURS:
        return padded
    return f"\033[{_COLOURS[word]}m{padded}\033[0m"


def _text_event(event: PluginEvent, out: TextIO) -> None:
    stamp = time.strftime("%H:%M:%S")
    head = f"{stamp} {_coloured(event.kind, out)} {event.plugin}"
    if event.kind in ("loaded", "reloaded"):
        version = f" {event.version}" if event.version else ""
        took = f"in {event.duration_ms:.1f} ms ({event.path})"
        where = f" [process, pid {event.worker_pid}]" if event.isolation == "process" else ""
        line = f"{head}{version}: {_what_changed(event)} {took}{where}"
        if event.message:
            line += "\n" + _indent(event.message)
    elif event.kind == "failed":
        where = event.location or event.path
        line = f"{head}: {where}: {event.message}"
        if event.previous_serving and "keeps serving" not in event.message:
            line += " (the previous version keeps serving)"
        if event.traceback:
            line += "\n" + _indent(event.traceback)
    elif event.kind == "conflict":
        line = f"{head}: {event.message}"
        if "is owned by" in event.message:  # a tool name taken first by another plugin
            line += "; give yours another name with @tool(name=...)"
    else:
        line = f"{head} ({event.path})"
    print(line, file=out, flush=True)


def _summary(host: PluginHost) -> str:
    """The start-up line: plugins, tools, and what did not load."""
    plugins = host.plugins()
    failed = [p.name for p in plugins if p.status == "failed"]
    conflicts = [p.name for p in plugins if p.status == "conflict"]
    tools = len(host.tools())
    line = f"ready: {_count(len(plugins), 'plugin')}, {_count(tools, 'tool')}"
    line += f", {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "")
    if conflicts:
        line += f", {len(conflicts)} in conflict ({', '.join(conflicts)})"
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


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


def _json_event(event: PluginEvent, out: TextIO) -> None:
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


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# --- list, schema ------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    with PluginHost(args.dir, isolation=args.isolation) as host:
        plugins, tools = host.plugins(), host.tools()
        runs = {p.path: _runs_in(p) for p in plugins}  # while the workers are still there
        records = [{**_plugin_record(p, tools), **_worker_record(p)} for p in plugins]
    if args.json:
        print(json.dumps(records, indent=2, default=str))
        return 0
    if not plugins:
        print(f"no plugins in {Path(args.dir).absolute()}")
        return 0
    rows = [("PLUGIN", "VERSION", "STATUS", "TOOLS", "RUNS IN", "PATH")]
    rows += [
        (p.name, p.version or "-", p.status, ", ".join(p.tools) or "-", runs[p.path], p.path)
        for p in plugins
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[5]]))
    for plugin in plugins:  # what is wrong, not only the status word
        notes = [*([f"error: {plugin.error}"] if plugin.error else [])]
        notes += [f"problem: {problem}" for problem in plugin.problems]
        notes += [f"warning: {warning}" for warning in plugin.warnings]
        if notes:
            print(f"\n{plugin.name}:")
            for note in notes:
                print(f"  {note}")
    return 0


def _runs_in(plugin: PluginInfo) -> str:
    worker = plugin.worker
    if plugin.isolation != "process" or worker is None:
        return plugin.isolation
    return (
        f"process (pid {worker.pid}, {worker.state}, {_count(worker.calls, 'call')}, "
        f"{_count(worker.restarts, 'restart')})"
    )


def _worker_record(plugin: PluginInfo) -> dict[str, Any]:
    worker = plugin.worker
    state = None
    if worker is not None:
        state = {"state": worker.state, "pid": worker.pid, "calls": worker.calls,
                 "restarts": worker.restarts, "last_exit": worker.last_exit}  # fmt: skip
    return {"isolation": plugin.isolation, "worker": state}


def _plugin_record(plugin: PluginInfo, tools: Sequence[Any]) -> dict[str, Any]:
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
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in tools
            if t.name in plugin.tools
        ],
    }


def _say_failures(host: PluginHost, command: str) -> None:
    """A definition list or a call answered without some plugins must say so."""
    for plugin in host.plugins():
        if plugin.status == "failed":
            print(
                f"{command}: plugin '{plugin.name}' failed to load, its tools are missing: "
                f"{plugin.error} ({plugin.location or plugin.path}); see agenthost check "
                f"{plugin.path}",
                file=sys.stderr,
            )


def _schema(args: argparse.Namespace) -> int:
    if args.strict and args.format not in STRICT_FORMATS:
        print(
            f"agenthost schema: --format {args.format} has no strict mode (only "
            f"{', '.join(STRICT_FORMATS)} do); drop --strict",
            file=sys.stderr,
        )
        return 2
    with PluginHost(args.dir) as host:
        _say_failures(host, "agenthost schema")
        print(json.dumps(host.schemas(args.format, strict=args.strict), indent=2))
    return 0


# --- check, new ---------------------------------------------------------------------------------


def _call(args: argparse.Namespace) -> int:
    target = list(args.target)
    if len(target) > 3:
        print("usage: agenthost call [DIR] TOOL [ARGS]", file=sys.stderr)
        return 2
    directory = "plugins"
    if len(target) == 3 or (len(target) == 2 and not _looks_like_json(target[1])):
        directory = target.pop(0)
    name, arguments = target[0], target[1] if len(target) > 1 else "{}"
    if arguments == "-":
        arguments = sys.stdin.read()
    if not Path(directory).is_dir():
        print(f"agenthost call: {directory} is not a directory", file=sys.stderr)
        return 2
    as_text = args.output == "text" or (args.output is None and sys.stdout.isatty())
    with PluginHost(directory, isolation=args.isolation) as host:
        _say_failures(host, "agenthost call")
        if args.grant:
            host.permissions.grant(args.session, *args.grant)
        options: dict[str, Any] = {"session": args.session, "timeout": args.timeout}
        if args.stream:
            result = None
            for event in host.stream(name, arguments, **options):
                if event.kind == "delta":
                    print(
                        event.text, end="", file=sys.stdout if as_text else sys.stderr, flush=True
                    )
                elif event.kind == "completed":
                    result = event.result
            assert result is not None
        else:
            result = host.execute(name, arguments, **options)
    if result.error is not None and result.error.code == "permission_denied":
        missing = " ".join(f"--grant {p}" for p in result.error.details.get("missing", ()))
        print(f"agenthost call: to allow it, run again with {missing}", file=sys.stderr)
    if as_text:
        if not args.stream or not result.success:
            print(result.content)
        elif result.output and not result.output.endswith("\n"):
            print()
    else:
        print(result.to_json(indent=2))
    return 0 if result.success else 1


def _looks_like_json(text: str) -> bool:
    """Arguments rather than a directory: JSON text, or ``-`` for standard input."""
    return text == "-" or text.lstrip()[:1] in ("{", "[", '"') or text.strip() in ("", "null")


def _check(args: argparse.Namespace) -> int:
    """Check every path given (`agenthost check sample_plugins/*`); 1 if any fails.

    ``--json`` prints one array with a record per path, so the output of any
    number of paths is one JSON document.
    """
    records: list[dict[str, Any]] | None = [] if args.json else None
    codes = [_check_one(Path(path), args, records) for path in args.path]
    if records is not None:
        print(json.dumps(records, indent=2, default=str))
    return max(codes)


def _check_one(given: Path, args: argparse.Namespace, records: list[dict[str, Any]] | None) -> int:
    """Check one path; its report is printed, or appended to ``records`` for ``--json``."""
    path = given.absolute()
    source = source_at(path.parent, path.name)
    if source is None:
        reason = not_loaded(path.parent, path.name)
        message = (
            reason or f"{path}: not a plugin (a .py file, a folder with __init__.py, or a .whl)"
        )
        _say(records, message, path=str(path), ok=False, error=message)
        return 1
    with tempfile.TemporaryDirectory(prefix="agenthost-check-") as scratch:
        result = load_source(source, Path(scratch), hooks=False)
        if isinstance(result, LoadFailure):
            text = f"failed: {result}"
            text += f"\n{_indent(result.traceback)}" if result.traceback else ""
            _say(records, text, path=str(path), ok=False, error=result.message,
                 file=result.file, line=result.line, traceback=result.traceback)  # fmt: skip
            return 1
        try:
            findings = [f for d in result.definitions for f in check_compatibility(d)]
            findings = _weighed(findings, args.provider)
            failed = bool(result.definition_errors) or any(f.severity == "error" for f in findings)
            if records is not None:
                records.append(_check_record(result, findings, failed))
            else:
                _report(result, findings, failed)
            return 1 if failed else 0
        finally:
            result.retire()


def _say(records: list[dict[str, Any]] | None, text: str, **record: Any) -> None:
    if records is None:
        print(text)
    else:
        records.append({"plugin": None, **record})


def _check_record(
    result: PluginVersion, findings: Sequence[Finding], failed: bool
) -> dict[str, Any]:
    return {
        "plugin": result.name,
        "path": str(result.source.path),
        "version": result.version,
        "ok": not failed,
        "tools": [{"name": d.name, "input_schema": d.input_schema} for d in result.definitions],
        "problems": [error.as_dict() for error in result.definition_errors],
        "warnings": list(result.warnings),
        "findings": [
            {"severity": f.severity, "provider": f.provider, "tool": f.tool,
             "message": f.message, "file": f.file, "line": f.line}
            for f in findings
        ],
    }  # fmt: skip


def _report(result: PluginVersion, findings: Sequence[Finding], failed: bool) -> None:
    definitions = result.definitions
    count = f"{len(definitions)} tool{'s' if len(definitions) != 1 else ''}"
    print(f"plugin {result.name} {result.version or ''}".rstrip() + f": {count}")
    for definition in definitions:
        parameters = ", ".join(definition.input_schema.get("properties") or {}) or "no parameters"
        print(f"  {definition.name}({parameters}): {definition.description or '(no description)'}")
    for problem in result.problems:
        print(f"error: {problem}")
    for warning in result.warnings:
        print(f"warning: {warning}")
    for finding in findings:
        print(finding)
    print("FAILED" if failed else "OK")


def _weighed(findings: list[Finding], providers: Sequence[str]) -> list[Finding]:
    """Findings for the providers asked about; without any, one provider's refusal warns.

    A plugin written for Claude should not fail its check because Gemini alone
    cannot take a ``dict`` parameter; ``--provider gemini`` makes it fail.
    """
    import dataclasses

    if providers:
        return [f for f in findings if f.provider in providers]
    refusing: dict[str, set[str]] = {}
    for finding in findings:
        if finding.severity == "error":
            refusing.setdefault(finding.tool, set()).add(finding.provider)
    weighed = []
    for finding in findings:
        if finding.severity == "error" and len(refusing[finding.tool]) == 1:
            finding = dataclasses.replace(
                finding,
                severity="warning",
                message=f"{finding.message} (only {finding.provider} refuses it; "
                f"--provider {finding.provider} makes this fail)",
            )
        weighed.append(finding)
    return weighed


def _new(args: argparse.Namespace) -> int:
    name = args.name
    if not name.isidentifier() or name.startswith("_"):
        print(f"plugin name {name!r} must be a Python identifier that does not start with '_'")
        return 2
    target = Path(args.dir) / f"{name}.py"
    if target.exists():
        print(f"{target} exists; choose another name")
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(TEMPLATE.format(name=name))
    print(f"wrote {target}; check it with: agenthost check {target}")
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "watch": _watch,
    "serve": _serve,
    "list": _list,
    "check": _check,
    "new": _new,
    "schema": _schema,
    "call": _call,
}

if __name__ == "__main__":
    raise SystemExit(main())
