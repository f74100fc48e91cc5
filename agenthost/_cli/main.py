"""``agenthost``: parse the command line, configure logging, run one command.

Each command is a module of this room with ``add_parser`` (its options) and
``run`` (what it does); ``main(argv)`` is what tests call, and only the CLI
configures logging.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from loguru import logger

from agenthost._cli import call, check, listing, new, schema, serve, watch
from agenthost._version import __version__

__all__ = ["main", "parser"]

COMMANDS = (watch, listing, check, new, call, serve, schema)  # in the order --help lists them


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="agenthost", description="Host AI-agent tools from a hot-reloaded plugin directory."
    )
    cli.add_argument("--version", action="version", version=f"agenthost {__version__}")
    cli.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    commands = cli.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    for sub in commands.choices.values():  # `agenthost list -v` as well as `agenthost -v list`
        sub.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="log debug details to stderr",
        )
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    cli = parser()
    args = cli.parse_args(argv)
    if args.command is None:
        cli.print_help(sys.stderr)
        return 2
    logger.remove()
    logger.add(
        sys.stderr,
        level="DEBUG" if getattr(args, "verbose", False) else "WARNING",
        format="{level}: {message}",
    )
    logger.enable("agenthost")
    try:
        if args.needs_directory and not _directory_ready(args):
            return 2
        code: int = args.run(args)
        return code
    except BrokenPipeError:  # `agenthost list | head`: the reader left, nothing to report
        _silence_stdout()
        return 0
    finally:
        logger.disable("agenthost")


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
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(main())
