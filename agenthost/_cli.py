"""The ``agenthost`` command line. Only the CLI configures logging."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from agenthost import __version__

    parser = argparse.ArgumentParser(
        prog="agenthost", description="Host AI-agent tools from a hot-reloaded plugin directory."
    )
    parser.add_argument("--version", action="version", version=f"agenthost {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
