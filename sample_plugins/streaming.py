"""Generator tools stream their output; async tools run on the event loop."""

import asyncio
from collections.abc import AsyncIterator, Iterator

from agenthost import tool


@tool
def count_to(n: int) -> Iterator[str]:
    """Count from 1 to n, one line at a time."""
    for i in range(1, n + 1):
        yield f"{i}\n"


@tool(timeout=5)
async def tick(times: int = 3, interval: float = 0.01) -> AsyncIterator[str]:
    """Emit a tick every interval seconds."""
    for i in range(times):
        await asyncio.sleep(interval)
        yield f"tick {i}\n"
