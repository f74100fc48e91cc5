"""Bringing the registry in line with what the plugin directory holds now.

Every way a change arrives (the watcher's settled keys, ``rescan()``, the first
load, ``stop()``) ends here, one at a time under one lock: entries that are
gone are removed, entries whose content hash is the one last attempted are
skipped (the same file saved again changes nothing), the rest are loaded and
applied together. When a removal frees a plugin name, an entry that lost that
name earlier loads now instead of waiting for its next save.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from loguru import logger

from agenthost._directory.records import PluginEvent, RegistryChange
from agenthost._directory.registry import Load, Registry
from agenthost._directory.scan import (
    Source,
    TooLarge,
    lookalikes,
    plugin_sources,
    read_source,
    source_at,
)
from agenthost._directory.version import LoadFailure, PluginVersion
from agenthost._directory.watcher import ALL

__all__ = ["Loader", "Reconciler"]

Loader = Callable[[Source, tuple[str, dict[Path, bytes]]], PluginVersion | LoadFailure]


class Reconciler:
    """Applies the directory ``directory`` (None: none) to ``registry``, reporting to ``emit``."""

    def __init__(
        self,
        registry: Registry,
        directory: Path | None,
        load: Loader,
        emit: Callable[[list[PluginEvent]], None],
    ) -> None:
        self.lock = threading.RLock()
        self._registry = registry
        self._directory = directory
        self._load = load
        self._emit = emit
        self._closed = False

    def reconcile(self, keys: set[str], extra: Iterable[Load] = ()) -> RegistryChange:
        """Look at ``keys`` (``ALL``: every entry) and apply them, with ``extra`` loads."""
        with self.lock:
            if self._closed:
                return RegistryChange(self._registry.snapshot.version)
            loads, removals = list(extra), []
            for key, source in self._targets(keys).items():
                if source is None:
                    removals.append(key)
                    continue
                load = self._fresh(key, source)
                if load is not None:
                    loads.append(load)
            return self._apply(loads, removals)

    def close(self) -> None:
        """Remove every plugin (their versions retire) and take no more changes."""
        with self.lock:
            self._closed = True
            self._apply([], self._registry.plugin_keys())

    def _fresh(self, key: str, source: Source, *, again: bool = False) -> Load | None:
        """The load of ``source``, or None if it vanished or (unless ``again``) its content
        is the one tried last."""
        try:
            content = read_source(source)
        except OSError:
            return None  # vanished while reading: its deletion event follows
        except TooLarge as exc:
            return Load(key, source, LoadFailure(str(exc), str(source.path)))
        if not again and self._registry.attempted(key) == content[0]:
            return None  # same content saved again
        return Load(key, source, self._load(source, content), content[0])

    def _targets(self, keys: set[str]) -> dict[str, Source | None]:
        """Directory keys to look at and what each is now (None: gone)."""
        directory = self._directory
        if directory is None:
            return {}
        known = [k for k in self._registry.plugin_keys() if not k.startswith("entry-point:")]
        if ALL in keys:
            present = plugin_sources(directory)
            logger.debug("scanned {}: {} plugin entries", directory, len(present))
            _warn(lookalikes(directory))
            return {key: present.get(key) for key in sorted({*present, *known})}
        targets = {key: source_at(directory, key) for key in sorted(keys)}
        _warn(lookalikes(directory, [key for key, source in targets.items() if source is None]))
        return targets

    def _apply(self, loads: list[Load], removals: list[str]) -> RegistryChange:
        if not loads and not removals:
            return RegistryChange(self._registry.snapshot.version)
        plugins = self._registry.snapshot.plugins
        freed = [plugins[key].name for key in removals if key in plugins]
        change, events = self._registry.apply(loads, removals)
        self._emit(events)
        if self._closed or self._directory is None:
            return change
        waiting = (key for name in freed for key in self._registry.waiting_for(name))
        retry = []
        for key in waiting:
            source = source_at(self._directory, key)
            load = self._fresh(key, source, again=True) if source is not None else None
            if load is not None:
                retry.append(load)
        if retry:  # a plugin name was freed: the entry waiting for it loads now
            later, events = self._registry.apply(retry)
            self._emit(events)
            change = _merge(change, later)
        return change


def _warn(reasons: list[str]) -> None:
    for reason in reasons:
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
