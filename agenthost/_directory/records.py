"""What readers of the registry see: immutable records of tools, plugins, changes and events.

``ToolInfo``, ``PluginInfo``, ``RegistryChange`` and ``PluginEvent`` are
public; an ``Entry`` is what a call needs of a tool, worked out once per tool
version; a ``Snapshot`` is one state of the registry, swapped in whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agenthost._authoring.definition import ToolDefinition
from agenthost._directory.version import PluginVersion
from agenthost._errors import ToolDefinitionError

__all__ = [
    "HOST",
    "Entry",
    "EventKind",
    "PluginEvent",
    "PluginInfo",
    "RegistryChange",
    "Snapshot",
    "Status",
    "ToolInfo",
]

HOST = "(host)"
Status = Literal["loaded", "failed", "conflict", "quarantined"]
EventKind = Literal["loaded", "reloaded", "unloaded", "failed", "conflict"]


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """A live tool as the application sees it."""

    name: str
    description: str
    plugin: str
    version: str | None
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    permissions: frozenset[str]
    timeout: float | None
    tags: tuple[str, ...]
    definition_only: bool
    definition: ToolDefinition = field(repr=False, compare=False)

    @classmethod
    def of(cls, definition: ToolDefinition, plugin: str, version: str | None) -> ToolInfo:
        return cls(
            definition.name,
            definition.description,
            plugin,
            version,
            definition.input_schema,
            definition.output_schema,
            definition.permissions,
            definition.timeout,
            definition.tags,
            definition.definition_only,
            definition,
        )


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A plugin entry of the directory and its state.

    ``status`` is ``failed`` when the last load failed (the previous version, if
    any, keeps serving ``tools``) and ``conflict`` when some of its tool names
    (or its plugin name) are owned by someone else. ``problems`` says which
    functions could not become tools; ``definition_errors`` holds the same as
    errors with their file, line and each problem's parameter.
    """

    name: str
    path: str
    version: str | None
    status: Status
    error: str | None
    tools: tuple[str, ...]
    kind: str = "module"
    content_hash: str = ""
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    load_ms: float = 0.0
    location: str = ""
    traceback: str = ""
    definition_errors: tuple[ToolDefinitionError, ...] = ()
    isolation: str = "in-process"
    worker: Any = None  # WorkerState (state, pid, calls, restarts) when isolated


@dataclass(frozen=True, slots=True)
class RegistryChange:
    """What one swap changed. ``breaking`` maps each changed tool to why callers may break."""

    version: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    breaking: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()

    def is_breaking(self, name: str) -> bool:
        return bool(self.breaking.get(name))


@dataclass(frozen=True, slots=True)
class PluginEvent:
    """A line of the plugin log: what happened to which plugin, how long it took, and why."""

    kind: EventKind
    plugin: str
    path: str
    version: str | None = None
    tools: int = 0
    duration_ms: float = 0.0
    message: str = ""
    location: str = ""
    traceback: str = ""
    tool_names: tuple[str, ...] = ()  # the tools this version defines
    added: tuple[str, ...] = ()  # a reload's diff against the version it replaced
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    breaking: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    previous_serving: bool = False  # a failed reload: the version before keeps serving
    isolation: str = "in-process"  # where the loaded version runs
    worker_pid: int | None = None  # its worker process, when isolated


@dataclass(frozen=True, slots=True)
class Entry:
    """What a call needs: the tool, its validator, the version to hold while it runs.

    Worked out once per tool version: ``inline`` is the function when a sync
    call needs none of the optional steps (no permissions, no injected context,
    timeout turned off, not definition-only), ``inline_async`` the same for an
    async tool; the executor's first branch runs them with nothing around them.
    """

    info: ToolInfo
    owner: PluginVersion | None  # None: a host-owned tool
    validate: Callable[[Any], dict[str, Any]]
    permissions: frozenset[str]
    inline: Callable[..., Any] | None = None
    inline_async: Callable[..., Any] | None = None

    @classmethod
    def of(cls, info: ToolInfo, owner: PluginVersion | None) -> Entry:
        d = info.definition
        plain = not (d.definition_only or d.context_parameter or d.permissions)
        fn = d.function if plain and d.timeout == float("inf") else None
        sync = fn if d.kind == "sync" else None
        asynchronous = fn if d.kind == "async" else None
        return cls(info, owner, d.validator.validate, d.permissions, sync, asynchronous)


class Snapshot:
    """One immutable state of the registry; ``cache`` memoises views derived from it."""

    __slots__ = ("cache", "plugins", "tools", "version")

    def __init__(
        self, version: int, tools: dict[str, Entry], plugins: dict[str, PluginInfo]
    ) -> None:
        self.version = version
        self.tools: Mapping[str, Entry] = tools
        self.plugins: Mapping[str, PluginInfo] = plugins
        self.cache: dict[Any, Any] = {}
