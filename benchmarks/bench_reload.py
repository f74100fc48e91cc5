"""Hot reload: latency from os.replace to the new version answering, and memory under churn."""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from agenthost import PluginHost, RegistryChange
from benchmarks._harness import Stats, format_time, rss_bytes, scaled, table
from benchmarks._wheels import build_wheel, wheel_name

MODULE = "from agenthost import tool\n\n@tool\ndef probe() -> int:\n    'Probe.'\n    return {n}\n"


def _wheel(n: int) -> bytes:
    return build_wheel("probe-wheel", "1.0", {"probe_wheel.py": MODULE.format(n=n)})


def _latencies(kind: str, edits: int) -> list[float]:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "plugins"
        directory.mkdir()
        name = "probe.py" if kind == "module" else wheel_name("probe-wheel", "1.0")
        target = directory / name

        def content(n: int) -> bytes:
            return MODULE.format(n=n).encode() if kind == "module" else _wheel(n)

        target.write_bytes(content(0))
        live = threading.Event()
        host = PluginHost(directory, watch=True, installed=False, cache_dir=Path(scratch) / "cache")
        host.on_change(lambda change: live.set())
        host.start()
        samples = []
        try:
            for n in range(1, edits + 1):
                temp = directory / f".{name}.tmp"
                temp.write_bytes(content(n))
                live.clear()
                started = time.perf_counter()
                os.replace(temp, target)
                if not live.wait(10):
                    raise RuntimeError(f"edit {n} never went live")
                samples.append(time.perf_counter() - started)
                _check_answers(host, n)
        finally:
            host.stop()
        return samples


def _check_answers(host: PluginHost, n: int) -> None:
    """The change that went live must be edit ``n`` loading, not its refusal."""
    info = host.tool("probe")
    function = info.definition.function if info is not None else None
    if function is None or function() != n:
        problems = [f"{p.name}: {p.status} {p.error or ''}" for p in host.plugins()]
        raise RuntimeError(f"edit {n} went live without answering: {'; '.join(problems)}")


def reload_latency(edits: int = 200) -> None:
    rows: list[tuple[str, Stats | None]] = []
    for kind in ("module", "wheel"):
        samples = _latencies(kind, edits)
        rows.append((f"{kind}: os.replace -> new version live", Stats(samples)))
        p99 = statistics.quantiles(samples, n=100)[98]
        print(
            f"   {kind}: p99 {format_time(p99)}, max {format_time(max(samples))} over {edits} edits"
        )
    table(f"reload latency over {edits} edits (default debounce)", rows)


def churn(reloads: int = 1000) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "plugins"
        directory.mkdir()
        path = directory / "churn.py"
        source = (
            "from pydantic import BaseModel\nfrom agenthost import tool\n"
            "class Query(BaseModel):\n    text: str\n    limit: int = 10\n"
            "@tool\ndef search(query: Query) -> str:\n    'Search {n}.'\n    return query.text\n"
        )
        path.write_text(source.format(n=0))
        host = PluginHost(directory, installed=False, cache_dir=Path(scratch) / "cache").start()
        changes: list[RegistryChange] = []
        host.on_change(changes.append)
        rss = []
        for n in range(1, reloads + 1):
            path.write_text(source.format(n=n))
            host.rescan()
            if n in (reloads // 10, reloads):
                gc.collect()
                rss.append(rss_bytes())
        made = len(changes)
        host.stop()
    if made != reloads:
        raise RuntimeError(f"{reloads} edits made {made} registry changes")
    growth = (rss[1] - rss[0]) / 2**20
    print(f"\n## churn: {reloads} reloads of a plugin with a pydantic model")
    print(
        f"   RSS growth from reload {reloads // 10} to {reloads}: {growth:.2f} MB ({made} changes)"
    )


def _save(style: str, path: Path, text: str) -> None:
    if style == "write in place":
        path.write_text(text)
    elif style == "atomic rename":
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_text(text)
        os.replace(temp, path)
    elif style == "vim":
        (path.parent / "4913").write_text("")
        (path.parent / "4913").unlink()
        backup = path.with_name(path.name + "~")
        os.rename(path, backup)
        path.write_text(text)
        backup.unlink()
    else:  # JetBrains safe write
        temp, old = (
            path.with_name(path.name + "___jb_tmp___"),
            path.with_name(path.name + "___jb_old___"),
        )
        temp.write_text(text)
        os.rename(path, old)
        os.rename(temp, path)
        old.unlink()


def save_bursts(saves: int = 50) -> None:
    """How long the event burst of one save lasts: the debounce window must cover it."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    stamps: list[float] = []

    class Recorder(FileSystemEventHandler):
        def on_any_event(self, event: object) -> None:
            stamps.append(time.perf_counter())

    rows: list[tuple[str, Stats | None]] = []
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        path = directory / "plugin.py"
        path.write_text("x = 0\n")
        observer = Observer()
        observer.schedule(Recorder(), scratch, recursive=True)
        observer.start()
        try:
            for style in ("write in place", "atomic rename", "vim", "jetbrains"):
                spans = []
                for n in range(saves):
                    stamps.clear()
                    _save(style, path, f"x = {n}\n")
                    time.sleep(0.05)  # let the burst end before the next save
                    spans.append(stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0)
                rows.append((f"{style}: first to last event", Stats(spans)))
                print(f"   {style}: max {format_time(max(spans))} over {saves} saves")
        finally:
            observer.stop()
            observer.join()
    table("event burst of one save (the debounce window must exceed it)", rows)


def main() -> None:
    save_bursts(scaled(50, 3))
    reload_latency(scaled(200, 3))
    churn(scaled(1000, 20))
