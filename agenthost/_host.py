"""``PluginHost``: the plugin directory, the live registry and the watcher, in one object."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from loguru import logger

from agenthost._definition import ToolDefinition
from agenthost._executor import Executor
from agenthost._exporters import Format, export_tools
from agenthost._frozen import FrozenList
from agenthost._loader import (
    LoadFailure,
    PluginVersion,
    Source,
    hook_timeout_from,
    installed_entry_points,
    last_change,
    load_installed,
    load_source,
    not_loaded,
    plugin_sources,
    read_source,
    source_at,
)
from agenthost._permissions import Permissions
from agenthost._registry import (
    Load,
    PluginEvent,
    PluginInfo,
    Registry,
    RegistryChange,
    Snapshot,
    ToolInfo,
)
from agenthost._watcher import ALL, Watcher, debounce_from
from agenthost._wheel import prune_cache

__all__ = ["PluginHost"]


def _default_cache_dir() -> Path:
    configured = os.environ.get("AGENTHOST_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "agenthost"


class PluginHost:
    """Hosts the tools of a plugin directory, live, and runs their calls.

    ``directory`` is loaded on :meth:`start` (or entering ``with``); with
    ``watch=True`` edits are applied as they happen (after ``debounce`` seconds
    of quiet), otherwise :meth:`rescan` applies them on demand. Installed
    distributions that declare the ``agenthost.plugins`` entry-point group are
    loaded too, unless ``installed=False``; wheels are extracted under ``cache_dir``.

    Plugins' ``on_load`` and ``on_unload`` hooks are cut off after
    ``hook_timeout`` seconds (else ``AGENTHOST_HOOK_TIMEOUT``, else 10 s).

    Calls: ``default_permissions`` are granted to every session,
    ``default_timeout`` applies to tools that set none (None: no limit),
    ``max_workers`` bounds the threads that run sync tools with a timeout,
    ``max_output`` caps a result's text, ``interceptors`` wrap every call and
    ``metrics=False`` stops recording ``metrics()``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = "plugins",
        *,
        watch: bool = False,
        debounce: float | None = None,
        installed: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        hook_timeout: float | None = None,
        default_permissions: Iterable[str] = (),
        default_timeout: float | None = 60.0,
        max_workers: int = 32,
        max_output: int = 100_000,
        interceptors: Iterable[Any] = (),
        metrics: bool = True,
    ) -> None:
        self.directory = Path(directory).absolute() if directory is not None else None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
        self.debounce = debounce_from(debounce)
        self.hook_timeout = hook_timeout_from(hook_timeout)
        self._watch = watch
        self._installed = installed
        self._registry = Registry()
        self.permissions = Permissions(default_permissions)
        self._executor = Executor(
            self._registry,
            permissions=self.permissions,
            default_timeout=default_timeout,
            max_workers=max_workers,
            max_output=max_output,
            metrics=metrics,
            interceptors=interceptors,
        )
        # The call API, straight from the executor (no extra frame on the hot path).
        self.execute = self._executor.execute
        self.aexecute = self._executor.aexecute
        self.execute_many = self._executor.execute_many
        self.aexecute_many = self._executor.aexecute_many
        self.stream = self._executor.stream
        self.astream = self._executor.astream
        self.stream_many = self._executor.stream_many
        self.astream_many = self._executor.astream_many
        self.add_interceptor = self._executor.add_interceptor
        self._reload_lock = threading.RLock()
        self._listeners: list[Callable[[PluginEvent], None]] = []
        self._watcher: Watcher | None = None
        self._started = False
        self._stopped = False

    def __repr__(self) -> str:
        state = "running" if self._started and not self._stopped else "stopped"
        return f"<PluginHost {self.directory} {state}, {len(self._snapshot.tools)} tools>"

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> PluginHost:
        """Load the directory (and installed plugins), watching first if asked, so that
        nothing saved while the first load runs is missed."""
        with self._reload_lock:
            if self._started:
                return self
            self._started = True
            logger.debug(
                "starting: directory {}, {}, cache {}",
                self.directory,
                f"watching (debounce {self.debounce * 1000:g} ms)"
                if self._watch
                else "no watching",
                self.cache_dir,
            )
            prune_cache(self.cache_dir)
            if self._watch and self.directory is not None:
                # Its events wait for this lock; a key already loaded with the same content
                # is skipped then, a key saved in between is loaded.
                self._watcher = Watcher(self.directory, self._settled, debounce=self.debounce)
                self._watcher.start()
            # Everything loaded now lives until it is unloaded: the cyclic collector would
            # only walk the growing heap again and again (a fifth of a large cold start).
            collecting = gc.isenabled()
            gc.disable()
            try:
                installed = installed_entry_points() if self._installed else []
                loads = [
                    Load(source.key, source, result)
                    for source, result in (load_installed(e, self.hook_timeout) for e in installed)
                ]
                self._reconcile({ALL}, extra=loads)
            finally:
                if collecting:
                    gc.enable()
        return self

    def stop(self) -> None:
        """Refuse new calls, stop watching, retire every plugin (``on_unload`` runs after
        each version's last call ends) and shut the worker pool and loop down."""
        with self._reload_lock:
            if self._stopped:
                return
            self._stopped = True
            self._executor.refuse_calls()
            if self._watcher is not None:
                self._watcher.stop()
            self._apply([], self._registry.plugin_keys())
            self._executor.stop()

    def __enter__(self) -> PluginHost:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> PluginHost:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # --- reading -----------------------------------------------------------------------------
    @property
    def _snapshot(self) -> Snapshot:
        return self._registry.snapshot

    @property
    def version(self) -> int:
        """The registry version; it increases on every change."""
        return self._snapshot.version

    @property
    def watch_mode(self) -> str | None:
        """``native`` (inotify and friends), ``polling``, or None when not watching."""
        return self._watcher.mode if self._watcher is not None else None

    def metrics(self) -> dict[str, Any]:
        """Per tool: ``count``, ``errors`` by code, ``latency_ms`` (p50, p95, p99); and
        ``abandoned_threads`` (sync tools still running after their timeout)."""
        metrics = self._executor.metrics
        return metrics.snapshot() if metrics is not None else {"tools": {}, "abandoned_threads": 0}

    def tools(self) -> list[ToolInfo]:
        """Every live tool, by name."""
        snapshot = self._snapshot
        cached = snapshot.cache.get("tools")
        if cached is None:
            cached = snapshot.cache["tools"] = tuple(
                entry.info for _, entry in sorted(snapshot.tools.items())
            )
        return list(cached)

    def tool(self, name: str) -> ToolInfo | None:
        """One live tool by name."""
        entry = self._snapshot.tools.get(name)
        return entry.info if entry is not None else None

    def plugins(self) -> list[PluginInfo]:
        """Every plugin entry with its status, by name."""
        return sorted(self._snapshot.plugins.values(), key=lambda p: (p.name, p.path))

    def schemas(self, format: Format = "openai", *, strict: bool = False) -> list[Any]:
        """The tool definitions in a provider's format (read-only, cached per registry version)."""
        snapshot = self._snapshot
        key = ("schemas", format, strict)
        cached = snapshot.cache.get(key)
        if cached is None:
            definitions = [entry.info.definition for _, entry in sorted(snapshot.tools.items())]
            cached = snapshot.cache[key] = FrozenList(
                export_tools(definitions, format, strict=strict)
            )
        return cached

    # --- changing ----------------------------------------------------------------------------
    def register(self, fn: Callable[..., Any] | ToolDefinition, **options: Any) -> ToolInfo:
        """Add a host-owned tool (any callable, or a ready definition); its name is the host's."""
        definition = (
            fn if isinstance(fn, ToolDefinition) else ToolDefinition.from_function(fn, **options)
        )
        for warning in definition.warnings:
            logger.warning("tool '{}' at {}: {}", definition.name, definition.location, warning)
        return self._registry.register_host(definition)

    def rescan(self) -> RegistryChange:
        """Bring the registry in line with the directory now (for hosts that do not watch)."""
        if not self._started:
            self.start()
        return self._reconcile({ALL})

    def on_change(self, callback: Callable[[RegistryChange], None]) -> Callable[[], None]:
        """Call ``callback`` with the diff after every registry change; returns an undo."""
        return self._registry.on_change(callback)

    def on_event(self, callback: Callable[[PluginEvent], None]) -> Callable[[], None]:
        """Call ``callback`` for every plugin event (loaded, reloaded, ...); returns an undo."""
        self._listeners.append(callback)

        def undo() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return undo

    # --- reconciling the directory with the registry -----------------------------------------
    def _settled(self, keys: set[str]) -> None:
        """The watcher's callback: like rescan, but only for what is quiet on disk too."""
        self._reconcile(keys, settle=True)

    def _reconcile(
        self, keys: set[str], extra: Iterable[Load] = (), *, settle: bool = False
    ) -> RegistryChange:
        with self._reload_lock:
            if self._stopped:
                return RegistryChange(self.version)
            loads, removals = list(extra), []
            for key, source in self._targets(keys).items():
                if source is None:
                    removals.append(key)
                    continue
                if settle and self._still_changing(key, source):
                    continue
                try:
                    content = read_source(source)
                except OSError:
                    continue  # vanished while reading: its deletion event follows
                if self._registry.attempted(key) == content[0]:
                    continue  # same content saved again
                loads.append(Load(key, source, self._load(source, content), content[0]))
            return self._apply(loads, removals)

    def _load(
        self, source: Source, content: tuple[str, dict[Path, bytes]]
    ) -> PluginVersion | LoadFailure:
        return load_source(source, self.cache_dir, content, hook_timeout=self.hook_timeout)

    def _still_changing(self, key: str, source: Source) -> bool:
        """Whether files of ``source`` changed within the debounce window (events can lag
        behind a copy in progress); if so, look again once the window has passed."""
        age = time.time() - last_change(source)
        if 0 <= age < self.debounce and self._watcher is not None:
            self._watcher.mark(key)
            return True
        return False

    def _targets(self, keys: set[str]) -> dict[str, Source | None]:
        """Directory keys to look at and what each is now (None: gone)."""
        directory = self.directory
        known = [k for k in self._registry.plugin_keys() if not k.startswith("entry-point:")]
        if directory is None:
            return {}
        if ALL in keys:
            present = plugin_sources(directory)
            logger.debug("scanned {}: {} plugin entries", directory, len(present))
            _warn_lookalikes(directory, _entries(directory) - set(present))
            return {key: present.get(key) for key in sorted({*present, *known})}
        targets = {key: source_at(directory, key) for key in sorted(keys)}
        _warn_lookalikes(directory, {key for key, source in targets.items() if source is None})
        return targets

    def _apply(self, loads: list[Load], removals: list[str]) -> RegistryChange:
        if not loads and not removals:
            return RegistryChange(self.version)
        freed = [self._snapshot.plugins[k].name for k in removals if k in self._snapshot.plugins]
        change, events = self._registry.apply(loads, removals)
        self._emit(events)
        directory = self.directory
        retry = []
        if directory is not None and not self._stopped:
            for key in (k for name in freed for k in self._registry.waiting_for(name)):
                source = source_at(directory, key)
                try:
                    content = read_source(source) if source is not None else None
                except OSError:
                    content = None  # vanished meanwhile: its deletion event follows
                if source is not None and content is not None:
                    retry.append(Load(key, source, self._load(source, content), content[0]))
        if retry:  # a plugin name was freed: the entry waiting for it loads now
            later, events = self._registry.apply(retry)
            self._emit(events)
            change = _merge(change, later)
        return change

    def _emit(self, events: list[PluginEvent]) -> None:
        for event in events:
            logger.debug(
                "{} {} ({}): {} tools, {:.1f} ms{}",
                event.kind,
                event.plugin,
                event.path,
                event.tools,
                event.duration_ms,
                f", {event.message}" if event.message else "",
            )
            for listener in list(self._listeners):
                try:
                    listener(event)
                except Exception:  # noqa: BLE001 - a listener's bug must not stop loading
                    logger.exception("plugin event listener {!r} failed", listener)


def _entries(directory: Path) -> set[str]:
    try:
        return {entry.name for entry in directory.iterdir()}
    except OSError:
        return set()


def _warn_lookalikes(directory: Path, names: set[str]) -> None:
    """Say why entries that look like plugins are not loaded (``my-tools.py``, no __init__.py)."""
    for name in sorted(names):
        reason = not_loaded(directory, name)
        if reason is not None:
            logger.warning("{}", reason)


def _merge(first: RegistryChange, second: RegistryChange) -> RegistryChange:
    def both(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a + b))

    return RegistryChange(
        second.version,
        both(first.added, second.added),
        both(first.removed, second.removed),
        both(first.changed, second.changed),
        {**first.breaking, **second.breaking},
        both(first.plugins, second.plugins),
    )
