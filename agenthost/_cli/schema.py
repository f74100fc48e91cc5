"""``agenthost schema``: print the tool definitions in a provider's format."""

from __future__ import annotations

import argparse
import json

from agenthost._cli.arguments import add_command, directory, fail, say_failures
from agenthost._host import PluginHost
from agenthost._providers.exporters import FORMATS, STRICT_FORMATS

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands, "schema", run, needs_directory=True,
        help="print the tool definitions for a provider",
    )  # fmt: skip
    directory(sub)
    sub.add_argument(
        "--format", choices=FORMATS, default="openai", help="provider format (default: openai)"
    )
    sub.add_argument(
        "--strict", action="store_true", help="strict mode (openai, openai-responses, anthropic)"
    )


def run(args: argparse.Namespace) -> int:
    if args.strict and args.format not in STRICT_FORMATS:
        return fail(
            "schema",
            f"--format {args.format} has no strict mode (only {', '.join(STRICT_FORMATS)} do); "
            "drop --strict",
        )
    with PluginHost(args.dir) as host:
        say_failures(host, "agenthost schema")
        print(json.dumps(host.schemas(args.format, strict=args.strict), indent=2))
    return 0
