"""What the commands share: adding a command, the common options, and how they fail."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from agenthost._host import PluginHost
from agenthost._isolation.options import SANDBOXES, WorkerOptions

__all__ = [
    "add_command",
    "count",
    "directory",
    "fail",
    "host_options",
    "indent",
    "isolation",
    "say_failures",
]


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
    """``--isolation``, and how far worker processes are kept from the host."""
    sub.add_argument(
        "--isolation",
        choices=("in-process", "process"),
        help="where plugins run: in the host (default, unless a plugin asks for its own "
        "process) or each in a worker process that cannot crash, hang or reach the host",
    )
    sub.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default="auto",
        help="workers in a kernel sandbox: where the system allows (auto, the default), "
        "always or not at all (required refuses to start them without), or never (off)",
    )
    sub.add_argument(
        "--allow-network",
        action="append",
        default=[],
        metavar="PLUGIN",
        help="let this plugin's workers use the network, for tools that declare a network "
        "permission such as http.get (repeatable); others have none",
    )


def host_options(args: argparse.Namespace) -> dict[str, Any]:
    """What the isolation options above ask of a ``PluginHost``."""
    workers = WorkerOptions(network=frozenset(args.allow_network))
    return {"isolation": args.isolation, "sandbox": args.sandbox, "worker_options": workers}


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
