"""The authoring API: bare @tool, options, and the three docstring styles."""

from typing import Annotated, Literal

from pydantic import Field

from agenthost import tool

__version__ = "1.2.0"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(name="get_weather", permissions={"http.get"}, timeout=10, read_only=True, tags={"weather"})
async def weather(
    city: Annotated[str, Field(description="City name, e.g. Beijing")],
    unit: Literal["celsius", "fahrenheit"] = "celsius",
) -> dict[str, float]:
    """Current weather for a city (Google-style docstring).

    Args:
        unit: Temperature unit.
    """
    return {"temperature": 21.5 if unit == "celsius" else 70.7}


@tool(examples=[{"text": "hello world", "limit": 1}, "Use before summarising long text."])
def split_words(text: str, limit: int = 100) -> list[str]:
    """Split text into words (NumPy-style docstring).

    Parameters
    ----------
    text
        The text to split.
    limit
        At most this many words.
    """
    return text.split()[:limit]


@tool(destructive=True, idempotent=True, permissions={"fs.write"})
def delete_note(note_id: str) -> str:
    """Delete a note (reST-style docstring).

    :param note_id: The note's identifier.
    """
    return f"deleted {note_id}"
