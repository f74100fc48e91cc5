"""``agenthost serve``: the directory as an MCP server, over stdio or streamable HTTP.

The MCP SDK is an extra, so the serving modules are imported only here, when
the command runs: ``agenthost --help`` and every other command work without it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agenthost._cli.arguments import add_command, directory, fail, host_options, indent, isolation
from agenthost._cli.events import text_event
from agenthost._cli.hidden import Audience, grant_flags, hidden_line
from agenthost._common.install import install_command
from agenthost._directory.records import PluginEvent
from agenthost._host import PluginHost

if TYPE_CHECKING:
    from agenthost._serve.tokens import Caller

__all__ = ["add_parser", "run"]

EPILOG = """\
stdio carries the protocol; plugin events and logs go to stderr.

Claude Code:     claude mcp add tools -- {shell}
Claude Desktop (claude_desktop_config.json), Cursor (.cursor/mcp.json):
  {{"mcpServers": {{"tools": {{"command": {command},
                            "args": {args}}}}}}}
VS Code (.vscode/mcp.json):
  {{"servers": {{"tools": {{"type": "stdio", "command": {command},
                         "args": {vscode}}}}}}}

Over HTTP (agenthost serve plugins --http 8000):
  {{"mcpServers": {{"tools": {{"type": "http", "url": "http://127.0.0.1:8000/mcp"}}}}}}
  VS Code: {{"servers": {{"tools": {{"type": "http", "url": "http://127.0.0.1:8000/mcp"}}}}}}

--tokens FILE maps each bearer token to a session name and its grants:
  {{"<token>": {{"session": "alice", "grants": ["fs.read"]}}}}
