"""Per-tool call metrics: counts, errors by code, latency percentiles, abandoned threads.

Recording is on every call's path, so it only appends to a deque (atomic, no
lock); the numbers are folded into per-tool statistics when a snapshot is
asked for, or when enough calls are waiting.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from typing import Any

__all__ = ["Metrics"]

WINDOW = 2048  # latencies kept per tool for the percentiles
FOLD_AT = 4096  # recorded calls waiting before they are folded in


class _ToolStats:
    __slots__ = ("count", "errors", "latencies")

    def __init__(self) -> None:
        self.count = 0
        self.errors: dict[str, int] = {}
        self.latencies: deque[float] = deque(maxlen=WINDOW)


class Metrics:
    """Recorded by the executor for every call, including those refused before running."""

    def __init__(self) -> None:
        self._recorded: deque[tuple[str, float, str | None]] = deque()
        self._tools: dict[str, _ToolStats] = {}
        self._lock = threading.Lock()
        self.abandoned_threads = 0

    def record(self, tool: str, duration_ms: float, code: str | None) -> None:
        recorded = self._recorded
        recorded.append((tool, duration_ms, code))
        if len(recorded) > FOLD_AT:
            self._fold(wait=False)

    def _fold(self, *, wait: bool) -> None:
        if not self._lock.acquire(blocking=wait):
            return  # another thread is folding right now
        try:
            recorded, tools = self._recorded, self._tools
            while recorded:
                tool, duration_ms, code = recorded.popleft()
                stats = tools.get(tool)
                if stats is None:
                    stats = tools[tool] = _ToolStats()
                stats.count += 1
                stats.latencies.append(duration_ms)
                if code is not None:
                    stats.errors[code] = stats.errors.get(code, 0) + 1
        finally:
            self._lock.release()

    def snapshot(self) -> dict[str, Any]:
        """Per tool: count, errors by code, latency_ms p50/p95/p99; and abandoned threads."""
        self._fold(wait=True)
        with self._lock:
            tools = {
                name: {
                    "count": stats.count,
                    "errors": dict(stats.errors),
                    "latency_ms": _percentiles(sorted(stats.latencies)),
                }
                for name, stats in sorted(self._tools.items())
            }
        return {"tools": tools, "abandoned_threads": self.abandoned_threads}

    def reset(self) -> None:
        with self._lock:
            self._recorded.clear()
            self._tools = {}
            self.abandoned_threads = 0


def _percentiles(ordered: list[float]) -> dict[str, float]:
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    if len(ordered) == 1:
        return {"p50": ordered[0], "p95": ordered[0], "p99": ordered[0]}
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50": statistics.median(ordered), "p95": cuts[94], "p99": cuts[98]}
