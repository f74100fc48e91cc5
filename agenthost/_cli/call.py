"""``agenthost call``: run one tool call and print the result the model would see, or JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agenthost._calls.results import ToolResult
from agenthost._cli.arguments import add_command, fail, host_options, isolation, say_failures
from agenthost._host import PluginHost

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands, "call", run, help="run one tool call and print the ToolResult as JSON"
    )
    sub.add_argument(
        "target",
        nargs="+",
        metavar="[DIR] TOOL [ARGS]",
        help="plugin directory, tool, JSON arguments",
    )
    sub.add_argument("--session", help="the session the call runs as")
    sub.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="PERMISSION",
        help="grant the session a permission",
    )
    sub.add_argument("--timeout", type=float, help="seconds before the call gives up")
    isolation(sub)
    sub.add_argument(
        "--output",
        choices=("text", "json"),
        help="text (the answer the model would see) or json (the whole ToolResult); "
        "default: text on a terminal, json otherwise",
    )
    sub.add_argument("--stream", action="store_true", help="print output chunks as they come")


def run(args: argparse.Namespace) -> int:
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
        return fail("call", f"{directory} is not a directory")
    as_text = args.output == "text" or (args.output is None and sys.stdout.isatty())
    with PluginHost(directory, **host_options(args)) as host:
        say_failures(host, "agenthost call")
        if args.grant:
            host.permissions.grant(args.session, *args.grant)
        result = _call(host, name, arguments, args, as_text)
    _print(result, args, as_text)
    return 0 if result.success else 1


def _looks_like_json(text: str) -> bool:
    """Arguments rather than a directory: JSON text, or ``-`` for standard input."""
    return text == "-" or text.lstrip()[:1] in ("{", "[", '"') or text.strip() in ("", "null")


def _call(
    host: PluginHost, name: str, arguments: str, args: argparse.Namespace, as_text: bool
) -> ToolResult:
    """The call's result; with ``--stream`` its chunks are printed as they come."""
    if not args.stream:
        return host.execute(name, arguments, session=args.session, timeout=args.timeout)
    result = None
    for event in host.stream(name, arguments, session=args.session, timeout=args.timeout):
        if event.kind == "delta":
            print(event.text, end="", file=sys.stdout if as_text else sys.stderr, flush=True)
        elif event.kind == "completed":
            result = event.result
    assert result is not None  # a stream always ends with `completed`
    return result


def _print(result: ToolResult, args: argparse.Namespace, as_text: bool) -> None:
    if result.error is not None and result.error.code == "permission_denied":
        missing = " ".join(f"--grant {p}" for p in result.error.details.get("missing", ()))
        print(f"agenthost call: to allow it, run again with {missing}", file=sys.stderr)
    if not as_text:
        print(result.to_json(indent=2))
    elif not args.stream or not result.success:
        print(result.content)
    elif result.output and not result.output.endswith("\n"):
        print()  # the streamed text ends the line
