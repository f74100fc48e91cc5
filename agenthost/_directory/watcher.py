"""Watching the plugin directory: watchdog events in, settled plugin keys out.

Editors save in many ways (write in place, write a temp file and rename it
over the target, rename the target away first as Vim and JetBrains IDEs do),
and copies arrive in chunks. Rather than interpreting event sequences, every
event only marks the plugin it belongs to (the first path component under the
directory) as dirty; once a key has been quiet for the debounce window, the
host looks at what is on disk and loads, reloads or unloads accordingly. A key
whose files changed within the window is not passed on yet even if its events
were quiet (events can lag behind a copy in progress). Any
sequence of events therefore ends in one load of the final content, and the
same content saved again changes nothing (the host compares content hashes).

The directory itself may be missing at start or deleted and recreated: its
nearest existing ancestor is watched too, and the watch is re-established
when the directory comes back. If inotify cannot add a watch (the per-user
limit is exhausted), watching falls back to polling with a warning.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loguru import logger
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer as NativeObserver
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver

from agenthost._directory.scan import changing, is_ignored

__all__ = ["ALL", "DEFAULT_DEBOUNCE", "Watcher", "debounce_from"]

ALL = "*"  # the key meaning "look at the whole directory"
DEFAULT_DEBOUNCE = 0.012  # seconds; see the reload-latency benchmark
POLL_INTERVAL = 0.25
_IGNORED_EVENTS = frozenset({"opened", "closed_no_write"})
_GONE = frozenset({"deleted", "moved"})


def debounce_from(value: float | None) -> float:
    """The debounce window: the argument, else ``AGENTHOST_DEBOUNCE_MS``, else the default."""
    if value is not None:
        return max(0.0, float(value))
    text = os.environ.get("AGENTHOST_DEBOUNCE_MS")
    if text:
        try:
            return max(0.0, float(text) / 1000)
        except ValueError:
            logger.warning("AGENTHOST_DEBOUNCE_MS={!r} is not a number; using the default", text)
    return DEFAULT_DEBOUNCE


class Watcher(FileSystemEventHandler):
    """Calls ``on_settled(keys)`` from its own thread once changed keys are quiet."""

    def __init__(
        self,
        directory: Path,
        on_settled: Callable[[set[str]], object],
        *,
        debounce: float = DEFAULT_DEBOUNCE,
        observer_class: Callable[[], BaseObserver] | None = None,
    ) -> None:
        self.directory = directory.absolute()
        self.debounce = debounce
        self.mode = "native"
        self._on_settled = on_settled
        self._observer_class = observer_class or NativeObserver
        self._observer: BaseObserver | None = None
        self._watch: ObservedWatch | None = None
        self._watched_inode: int | None = None
        self._anchor: ObservedWatch | None = None
        self._gone = False  # the watched folder was deleted or moved since it was scheduled
        self._pending: dict[str, float] = {}
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="agenthost-debounce", daemon=True)

    def start(self) -> None:
        self._observer = self._new_observer()
        self._observer.start()
        self._ensure_watches()
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # --- events --------------------------------------------------------------------------
    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _IGNORED_EVENTS:
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw:
                key = self._key(Path(os.fsdecode(raw)))
                if key == ALL and raw == event.src_path and event.event_type in _GONE:
                    # the watched folder went: a new one may get its inode number back, so
                    # the inode alone cannot tell that the watch is dead
                    self._gone = True
                if key is not None:
                    self.mark(key)

    def mark(self, key: str) -> None:
        """Mark ``key`` as changed; it settles after ``debounce`` seconds without events."""
        with self._cond:
            self._pending[key] = time.monotonic() + self.debounce
            self._cond.notify()

    def _key(self, path: Path) -> str | None:
        if path == self.directory or self.directory.is_relative_to(path):
            return ALL  # the directory itself (or an ancestor) was created, moved or deleted
        try:
            parts = path.relative_to(self.directory).parts
        except ValueError:
            return None  # a sibling of the directory, seen through the ancestor watch
        if any(is_ignored(part) for part in parts):
            return None
        return parts[0]

    # --- the debounce thread ----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                due = self._wait_for_due()
                if due is None:
                    return
            try:
                due = {key for key in due if not self._still_changing(key)}
                if not due:
                    continue
                if ALL in due:
                    self._ensure_watches()
                self._on_settled(due)
            except Exception:  # noqa: BLE001 - keep watching whatever one reconcile did
                logger.exception("reloading {} failed", sorted(due))

    def _wait_for_due(self) -> set[str] | None:
        while not self._stopped:
            now = time.monotonic()
            due = {key for key, deadline in self._pending.items() if deadline <= now}
            if due:
                for key in due:
                    del self._pending[key]
                return due
            timeout = min(self._pending.values()) - now if self._pending else None
            self._cond.wait(timeout)
        return None

    def _still_changing(self, key: str) -> bool:
        """Whether ``key`` (any entry, for ``ALL``) changed on disk within the window; if so
        it is marked again, to be looked at once the window has passed."""
        if key == ALL:
            try:
                keys = [entry.name for entry in self.directory.iterdir()]
            except OSError:
                keys = []
        else:
            keys = [key]
        if any(changing(self.directory, k, self.debounce) for k in keys):
            self.mark(key)
            return True
        return False

    # --- watches -----------------------------------------------------------------------------
    def _new_observer(self) -> BaseObserver:
        if self.mode == "polling":
            return PollingObserver(timeout=POLL_INTERVAL)
        return self._observer_class()

    def _ensure_watches(self) -> None:
        """Watch the directory if it exists (again, if recreated) and its nearest ancestor."""
        try:
            self._schedule()
        except OSError as exc:
            if self.mode == "polling":
                raise
            logger.warning(
                "cannot watch {} with inotify ({}); falling back to polling every {} s. "
                "Raise fs.inotify.max_user_watches to get instant reloads.",
                self.directory,
                exc,
                POLL_INTERVAL,
            )
            self._switch_to_polling()

    def _schedule(self) -> None:
        observer = self._observer
        assert observer is not None
        gone, self._gone = self._gone, False
        inode = _inode(self.directory)
        if self._watch is not None and (inode != self._watched_inode or gone):
            _unschedule(observer, self._watch)
            self._watch = None
        if self._watch is None and inode is not None:
            self._watch = observer.schedule(self, str(self.directory), recursive=True)
            self._watched_inode = inode
        anchor = self.directory.parent
        while not anchor.is_dir() and anchor != anchor.parent:
            anchor = anchor.parent
        if self._anchor is None or Path(self._anchor.path) != anchor:
            if self._anchor is not None:
                _unschedule(observer, self._anchor)
            self._anchor = observer.schedule(self, str(anchor), recursive=False)

    def _switch_to_polling(self) -> None:
        old = self._observer
        if old is not None:
            old.unschedule_all()
            old.stop()
        self.mode = "polling"
        self._watch = self._anchor = None
        self._observer = self._new_observer()
        self._observer.start()
        self._schedule()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino if path.is_dir() else None
    except OSError:
        return None


def _unschedule(observer: BaseObserver, watch: Any) -> None:
    with contextlib.suppress(KeyError, OSError):  # the emitter may have gone with its directory
        observer.unschedule(watch)
