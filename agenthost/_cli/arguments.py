"""What the commands share: adding a command, the common options, and how they fail."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from agenthost._host import PluginHost

__all__ = ["add_command", "count", "directory", "fail", "indent", "isolation", "say_failures"]


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    needs_directory: bool = False,
    **options: Any,
) -> argparse.ArgumentParser:
    """A subcommand that runs ``run(args)``; ``needs_directory``: refuse a missing ``dir``."""
    sub = commands.add_parser(name, **options)
    sub.set_defaults(run=run, needs_directory=needs_directory)
    return sub


def directory(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("dir", nargs="?", default="plugins", help="plugin directory (./plugins)")


def isolation(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--isolation",
        choices=("in-process", "process"),
        help="where plugins run: in the host (default, unless a plugin asks for its own "
        "process) or each in a worker process that cannot crash or hang the host",
    )


def fail(command: str, message: str) -> int:
    """Say what is wrong with the command line on stderr; exit code 2."""
    print(f"agenthost {command}: {message}", file=sys.stderr)
    return 2


def say_failures(host: PluginHost, command: str) -> None:
    """A definition list or a call answered without some plugins must say so."""
    for plugin in host.plugins():
        if plugin.status == "failed":
            print(
                f"{command}: plugin '{plugin.name}' failed to load, its tools are missing: "
                f"{plugin.error} ({plugin.location or plugin.path}); see agenthost check "
                f"{plugin.path}",
                file=sys.stderr,
            )


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
