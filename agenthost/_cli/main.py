"""``agenthost``: parse the command line, configure logging, run one command.

Each command is a module of this room with ``add_parser`` (its options) and
``run`` (what it does); ``main(argv)`` is what tests call, and only the CLI
configures logging. While a command runs, what it prints and logs passes
through :class:`_Inert`: text from plugins and tools (an error message, a
version, a tool's output) reaches the terminal with its controls as escapes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

from loguru import logger

from agenthost._cli import call, check, cluster, listing, new, schema, serve, watch
from agenthost._common.text import inert
from agenthost._version import __version__

__all__ = ["main", "parser"]

COMMANDS = (watch, listing, check, new, call, serve, cluster, schema)  # the order of --help


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
    with _inert_output(), warnings.catch_warnings():
        warnings.showwarning = _log_warning  # a SandboxWarning reads like the CLI's own lines
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


def _log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    logger.warning("{}", message)


@contextlib.contextmanager
def _inert_output() -> Iterator[None]:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Inert(out), _Inert(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


class _Inert(io.TextIOBase):
    """A text stream that writes controls as escapes, but for the colours the CLI uses;
    bytes written to ``buffer`` (the MCP stdio frames) pass as they are."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        parts = _COLOURS.split(text)
        self._stream.write("".join(p if i % 2 else inert(p) for i, p in enumerate(parts)))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # the stream's, read-only
        return self._stream.encoding

    @property
    def buffer(self) -> BinaryIO:
        return self._stream.buffer


_COLOURS = re.compile("(\x1b\\[(?:0|3[1-6])m)")  # what events.py writes


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
