"""What process isolation costs: per call, per worker start, per timeout, under threads.

Workers in their sandbox (bubblewrap, the default where the system allows it)
are measured next to plain worker processes (``sandbox="off"``) in the same run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Literal

from agenthost import PluginHost
from benchmarks._harness import Stats, calls_per_second, measure, scaled, table

PLUGIN = """
import time
from agenthost import tool

@tool(timeout=False)
def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b

@tool
def nap(seconds: float) -> str:
    '''Sleep.'''
    time.sleep(seconds)
    return "woke"
"""


def _hosts(directory: Path) -> tuple[PluginHost, PluginHost, PluginHost]:
    (directory / "calc.py").write_text(PLUGIN)
    options = {"installed": False, "cache_dir": directory / "cache"}
    near = PluginHost(directory, **options).start()  # type: ignore[arg-type]
    far = PluginHost(directory, isolation="process", **options).start()  # type: ignore[arg-type]
    plain = PluginHost(directory, isolation="process", sandbox="off", **options).start()  # type: ignore[arg-type]
    assert far.plugins()[0].worker.sandbox == "bwrap", "no sandbox here: install bubblewrap"
    return near, far, plain


def _per_call(near: PluginHost, far: PluginHost, plain: PluginHost) -> None:
    arguments = '{"a": 1, "b": 2}'
    rows: list[tuple[str, Stats | None]] = [
        ("in-process, inline (no timeout)", measure(lambda: near.execute("add", arguments))),
        ("in-process, worker thread (timeout)",
         measure(lambda: near.execute("add", arguments, timeout=10))),
        ("process, sandboxed, no timeout", measure(lambda: far.execute("add", arguments))),
        ("process, sandboxed, with a timeout",
         measure(lambda: far.execute("add", arguments, timeout=10))),
        ("process, no sandbox, no timeout", measure(lambda: plain.execute("add", arguments))),
        ("process, no sandbox, with a timeout",
         measure(lambda: plain.execute("add", arguments, timeout=10))),
    ]  # fmt: skip
    table("per call (sync tool, 2 int arguments)", rows, "in-process, worker thread (timeout)")


def _starts(directory: Path) -> None:
    restarts = scaled(30, 1)
    cold = []
    for _ in range(scaled(5, 1)):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import agenthost._isolation.worker"], check=True)
        cold.append(time.perf_counter() - started)
    rows: list[tuple[str, Stats | None]] = [
        ("fresh interpreter importing agenthost (cold)", Stats(cold))
    ]
    sandboxes: list[tuple[str, Literal["auto", "off"]]] = [
        ("sandboxed", "auto"),
        ("no sandbox", "off"),
    ]
    for label, sandbox in sandboxes:
        warm = []
        with PluginHost(directory, installed=False, isolation="process", sandbox=sandbox,
                        cache_dir=directory / "cache") as host:  # fmt: skip
            [plugin] = host.plugins()
            for _ in range(restarts):
                host.execute("nap", {"seconds": 5}, timeout=0.05)  # kills the worker
                time.sleep(0.3)  # let the spare pool refill, as it would between crashes
                started = time.perf_counter()
                host.execute("add", {"a": 1, "b": 2})  # starts, loads and calls a fresh worker
                warm.append(time.perf_counter() - started)
            assert plugin.worker.restarts >= restarts
        rows.append((f"from the pool, {label}: load plugin + first call", Stats(warm)))
    table("worker start", rows)


def _timeouts(far: PluginHost) -> None:
    freed, gone = [], []
    [plugin] = far.plugins()
    limit = 0.1
    for _ in range(scaled(20, 3)):
        far.execute("add", {"a": 1, "b": 2})  # a running worker
        pid = plugin.worker.pid
        started = time.perf_counter()
        result = far.execute("nap", {"seconds": 5}, timeout=limit)
        freed.append(time.perf_counter() - started - limit)
        assert result.error is not None
        assert result.error.code == "timeout"
        while Path(f"/proc/{pid}").exists() and _alive(pid):
            time.sleep(0.0005)
        gone.append(time.perf_counter() - started - limit)
    table("after a timeout", [
        ("caller holds its result (beyond the limit)", Stats(freed)),
        ("worker process gone (beyond the limit)", Stats(gone)),
    ])  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _throughput(near: PluginHost, far: PluginHost, plain: PluginHost) -> None:
    seconds = scaled(2.0, 0.1)
    print(f"\n## calls per second with 8 threads ({seconds:g} s each)")
    for label, host, timeout in [
        ("in-process, worker thread", near, 10.0),
        ("process, sandboxed", far, None),
        ("process, no sandbox", plain, None),
    ]:
        call = partial(host.execute, "add", '{"a": 1, "b": 2}', timeout=timeout)
        rate = calls_per_second(call, seconds=seconds)
        print(f"   {label}: {rate:,.0f} calls/s")


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="agenthost-bench-isolation-"))
    near, far, plain = _hosts(directory)
    try:
        _per_call(near, far, plain)
        _timeouts(far)
        _throughput(near, far, plain)
    finally:
        near.stop()
        far.stop()
        plain.stop()
    _starts(directory)


if __name__ == "__main__":
    main()
