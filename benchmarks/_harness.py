"""Timing helpers: calibrated repeats, median and spread, a machine line, a table.

A smoke run (``python -m benchmarks --smoke``) goes through every benchmark's
code with a few iterations, so that ``make test`` notices a benchmark that no
longer runs; its figures say nothing about speed.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
_smoke = False  # set once per interpreter by `python -m benchmarks --smoke`


def start_smoke_run() -> None:
    """From now on, every measurement takes a few iterations instead of a calibrated many."""
    global _smoke
    _smoke = True


def smoke() -> bool:
    return _smoke


def scaled(full: T, few: T) -> T:
    """``full`` in a real run, ``few`` in a smoke run: sizes, counts and durations."""
    return few if smoke() else full


@dataclass(frozen=True)
class Stats:
    """Per-call times in seconds over several repeats."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p25(self) -> float:
        return statistics.quantiles(self.samples, n=4)[0] if len(self.samples) > 1 else self.median

    @property
    def p75(self) -> float:
        return statistics.quantiles(self.samples, n=4)[2] if len(self.samples) > 1 else self.median

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.p75 - self.p25) / self.median if self.median else 0.0


def measure(fn: Callable[[], Any], *, repeat: int = 15, budget: float = 0.6) -> Stats:
    """Time ``fn`` per call: ``repeat`` rounds, each long enough to be above timer noise."""
    repeat, budget = scaled((repeat, budget), (min(repeat, 3), 0.0))
    fn()  # warm up caches and lazy imports
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed * repeat >= budget or number >= 1_000_000:
            break
        number *= 2
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples.append((time.perf_counter() - start) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return Stats(samples)


def measure_async(make: Callable[[], Any], *, repeat: int = 15, budget: float = 0.6) -> Stats:
    """Like :func:`measure` for a coroutine function, awaited in one running event loop."""
    import asyncio

    return asyncio.run(ameasure(make, repeat=repeat, budget=budget))


async def ameasure(make: Callable[[], Any], *, repeat: int = 15, budget: float = 0.6) -> Stats:
    """:func:`measure_async` inside a loop that is already running (clients connected in it)."""
    repeat, budget = scaled((repeat, budget), (min(repeat, 3), 0.0))
    await make()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            await make()
        if (time.perf_counter() - start) * repeat >= budget or number >= 1_000_000:
            break
        number *= 2
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            await make()
        samples.append((time.perf_counter() - start) / number)
    return Stats(samples)


def measure_once(fn: Callable[[], Any], *, repeat: int = 7) -> Stats:
    """Time a call that is too slow or has side effects to be looped: one call per sample."""
    repeat = scaled(repeat, min(repeat, 3))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Stats(samples)


def format_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def table(title: str, rows: list[tuple[str, Stats | None]], baseline: str | None = None) -> None:
    """Print rows as median, interquartile range and the ratio to ``baseline``."""
    print(f"\n## {title}")
    print(f"{'':44} {'median':>10} {'p25..p75':>21} {'spread':>7} {'ratio':>7}")
    base = dict(rows).get(baseline) if baseline else None
    for name, stats in rows:
        if stats is None:
            print(f"{name:44} {'n/a (not installed)':>10}")
            continue
        ratio = f"{stats.median / base.median:.2f}x" if base else ""
        iqr = f"{format_time(stats.p25)}..{format_time(stats.p75)}"
        print(
            f"{name:44} {format_time(stats.median):>10} {iqr:>21} "
            f"{stats.spread * 100:>6.1f}% {ratio:>7}"
        )


def optional(fn: Callable[[], T]) -> T | None:
    """Run a peer's benchmark if the peer is installed (the ``bench`` extra); None if not.

    Only a missing package counts as not installed: an installed peer whose API
    moved fails the run, or its row would quietly read "not installed" for ever.
    """
    try:
        return fn()
    except ImportError as exc:
        if installed((exc.name or "").partition(".")[0]):
            raise
        return None


def installed(package: str) -> bool:
    """Whether ``package`` can be imported here."""
    try:
        return bool(package) and importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def rss_bytes(pid: int | None = None) -> int:
    """Resident memory of a process (this one by default), with psutil or from /proc."""
    if installed("psutil"):
        psutil = importlib.import_module("psutil")
        return int(psutil.Process(pid).memory_info().rss)
    with open(f"/proc/{pid or 'self'}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used, with psutil or from /proc."""
    if installed("psutil"):
        times = importlib.import_module("psutil").Process(pid).cpu_times()
        return float(times.user + times.system)
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def calls_per_second(call: Callable[[], Any], threads: int = 8, seconds: float = 2.0) -> float:
    """How many times ``threads`` threads together run ``call`` per second."""
    stop = threading.Event()
    counts = [0] * threads

    def work(index: int) -> None:
        while not stop.is_set():
            call()
            counts[index] += 1

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    return sum(counts) / seconds
