"""Unloading leaves nothing behind: 1,000 reloads, old modules collected, memory flat."""

from __future__ import annotations

import gc
import sys
import tracemalloc
import weakref
from collections.abc import Callable
from pathlib import Path

from helpers import call, write

from agenthost import PluginHost
from agenthost._directory.namespace import ROOT

SOURCE = """
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from pydantic import BaseModel
from agenthost import tool

GENERATION = {n}


@dataclass
class Window:
    start: int
    end: int = 0


class Query(BaseModel):
    text: str
    window: Window | None = None


@tool
def search(query: Query, mode: Literal["fast", "deep"] = "fast") -> dict[str, int]:
    "Search, generation {n}."
    return {{"generation": GENERATION}}


@tool
def ping(times: int = 1) -> str:
    "Ping."
    return "pong" * times


def on_unload() -> None:
    pass
"""


def test_reloading_a_plugin_1000_times_leaves_nothing_behind(
    plugin_dir: Path, make_host: Callable[..., PluginHost]
) -> None:
    path = write(plugin_dir / "churn.py", SOURCE.format(n=0))
    host = make_host(plugin_dir).start()
    old_modules: list[weakref.ref[object]] = []
    baseline_modules = 0
    baseline: tracemalloc.Snapshot | None = None
    try:
        for generation in range(1, 1001):
            owner = host._snapshot.tools["search"].owner
            assert owner is not None
            assert owner.namespace is not None
            old_modules.append(weakref.ref(sys.modules[owner.namespace.prefix + ".churn"]))
            path.write_text(SOURCE.format(n=generation))
            change = host.rescan()
            assert change.changed == ("search",)  # ping's definition did not change
            if generation == 700:  # warmed up: from here on, anything kept is a leak
                gc.collect()
                baseline_modules = len(sys.modules)
                tracemalloc.start()
                baseline = tracemalloc.take_snapshot()
        gc.collect()
        growth = _small_growth(tracemalloc.take_snapshot(), baseline)
    finally:
        tracemalloc.stop()
    assert call(host, "search", query={"text": "x"}) == {"generation": 1000}
    assert [ref for ref in old_modules if ref() is not None] == []
    assert len(sys.modules) == baseline_modules
    assert (
        len([n for n in sys.modules if n.startswith(ROOT + ".")]) == 2
    )  # the version package + module
    assert growth < 1024 * 1024, f"memory grew by {growth / 1024:.0f} KiB over 300 reloads"


def _small_growth(now: tracemalloc.Snapshot, before: tracemalloc.Snapshot | None) -> int:
    """Bytes kept since ``before`` in blocks under 64 KiB, where a per-reload leak would show.

    A bigger block is one of the interpreter's tables growing (interned names, for
    one): allocated once while tracing, with the old table's release untraced, so
    its size depends on what ran earlier in the process, not on this plugin.
    """
    assert before is not None
    stats = now.compare_to(before, "traceback")
    return sum(s.size_diff for s in stats if s.count_diff <= 0 or s.size // s.count < 64 * 1024)