Clients send it as the header  Authorization: Bearer <token>
"""


def epilog() -> str:
    """The client snippets, with the real path of this agenthost: a client starts it without
    the shell that activated a virtual environment, so a bare ``agenthost`` is not found."""
    script = Path(sys.executable).parent / "agenthost"
    start = [str(script)] if script.is_file() else [sys.executable, "-m", "agenthost"]
    here = Path("plugins").absolute()  # the default directory, where it is one
    plugins = str(here) if here.is_dir() else "/abs/path/to/plugins"
    return EPILOG.format(
        shell=shlex.join([*start, "serve", plugins]),
        command=json.dumps(start[0]),
        args=json.dumps([*start[1:], "serve", plugins]),
        vscode=json.dumps([*start[1:], "serve", "${workspaceFolder}/plugins"]),
    )


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands, "serve", run, needs_directory=True,
        help="serve the directory to MCP clients; the tool list follows every edit",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog(),
    )  # fmt: skip
    directory(sub)
    isolation(sub)
    sub.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="PERMISSION",
        help="grant every caller a permission (repeatable); tools needing others are hidden",
    )
    sub.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (host 127.0.0.1)",
    )
    sub.add_argument(
        "--tokens",
        metavar="FILE",
        type=Path,
        help="JSON file of bearer tokens, each with a session name and grants (HTTP only)",
    )
    sub.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name clients use for this server in Host, say a proxy's, with its port "
        "(lb.example:8080) or without (repeatable)",
    )
    sub.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web page origin allowed to call, e.g. https://app.example (repeatable)",
    )
    sub.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="change a per-caller quota or time limit, e.g. sessions=32 (repeatable, HTTP "
        "only; names and defaults in the README's HTTP section)",
    )


def run(args: argparse.Namespace) -> int:
    try:  # before anything starts: without the SDK nothing below can work
        import agenthost._serve.http
        import agenthost._serve.server  # noqa: F401
    except ImportError:
        print(f"agenthost serve needs the MCP SDK: {install_command('mcp')}", file=sys.stderr)
        return 2
    if args.http is not None:
        return _over_http(args)
    http_only = {"--tokens": args.tokens is not None, "--limit": args.limit,
                 "--allow-host": args.allow_host, "--allow-origin": args.allow_origin}  # fmt: skip
    given = [flag for flag, value in http_only.items() if value]
    if given:
        return fail("serve", f"{given[0]} applies to HTTP: add --http [HOST:]PORT")
    from agenthost._serve.server import McpServer

    server = McpServer(_host(args, [_everyone()]), grants=args.grant)
    _freeze_libraries()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve_stdio())
    return 0


def _over_http(args: argparse.Namespace) -> int:
    from agenthost._serve.http import is_loopback, parse_address, serve_http
    from agenthost._serve.limits import Limits
    from agenthost._serve.server import McpServer
    from agenthost._serve.tokens import TokenError, load_tokens, readable_by_others

    try:
        bind, port = parse_address(args.http)
        limits = Limits.parse(args.limit)
        tokens = load_tokens(args.tokens) if args.tokens is not None else None
    except (ValueError, TokenError) as exc:
        return fail("serve", str(exc))
    if tokens is None and not is_loopback(bind):
        return fail(
            "serve",
            f"refusing to serve {bind} without --tokens: anyone who can reach it could call "
            "your tools. Bind 127.0.0.1, or pass --tokens FILE (see agenthost serve --help).",
        )
    if args.tokens is not None and readable_by_others(args.tokens):
        print(f"warning: {args.tokens} is readable by other users (chmod 600 it)", file=sys.stderr)
    host = _host(args, _audiences(args.tokens, tokens))
    server = McpServer(host, grants=args.grant)
    for caller in (tokens or {}).values():
        host.permissions.grant(caller.session, *args.grant, *caller.grants)

    def ready(url: str) -> None:
        who = f" for {len(tokens)} tokens" if tokens else ""
        print(f"serving MCP at {url}{who} (Ctrl-C to stop)", file=sys.stderr, flush=True)

    _freeze_libraries()
    try:
        asyncio.run(serve_http(server, bind, port, tokens=tokens, hosts=args.allow_host,
                               origins=args.allow_origin, limits=limits, ready=ready))  # fmt: skip
    except OSError as exc:
        return fail("serve", f"cannot listen on {args.http}: {exc.strerror or exc}")
    print("stopped", file=sys.stderr, flush=True)
    return 0


def _host(args: argparse.Namespace, audiences: Sequence[Audience]) -> PluginHost:
    host = PluginHost(Path(args.dir), watch=True, **host_options(args))

    def log(event: PluginEvent) -> None:
        text_event(event, sys.stderr)
        if event.kind in ("loaded", "reloaded"):  # and which of its tools callers cannot see
            for audience in audiences:
                line = hidden_line(host, event.plugin, event.tool_names, audience)
                if line is not None:
                    print(indent(line), file=sys.stderr, flush=True)

    host.on_event(log)
    return host


def _everyone() -> Audience:
    """Callers without a token: they hold what ``--grant`` gives."""
    from agenthost._serve.server import SESSION

    return Audience("every caller", SESSION, lambda needed: f"add {grant_flags(needed)}")


def _audiences(path: Path | None, tokens: Mapping[str, Caller] | None) -> list[Audience]:
    """A token's session holds ``--grant`` and its own grants from the token file."""
    if path is None or tokens is None:
        return [_everyone()]
    sessions = sorted({caller.session for caller in tokens.values()})

    def fix(session: str) -> Callable[[Sequence[str]], str]:
        return lambda needed: (
            f"add {json.dumps(list(needed))} to the grants of session {session!r} in {path} "
            f"(or add {grant_flags(needed)} for every caller)"
        )

    return [Audience(f"session {session!r}", session, fix(session)) for session in sessions]


def _freeze_libraries() -> None:
    """Keep the collector from walking the loaded libraries on every full collection.

    A 1,000-tool listing leaves enough garbage to trigger several. Plugins load
    after this, so they stay collectable and replaced versions are still freed.
    """
    gc.freeze()
