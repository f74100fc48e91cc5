"""A small example plugin: edit it while `make watch` runs and see it reload."""

from agenthost import tool

__version__ = "1.0"


@tool
def greet(name: str, excited: bool = False) -> str:
    """Greet someone by name.

    Args:
        name: Who to greet.
        excited: End with an exclamation mark.
    """
    return f"Hello, {name}{'!' if excited else '.'}"


@tool(read_only=True, idempotent=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
