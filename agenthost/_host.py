"""``PluginHost``: the plugin directory, the live registry and the watcher, in one object.

It wires the rooms together and owns none of their work: loading is the
directory's, running a call is the executor's, worker processes are isolation's.

May import: _errors, _common, _authoring, _providers, _directory, _calls, _isolation.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import itertools
import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import EllipsisType, TracebackType
from typing import Annotated, Any

from loguru import logger
from pydantic import Field

from agenthost._authoring.context import current_context
from agenthost._authoring.definition import ToolDefinition
from agenthost._calls.executor import Executor
from agenthost._calls.permissions import Permissions
from agenthost._calls.reading import Call
from agenthost._calls.results import ToolResult
from agenthost._calls.streaming import StreamEvent
from agenthost._common.frozen import FrozenList
from agenthost._common.install import install_command
from agenthost._directory.loader import installed_entry_points, load_installed, load_source
from agenthost._directory.reconcile import Reconciler
from agenthost._directory.records import PluginEvent, PluginInfo, RegistryChange, Snapshot, ToolInfo
from agenthost._directory.registry import Load, Registry
from agenthost._directory.scan import Source
from agenthost._directory.version import LoadFailure, PluginVersion, hook_timeout_from
from agenthost._directory.watcher import ALL, Watcher, debounce_from
from agenthost._directory.wheel import prune_cache
from agenthost._isolation.options import (
    LEVELS,
    SANDBOXES,
    Isolation,
    Sandbox,
    WorkerOptions,
    declared_isolation,
)
from agenthost._isolation.processes import SPARES
from agenthost._isolation.proxy import load_isolated
from agenthost._providers.exporters import Format, export_tools
from agenthost._providers.search import SEARCH_TOOL, ToolIndex

__all__ = ["PluginHost"]


def _chooser(
    isolation: Isolation | Mapping[str, Isolation] | Callable[[str], Isolation | None] | None,
) -> Callable[[str], Isolation | None]:
    """Where each plugin runs. A level that is not one is refused here, not run in-process:
    whoever typed ``"proces"`` asked for a sandbox."""
    if isolation is None or isinstance(isolation, str):
        _check_levels({"isolation": isolation} if isolation is not None else {})
        return lambda name: isolation
    if isinstance(isolation, Mapping):
        _check_levels({f"isolation[{name!r}]": level for name, level in isolation.items()})
        return isolation.get
    if not callable(isolation):
        raise TypeError(f"isolation must be a level, a mapping or a callable, not {isolation!r}")
    return isolation


def _check_levels(levels: Mapping[str, object]) -> None:
    wrong = [f"{where} is {level!r}" for where, level in levels.items() if level not in LEVELS]
    if wrong:
        raise ValueError(f"{'; '.join(wrong)}: a level is one of {', '.join(LEVELS)}")


def _sandbox(mode: Sandbox) -> Sandbox:
    if mode not in SANDBOXES:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOXES)}, not {mode!r}")
    return mode


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

    ``isolation`` is where plugins run: ``"in-process"`` (the default) or
    ``"process"`` (a worker process per plugin version, see ``worker_options``),
    for all plugins, or per plugin name as a mapping or a callable returning the
    level (None: the plugin's own ``__agenthost_isolation__``, else in-process).
    ``sandbox`` is how far workers are kept from the host: ``"auto"`` (the
    default) starts each in a kernel sandbox where the system allows one and
    says once at start which guarantees are lost where it does not;
    ``"required"`` refuses to start isolated plugins without it; ``"off"`` runs
    workers as plain processes.

    ``tool_search=True`` adds a host-owned ``search_tools`` tool (see
    :meth:`search_tools`) that is always loaded; pair it with
    ``schemas(format, loaded=[...])`` to show a model only what it asked for.
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
        tool_search: bool = False,
        isolation: Isolation
        | Mapping[str, Isolation]
        | Callable[[str], Isolation | None]
        | None = None,
        worker_options: WorkerOptions | None = None,
        sandbox: Sandbox = "auto",
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
        self._streams = self._executor.streams
        self._listeners: list[Callable[[PluginEvent], None]] = []
        self._reconciler = Reconciler(self._registry, self.directory, self._load, self._emit)
        self._tool_search = tool_search
        self._isolation = _chooser(isolation)
        self.worker_options = worker_options or WorkerOptions()
        self.sandbox = _sandbox(sandbox)
        if tool_search:
            if importlib.util.find_spec("bm25s") is None:  # not at the model's first search
                raise ImportError(f"tool_search=True needs bm25s: {install_command('search')}")
            self.register(self._search_tool())
        self._watcher: Watcher | None = None
        self._started = False
        self._stopped = False

    def _check_directory(self) -> None:
        """A mistyped directory must not load nothing and say nothing; one being watched
        may appear later (its plugins load then)."""
        directory = self.directory
        if directory is None or directory.is_dir():
            return
        if directory.exists():
            raise NotADirectoryError(f"plugin directory {directory} is a file, not a directory")
        if not self._watch:
            raise FileNotFoundError(
                f"plugin directory {directory} does not exist: fix the path, create it, "
                "or pass watch=True to load its plugins once it is created"
            )
        logger.warning("plugin directory {} does not exist yet; watching for it", directory)

    def __repr__(self) -> str:
        state = "running" if self._started and not self._stopped else "stopped"
        return f"<PluginHost {self.directory} {state}, {len(self._snapshot.tools)} tools>"

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> PluginHost:
        """Load the directory (and installed plugins), watching first if asked, so that
        nothing saved while the first load runs is missed."""
        with self._reconciler.lock:
            if self._started:
                return self
            self._check_directory()
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
                self._watcher = Watcher(
                    self.directory, self._reconciler.reconcile, debounce=self.debounce
                )
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
                self._reconciler.reconcile({ALL}, extra=loads)
            finally:
                if collecting:
                    gc.enable()
        return self

    def stop(self) -> None:
        """Refuse new calls, stop watching, retire every plugin (``on_unload`` runs after
        each version's last call ends) and shut the worker pool and loop down."""
        with self._reconciler.lock:
            if self._stopped:
                return
            self._stopped = True
            self._executor.refuse_calls()
            if self._watcher is not None:
                self._watcher.stop()
            self._reconciler.close()
            self._executor.stop()
            SPARES.release(self.directory)

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

    def schemas(
        self,
        format: Format = "openai",
        *,
        strict: bool = False,
        loaded: Iterable[str] | None = None,
        cache_control: bool | Mapping[str, Any] = False,
    ) -> list[Any]:
        """The tool definitions in a provider's format (read-only, cached per registry version).

        ``strict``: OpenAI's or Anthropic's strict mode, per tool where its schema
        allows. ``loaded``: the tools shown up front (None: all); the others are
        marked ``defer_loading`` for ``anthropic`` and ``openai-responses`` and left
        out for the formats without tool search; ``search_tools`` is always shown.
        ``cache_control`` (Anthropic): make the tool list a prompt-cache breakpoint.
        """
        if loaded is not None:
            loaded = frozenset([*loaded, SEARCH_TOOL] if self._tool_search else loaded)
        control = cache_control if isinstance(cache_control, bool) else dict(cache_control)
        shown = control if isinstance(control, bool) else json.dumps(control, sort_keys=True)
        snapshot = self._snapshot
        key = ("schemas", format, strict, loaded, shown)
        cached = snapshot.cache.get(key)
        if cached is None:
            definitions = [entry.info.definition for _, entry in sorted(snapshot.tools.items())]
            cached = snapshot.cache[key] = FrozenList(
                export_tools(
                    definitions, format, strict=strict, loaded=loaded, cache_control=control
                )
            )
        return cached

    def search_tools(
        self, query: str, limit: int = 5, *, session: str | EllipsisType | None = ...
    ) -> list[ToolInfo]:
        """The live tools that best match ``query`` (BM25 over names, descriptions and
        parameter docs), best first; needs the ``search`` extra (bm25s). Given a
        ``session`` (None: calls without one), only the tools it may call."""
        snapshot = self._snapshot
        index = snapshot.cache.get("search")
        if index is None:
            definitions = [
                entry.info.definition
                for name, entry in sorted(snapshot.tools.items())
                if not (self._tool_search and name == SEARCH_TOOL)
            ]
            index = snapshot.cache["search"] = ToolIndex(definitions)
        if session is ...:
            return [snapshot.tools[name].info for name in index.search(query, limit)]
        found = (snapshot.tools[name].info for name in index.search(query, len(snapshot.tools)))
        allowed = (i for i in found if not self.permissions.missing(session, i.permissions))
        return list(itertools.islice(allowed, limit))

    def _search_tool(self) -> Callable[..., Any]:
        host = self

        def search_tools(
            query: Annotated[str, Field(min_length=1, max_length=1000)],
            limit: Annotated[int, Field(ge=1, le=50)] = 5,
        ) -> dict[str, list[dict[str, str]]]:
            """Find tools by what they do, for tools not loaded yet.

            Returns the best matches, best first; load a tool by its name to call it.

            Args:
                query: what the tool should do, in a few words (e.g. "weather forecast").
                limit: how many tools to return at most.
            """
            ctx = current_context()  # a caller finds only the tools it may call
            found = host.search_tools(query, limit, session=ctx.session if ctx else None)
            return {"tools": [{"name": t.name, "description": t.description} for t in found]}

        return search_tools

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
        return self._reconciler.reconcile({ALL})

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

    # --- calls -------------------------------------------------------------------------------
    # Each is the executor's, which owns how a call runs (see _calls.executor); streams are
    # its collaborator's (see _calls.streaming).

    def execute(
        self,
        name: str,
        arguments: Any = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> ToolResult:
        """Run one call from any thread; never raises, always a :class:`ToolResult`.

        ``arguments`` is the model's JSON text (or bytes, or a dict); ``session``
        is whose permissions apply; ``timeout`` overrides the tool's own limit;
        ``interceptors`` wrap this call only, inside the host-wide ones.
        """
        # positional: a call with keywords costs more, and this is every call's path
        return self._executor.execute(name, arguments, session, timeout, interceptors, call_id)

    async def aexecute(
        self,
        name: str,
        arguments: Any = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> ToolResult:
        """:meth:`execute` on the running event loop (sync tools run in worker threads)."""
        # positional: a call with keywords costs more, and this is every call's path
        return await self._executor.aexecute(
            name, arguments, session, timeout, interceptors, call_id
        )

    def execute_many(
        self,
        calls: Iterable[Call],
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
    ) -> list[ToolResult]:
        """Run a model's parallel tool calls concurrently; results in the calls' order.

        A call is a ``(name, arguments)`` tuple or a provider's tool-call object
        (OpenAI, Anthropic, Gemini, MCP), whose id becomes the result's ``call_id``.
        """
        return self._executor.execute_many(
            calls, session=session, timeout=timeout, interceptors=interceptors
        )

    async def aexecute_many(
        self,
        calls: Iterable[Call],
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
    ) -> list[ToolResult]:
        """:meth:`execute_many` on the running event loop."""
        return await self._executor.aexecute_many(
            calls, session=session, timeout=timeout, interceptors=interceptors
        )

    def stream(
        self,
        name: str,
        arguments: Any = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> Iterator[StreamEvent]:
        """One call as events: ``started``, a ``delta`` per chunk, then ``completed``."""
        return self._streams.stream(
            name, arguments, session=session, timeout=timeout,
            interceptors=interceptors, call_id=call_id,
        )  # fmt: skip

    def astream(
        self,
        name: str,
        arguments: Any = None,
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
        call_id: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`stream` for ``async for``."""
        return self._streams.astream(
            name, arguments, session=session, timeout=timeout,
            interceptors=interceptors, call_id=call_id,
        )  # fmt: skip

    def stream_many(
        self,
        calls: Iterable[Call],
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
    ) -> Iterator[StreamEvent]:
        """Calls run concurrently; each call's events are delivered whole, in input order."""
        return self._streams.stream_many(
            calls, session=session, timeout=timeout, interceptors=interceptors
        )

    def astream_many(
        self,
        calls: Iterable[Call],
        *,
        session: str | None = None,
        timeout: float | None = None,
        interceptors: Iterable[Any] = (),
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`stream_many` for ``async for``."""
        return self._streams.astream_many(
            calls, session=session, timeout=timeout, interceptors=interceptors
        )

    def add_interceptor(self, interceptor: Any) -> Callable[[], None]:
        """Wrap every later call in ``interceptor`` (outermost first); returns an undo."""
        return self._executor.add_interceptor(interceptor)

    # --- reporting ---------------------------------------------------------------------------
    def _load(
        self, source: Source, content: tuple[str, dict[Path, bytes]]
    ) -> PluginVersion | LoadFailure:
        try:
            isolation = self.isolation_of(source)
        except ValueError as exc:  # fail closed: it may have been meant for a sandbox
            return LoadFailure(f"{exc}; the plugin is not loaded", str(source.path))
        if isolation == "process":
            return load_isolated(
                source, content, cache_dir=self.cache_dir, hook_timeout=self.hook_timeout,
                options=self.worker_options, sandbox=self.sandbox,
                max_output=self._executor.max_output,
                on_change=lambda: self._registry.refresh(source.key),
            )  # fmt: skip
        return load_source(source, self.cache_dir, content, hook_timeout=self.hook_timeout)

    def isolation_of(self, source: Source) -> Isolation:
        """The host's choice for the plugin, else the plugin's own, else in-process;
        ``ValueError`` for a choice that is not a level."""
        name = source.name
        chosen = self._isolation(name)
        if chosen is None:
            chosen = declared_isolation(source) or "in-process"
        if chosen not in LEVELS:
            raise ValueError(
                f"isolation {chosen!r} for plugin {name} is not one of {', '.join(LEVELS)}"
            )
        return chosen

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
