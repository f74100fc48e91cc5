"""``agenthost new``: write a commented plugin template to start from."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agenthost._cli.arguments import add_command, fail

__all__ = ["TEMPLATE", "add_parser", "run"]

TEMPLATE = '''\
"""{name}: an agenthost plugin.

Every function marked @tool becomes a tool. Its name, parameters, their types,
defaults and the docstring become the JSON Schema the model sees. Save the
file while `agenthost watch` runs and the new version is live at once.
"""

from typing import Annotated, Literal

from agenthost import tool
from pydantic import Field

__version__ = "0.1.0"


@tool
def {name}_echo(
    text: Annotated[str, Field(description="What to send back")],
    times: int = 1,
    style: Literal["plain", "shout"] = "plain",
) -> str:
    """Send the text back, repeated.

    Args:
        times: How many times to repeat it.
        style: "shout" returns upper case.
    """
    result = " ".join([text] * times)
    return result.upper() if style == "shout" else result


# Options: @tool(name=..., permissions={{"http.get"}}, timeout=10, read_only=True, ...)
# A parameter annotated ToolContext receives the call's context (never in the schema):
#
# from agenthost import ToolContext
#
# @tool(permissions={{"fs.read"}}, timeout=5)
# def read_note(path: str, ctx: ToolContext) -> str:
#     """Read a note."""
#     ...


def on_load() -> None:
    """Runs after this version is imported (open connections here)."""


def on_unload() -> None:
    """Runs when this version is retired, once its last call ended (close them here)."""
'''


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(commands, "new", run, help="write a commented plugin template")
    sub.add_argument("name", help="plugin name (a Python identifier)")
    sub.add_argument("--dir", default="plugins", help="where to write it (./plugins)")


def run(args: argparse.Namespace) -> int:
    name = args.name
    if not name.isidentifier() or name.startswith("_"):
        fixed = "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_")
        fixed = f"tool_{fixed}" if not fixed or fixed[0].isdigit() else fixed
        return fail(
            "new",
            f"plugin name {name!r} must be a Python identifier that does not start with '_'; "
            f"try {fixed}",
        )
    target = Path(args.dir) / f"{name}.py"
    if target.exists():
        print(f"agenthost new: {target} exists; choose another name", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(TEMPLATE.format(name=name))
    print(f"wrote {target}; check it with: agenthost check {target}")
    return 0
