"""``agenthost serve``: the directory as an MCP server, over stdio or streamable HTTP.

The MCP SDK is an extra, so the serving modules are imported only here, when
the command runs: ``agenthost --help`` and every other command work without it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agenthost._cli.arguments import (
    add_command,
    directory,
    fail,
    host_options,
    indent,
    isolation,
    pause,
    seconds,
)
from agenthost._cli.events import text_event
from agenthost._cli.hidden import Audience, grant_flags, hidden_line
from agenthost._common.install import install_command
from agenthost._directory.records import PluginEvent
from agenthost._host import PluginHost

if TYPE_CHECKING:
    from agenthost._cluster.replica import Replica
    from agenthost._serve.server import McpServer
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

Many replicas behind a load balancer (any balancer, no sticky sessions):
  agenthost serve plugins --http 0.0.0.0:8001 --tokens tokens.json \
      --redis redis://redis:6379/0 --advertise http://10.0.0.5:8001/mcp
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
    _http_options(sub)
    _cluster_options(sub)


def _http_options(sub: argparse.ArgumentParser) -> None:
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
    sub.add_argument(
        "--drain-grace",
        type=pause,
        default=1.0,
        metavar="SECONDS",
        help="on SIGTERM, keep answering this long with /readyz at 503 before the port "
        "closes, so a balancer polling it stops sending work first (default 1)",
    )


def _cluster_options(sub: argparse.ArgumentParser) -> None:
    group = sub.add_argument_group(
        "many replicas (HTTP only; needs the cluster extra)",
        "Every replica given the same Redis and cluster name is one tool service: any "
        "replica answers any request, and every client hears every change.",
    )
    group.add_argument(
        "--redis",
        metavar="URL",
        default=os.environ.get("AGENTHOST_REDIS_URL"),
        help="join the cluster whose bus is this Redis, e.g. redis://redis:6379/0 "
        "(default: $AGENTHOST_REDIS_URL)",
    )
    group.add_argument(
        "--cluster-name",
        default="agenthost",
        metavar="NAME",
        help="the cluster's key prefix in Redis: clusters sharing one Redis differ by it",
    )
    group.add_argument(
        "--advertise",
        metavar="URL",
        help="the URL other replicas reach this one at (default: the bound address; "
        "required when binding 0.0.0.0), e.g. http://10.0.0.5:8001/mcp",
    )
    group.add_argument(
        "--state-key",
        action="append",
        default=[k for k in os.environ.get("AGENTHOST_STATE_KEY", "").split(",") if k],
        metavar="KEY",
        help="a key sealing multi-round-trip request state, the same on every replica "
        "(repeatable: the first seals, all open; default: one kept in Redis, or "
        "$AGENTHOST_STATE_KEY, comma-separated)",
    )
    group.add_argument(
        "--skew-wait",
        type=seconds,
        default=2.0,
        metavar="SECONDS",
        help="how long a call waits for a tool another replica serves and this one has "
        "not loaded yet (its directory syncs later), default 2",
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
                 "--allow-host": args.allow_host, "--allow-origin": args.allow_origin,
                 "--redis": args.redis}  # fmt: skip
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
    if args.redis and not args.advertise and bind in ("0.0.0.0", "::", ""):
        return fail("serve", f"--redis with --http {args.http}: add --advertise URL, "
                    "where other replicas reach this one (http://10.0.0.5:8001/mcp)")  # fmt: skip
    host = _host(args, _audiences(args.tokens, tokens))
    callers = sorted({caller.session for caller in (tokens or {}).values()})
    server = McpServer(host, grants=args.grant, callers=callers)
    for caller in (tokens or {}).values():
        host.permissions.grant(caller.session, *args.grant, *caller.grants)
    cluster = _cluster(args, server) if args.redis else None
    if isinstance(cluster, int):
        return cluster

    def ready(url: str) -> None:
        who = f" for {len(tokens)} tokens" if tokens else ""
        print(f"serving MCP at {url}{who} (Ctrl-C to stop)", file=sys.stderr, flush=True)
        if cluster is not None:
            print(f"replica {cluster.replica} of cluster {args.cluster_name!r}, bus "
                  f"{_masked(args.redis)}", file=sys.stderr, flush=True)  # fmt: skip

    _freeze_libraries()
    try:
        asyncio.run(serve_http(server, bind, port, tokens=tokens, hosts=args.allow_host,
                               origins=args.allow_origin, limits=limits, ready=ready,
                               drain_grace=args.drain_grace, cluster=cluster))  # fmt: skip
    except OSError as exc:
        return fail("serve", f"cannot listen on {args.http}: {exc.strerror or exc}")
    except _cluster_errors(cluster) as exc:
        return fail("serve", f"--redis {_masked(args.redis)}: {exc}")
    print("stopped", file=sys.stderr, flush=True)
    return 0


def _cluster(args: argparse.Namespace, server: McpServer) -> Replica | int:
    """This server as a replica of the cluster on ``--redis``, or the exit code of why not."""
    try:
        from agenthost._cluster.replica import Replica
    except ImportError:
        return fail("serve", f"--redis needs the cluster extra: {install_command('cluster')}")
    try:
        return Replica(server, args.redis, name=args.cluster_name, advertise=args.advertise,
                       state_keys=args.state_key, skew_s=args.skew_wait,
                       access=_access(args))  # fmt: skip
    except ValueError as exc:  # redis-py's word on a malformed URL
        return fail("serve", f"--redis {_masked(args.redis)}: {exc}")


def _cluster_errors(cluster: Replica | None) -> tuple[type[Exception], ...]:
    """What stops a replica from joining for good (none without a cluster)."""
    if cluster is None:
        return ()
    from agenthost._cluster.replica import ClusterError

    return (ClusterError,)


def _access(args: argparse.Namespace) -> str:
    """A digest of who may call what: replicas that differ in it answer differently."""
    tokens = args.tokens.read_bytes() if args.tokens is not None else b""
    given = json.dumps(sorted(args.grant)).encode()
    return hashlib.sha256(hashlib.sha256(tokens).digest() + given).hexdigest()[:32]


def _masked(url: str) -> str:
    from agenthost._cluster.status import masked

    return masked(url)


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
