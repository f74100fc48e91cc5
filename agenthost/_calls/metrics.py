"""Per-tool call metrics: counts, errors by code, latency percentiles, abandoned threads.

Recording is on every call's path, so it takes no lock: a call is counted by
advancing an ``itertools.count`` and its latency appended to a bounded deque,
both atomic. Reading the count back consumes one step of the counter; the
snapshot, which runs under a lock, keeps track of the steps it consumed.
Errors are rare and take the lock.
"""

from __future__ import annotations

import itertools
import statistics
import threading
from collections import deque
from typing import Any

__all__ = ["Metrics"]

WINDOW = 2048  # latencies kept per tool for the percentiles


class _ToolStats:
    __slots__ = ("calls", "errors", "latencies", "reads")

    def __init__(self) -> None:
        self.calls = itertools.count()
        self.reads = 0  # steps of ``calls`` consumed by snapshots
        self.errors: dict[str, int] = {}
        self.latencies: deque[float] = deque(maxlen=WINDOW)

    def count(self) -> int:
        """Calls recorded so far (call under the metrics lock)."""
        value = next(self.calls) - self.reads
        self.reads += 1
        return value


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
        next(stats.calls)
        stats.latencies.append(duration_ms)
        if code is not None:
            with self._lock:
                stats.errors[code] = stats.errors.get(code, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        """Per tool: count, errors by code, latency_ms p50/p95/p99; and abandoned threads."""
        with self._lock:
            tools = {
                name: {
                    "count": stats.count(),
                    "errors": dict(stats.errors),
                    "latency_ms": _percentiles(sorted(_copy(stats.latencies))),
                }
                for name, stats in sorted(self._tools.items())
            }
        return {"tools": tools, "abandoned_threads": self.abandoned_threads}


def _copy(latencies: deque[float]) -> list[float]:
    while True:
        try:
            return list(latencies)
        except RuntimeError:  # appended to while we read: read again
            continue


def _percentiles(ordered: list[float]) -> dict[str, float]:
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    if len(ordered) == 1:
        return {"p50": ordered[0], "p95": ordered[0], "p99": ordered[0]}
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50": statistics.median(ordered), "p95": cuts[94], "p99": cuts[98]}
