"""What workers print, relayed to the host's stderr line by line, bounded and labelled.

A worker's stdout and stderr are one pipe that the host reads (one thread for
all workers). Each line goes out as ``[plugin worker pid] text``, with control
characters shown as escapes, so a worker cannot clear the terminal, rewrite the
host's last line or pass a line off as the host's own; a line is cut at
:data:`MAX_LINE` characters, and each worker may write :data:`BURST` bytes at
once and :data:`RATE` bytes a second after that. What goes beyond is counted and
reported in one line, never buffered: a worker that floods its pipe only loses
its own output.
"""

from __future__ import annotations

import os
import selectors
import sys
import threading
import time
from dataclasses import dataclass, field

from agenthost._common.text import inert

__all__ = ["BURST", "MAX_LINE", "RATE", "RELAY", "Source"]

MAX_LINE = 2000  # characters of one line
RATE = 64 * 1024  # bytes a second a worker may write, on average
BURST = 256 * 1024  # bytes it may write at once


@dataclass
class Source:
    """One worker's output; ``label`` names it in every line (set when it gets its plugin)."""

    label: str
    pending: bytes = b""
    allowance: float = BURST
    stamp: float = field(default_factory=time.monotonic)
    dropped: int = 0  # lines not shown since the last report


class Relay:
    """The thread that reads every worker's output pipe."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread: threading.Thread | None = None
        self._added: list[tuple[int, Source]] = []

    def attach(self, fd: int, label: str) -> Source:
        """Relay what arrives on ``fd`` (this takes it over and closes it at end of file)."""
        os.set_blocking(fd, False)
        source = Source(label)
        with self._lock:
            self._added.append((fd, source))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="agenthost-worker-output", daemon=True
                )
                self._thread.start()
        os.write(self._wake_w, b"x")
        return source

    def _run(self) -> None:
        while True:
            with self._lock:
                added, self._added = self._added, []
            for fd, source in added:
                self._selector.register(fd, selectors.EVENT_READ, source)
            for key, _ in self._selector.select():
                if key.data is None:
                    os.read(self._wake_r, 4096)
                else:
                    self._read(key.fd, key.data)

    def _read(self, fd: int, source: Source) -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # the worker ended: show what is left, then forget it
            self._selector.unregister(fd)
            os.close(fd)
            self._emit(source, [source.pending] if source.pending else [])
            self._report(source)
            return
        lines = (source.pending + chunk).split(b"\n")
        source.pending = lines.pop()
        if len(source.pending) > MAX_LINE * 4:  # a line without end: show what fits
            lines.append(source.pending)
            source.pending = b""
        self._emit(source, lines)

    def _emit(self, source: Source, lines: list[bytes]) -> None:
        now = time.monotonic()
        source.allowance = min(BURST, source.allowance + (now - source.stamp) * RATE)
        source.stamp = now
        shown = []
        for raw in lines:
            if len(raw) + 1 > source.allowance:
                source.dropped += 1
                continue
            source.allowance -= len(raw) + 1
            shown.append(f"[{_printable(source.label.encode())}] {_printable(raw)}\n")
        if shown:
            self._report(source)
            _write("".join(shown))

    def _report(self, source: Source) -> None:
        if source.dropped:
            _write(
                f"[{source.label}] ({source.dropped} lines not shown: the worker writes "
                "more than the host relays)\n"
            )
            source.dropped = 0


def _printable(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").rstrip("\r")
    if len(text) > MAX_LINE:
        text = f"{text[:MAX_LINE]}... ({len(text) - MAX_LINE} more characters)"
    return inert(text, lines=False)


def _write(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):  # no stderr to write to (closed, or a daemon's)
        pass


RELAY = Relay()
