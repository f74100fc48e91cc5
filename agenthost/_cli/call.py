"""``agenthost call``: run one tool call and print the result the model would see, or JSON."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from agenthost._calls.results import ToolResult
from agenthost._cli.arguments import (
    add_command,
    fail,
    host_options,
    isolation,
    say_failures,
    seconds,
)
from agenthost._host import PluginHost

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands, "call", run,
        help="run one tool call; print its text (ToolResult.content, what host.execute gives a "
        "model) or the whole ToolResult as JSON",
        usage="agenthost call [options] [DIR] TOOL [ARGS | -]",
    )  # fmt: skip
    sub.add_argument(
        "target",
        nargs="+",
        metavar="[DIR] TOOL [ARGS | -]",
        help="the plugin directory (./plugins), the tool, and its arguments as one JSON "
        'object (- reads them from stdin), e.g. agenthost call greet \'{"name": "Bob"}\'',
    )
    sub.add_argument("--session", help="the session the call runs as")
    sub.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="PERMISSION",
        help="grant the session a permission",
    )
    sub.add_argument(
        "--timeout", type=seconds, help="seconds before the call gives up (more than 0)"
    )
    isolation(sub)
    sub.add_argument(
        "--output",
        choices=("text", "json"),
        help="text (the answer the model would see) or json (the whole ToolResult); "
        "default: text on a terminal, json otherwise",
    )
    sub.add_argument("--stream", action="store_true", help="print output chunks as they come")


def run(args: argparse.Namespace) -> int:
    try:
        directory, name, arguments = _split(args.target)
    except ValueError as exc:
        return fail("call", str(exc))
    if arguments == "-":
        arguments = sys.stdin.read()
    as_text = args.output == "text" or (args.output is None and sys.stdout.isatty())
    with PluginHost(directory, **host_options(args)) as host:
        say_failures(host, "agenthost call")
        if args.grant:
            host.permissions.grant(args.session, *args.grant)
        result = _call(host, name, arguments, args, as_text)
    _print(result, args, as_text)
    return 0 if result.success else 1


_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")  # looser than a tool name: only to tell apart
_ONE_OBJECT = (
    "the arguments are one JSON object after the tool's name, e.g. "
    """agenthost call {tool} '{{"name": "Bob"}}' (or - to read them from stdin)"""
)


def _split(target: list[str]) -> tuple[str, str, str]:
    """``[DIR] TOOL [ARGS]``; ``ValueError`` says what is wrong (``greet name=Bob`` is
    arguments that are not JSON, not a directory called greet)."""
    given = list(target)
    if len(given) > 3 or (len(given) == 3 and _looks_like_json(given[1])):
        tool = given[1] if Path(given[0]).is_dir() else given[0]
        raise ValueError(_ONE_OBJECT.format(tool=tool))
    if len(given) == 1 and Path(given[0]).is_dir():
        raise ValueError(
            f"{given[0]} is a directory: name the tool after it, "
            f"e.g. agenthost call {given[0]} TOOL '{{}}' (agenthost list {given[0]} lists them)"
        )
    directory = "plugins"
    if len(given) == 3 or (len(given) == 2 and not _looks_like_json(given[1])):
        directory = given.pop(0)
        if len(given) == 1 and not _TOOL_NAME.fullmatch(given[0]) and not Path(directory).is_dir():
            raise ValueError(_ONE_OBJECT.format(tool=directory))
    if not Path(directory).is_dir():
        raise ValueError(f"{directory} is not a directory")
    return directory, given[0], given[1] if len(given) > 1 else "{}"


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
    denied = result.error is not None and result.error.code == "permission_denied"
    if denied:  # the CLI's way to grant, not the library's (the JSON keeps that)
        assert result.error is not None
        missing = list(result.error.details.get("missing", ()))
        print(
            f"agenthost call: tool {result.tool!r} needs {', '.join(missing)}; run again with "
            f"{' '.join(f'--grant {p}' for p in missing)}",
            file=sys.stderr,
        )
    if not as_text:
        print(result.to_json(indent=2))
    elif denied:
        return
    elif not args.stream or not result.success:
        print(result.content)
    elif result.output and not result.output.endswith("\n"):
        print()  # the streamed text ends the line
