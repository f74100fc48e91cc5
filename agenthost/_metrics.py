"""Per-tool call metrics: counts, errors by code, latency percentiles, abandoned threads.

Recording is on every call's path, so each thread records into its own
statistics without any lock; a snapshot adds the threads' numbers up.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from typing import Any

__all__ = ["Metrics"]

WINDOW = 1024  # latencies kept per tool and thread for the percentiles


class _ToolStats:
    __slots__ = ("count", "errors", "latencies")

    def __init__(self) -> None:
        self.count = 0
        self.errors: dict[str, int] = {}
        self.latencies: deque[float] = deque(maxlen=WINDOW)


class Metrics:
    """Recorded by the executor for every call, including those refused before running."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._threads: list[dict[str, _ToolStats]] = []
        self._lock = threading.Lock()
        self.abandoned_threads = 0

    def record(self, tool: str, duration_ms: float, code: str | None) -> None:
        try:
            tools: dict[str, _ToolStats] = self._local.tools
        except AttributeError:
            tools = self._local.tools = {}
            with self._lock:
                self._threads.append(tools)
        stats = tools.get(tool)
        if stats is None:
            stats = tools[tool] = _ToolStats()
        stats.count += 1
        stats.latencies.append(duration_ms)
        if code is not None:
            stats.errors[code] = stats.errors.get(code, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        """Per tool: count, errors by code, latency_ms p50/p95/p99; and abandoned threads."""
        with self._lock:
            threads = list(self._threads)
        merged: dict[str, dict[str, Any]] = {}
        for tools in threads:
            for name, stats in list(tools.items()):
                into = merged.setdefault(name, {"count": 0, "errors": {}, "latencies": []})
                into["count"] += stats.count
                for code, n in list(stats.errors.items()):
                    into["errors"][code] = into["errors"].get(code, 0) + n
                into["latencies"] += _copy(stats.latencies)
        tools_out = {
            name: {
                "count": data["count"],
                "errors": data["errors"],
                "latency_ms": _percentiles(sorted(data["latencies"])),
            }
            for name, data in sorted(merged.items())
        }
        return {"tools": tools_out, "abandoned_threads": self.abandoned_threads}

    def reset(self) -> None:
        with self._lock:
            self._threads = []
            self._local = threading.local()
            self.abandoned_threads = 0


def _copy(latencies: deque[float]) -> list[float]:
    for _ in range(10):  # another thread may append while we read
        try:
            return list(latencies)
        except RuntimeError:
            continue
    return []


def _percentiles(ordered: list[float]) -> dict[str, float]:
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    if len(ordered) == 1:
        return {"p50": ordered[0], "p95": ordered[0], "p99": ordered[0]}
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50": statistics.median(ordered), "p95": cuts[94], "p99": cuts[98]}
