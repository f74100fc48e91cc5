"""Per-tool call metrics: counts, errors by code, latency percentiles, abandoned threads."""

from __future__ import annotations

import statistics
import threading
from collections import deque
from typing import Any

__all__ = ["Metrics"]

WINDOW = 2048  # latencies kept per tool for the percentiles


class _ToolStats:
    __slots__ = ("count", "errors", "latencies", "lock")

    def __init__(self) -> None:
        self.count = 0
        self.errors: dict[str, int] = {}
        self.latencies: deque[float] = deque(maxlen=WINDOW)
        self.lock = threading.Lock()


class Metrics:
    """Recorded by the executor for every call, including those refused before running."""

    def __init__(self) -> None:
        self._tools: dict[str, _ToolStats] = {}
        self._lock = threading.Lock()
        self.abandoned_threads = 0

    def record(self, tool: str, duration_ms: float, code: str | None) -> None:
        stats = self._tools.get(tool)
        if stats is None:
            with self._lock:
                stats = self._tools.setdefault(tool, _ToolStats())
        with stats.lock:
            stats.count += 1
            stats.latencies.append(duration_ms)
            if code is not None:
                stats.errors[code] = stats.errors.get(code, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        """Per tool: count, errors by code, latency_ms p50/p95/p99; and abandoned threads."""
        tools = {}
        for name, stats in sorted(self._tools.items()):
            with stats.lock:
                latencies = sorted(stats.latencies)
                count, errors = stats.count, dict(stats.errors)
            tools[name] = {"count": count, "errors": errors, "latency_ms": _percentiles(latencies)}
        return {"tools": tools, "abandoned_threads": self.abandoned_threads}

    def reset(self) -> None:
        with self._lock:
            self._tools = {}
            self.abandoned_threads = 0


def _percentiles(ordered: list[float]) -> dict[str, float]:
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    if len(ordered) == 1:
        return {"p50": ordered[0], "p95": ordered[0], "p99": ordered[0]}
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50": statistics.median(ordered), "p95": cuts[94], "p99": cuts[98]}
