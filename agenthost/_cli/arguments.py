"""What the commands share: adding a command, the common options, and how they fail."""

from __future__ import annotations

import argparse
import dataclasses
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
    "seconds",
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
    sub.add_argument(
        "--import-timeout",
        type=seconds,
        metavar="SECONDS",
        help=f"how long a worker may take to import its plugin before the load fails "
        f"(default {WorkerOptions().import_timeout:g})",
    )


def host_options(args: argparse.Namespace) -> dict[str, Any]:
    """What the isolation options above ask of a ``PluginHost``."""
    workers = WorkerOptions(network=frozenset(args.allow_network))
    if args.import_timeout is not None:
        workers = dataclasses.replace(workers, import_timeout=args.import_timeout)
    return {"isolation": args.isolation, "sandbox": args.sandbox, "worker_options": workers}


def seconds(text: str) -> float:
    """A time limit: a number of seconds above 0 (0 and -1 do not mean "no limit")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text} is not more than 0 seconds")
    return value


def pause(text: str) -> float:
    """A wait that may be skipped: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):  # NaN too
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds from 0 up")
    return value


def fail(command: str, message: str) -> int:
    """Say what is wrong with the command line on stderr; exit code 2."""
    print(f"agenthost {command}: {message}", file=sys.stderr)
    return 2


def say_failures(host: PluginHost, command: str) -> None:
    """A definition list or a call answered without some plugins, or some of their tools,
    must say so."""
    for plugin in host.plugins():
        check = f"see agenthost check {plugin.path}"
        if plugin.status == "failed":
            print(
                f"{command}: plugin '{plugin.name}' failed to load, its tools are missing: "
                f"{plugin.error} ({plugin.location or plugin.path}); {check}",
                file=sys.stderr,
            )
        elif plugin.definition_errors:
            refused = [e.function for e in plugin.definition_errors]
            print(
                f"{command}: plugin '{plugin.name}' loaded without "
                f"{count(len(refused), 'function')} that cannot be tools ({', '.join(refused)}); "
                f"{check}",
                file=sys.stderr,
            )


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
