"""The live tool registry: immutable snapshots, one atomic swap per change, first claim wins.

Readers take ``registry.snapshot`` (a single attribute read) and never lock;
writers build the next snapshot completely under a lock and swap it in, so a
reader sees all of a plugin's new tools or none of them.

Tool names are claimed in order. The first claimant owns a name; a plugin
reloading keeps the claims it already holds; later claimants wait, listed with
status ``conflict``, and when the owner lets go the next in line gets the name.
No plugin can take a name from the host or from another plugin, which is the
defence against tool hijacking (GHSA-67q9-58vj-32qx).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loguru import logger

from agenthost._authoring.definition import ToolDefinition
from agenthost._authoring.schema import breaking_changes
from agenthost._directory.records import (
    HOST,
    Entry,
    PluginEvent,
    PluginInfo,
    RegistryChange,
    Snapshot,
    Status,
    ToolInfo,
)
from agenthost._directory.scan import Source
from agenthost._directory.version import LoadFailure, PluginVersion
from agenthost._errors import ToolConflictError

__all__ = ["Load", "Registry"]


@dataclass(eq=False)
class _State:
    key: str
    source: Source
    name: str
    serving: PluginVersion | None = None
    failure: LoadFailure | None = None
    collision: str | None = None
    attempted: str | None = None


@dataclass(eq=False)
class _Claim:
    seq: int
    plugin: str
    definition: ToolDefinition
    version: PluginVersion | None


@dataclass
class Load:
    """The outcome of loading one directory entry, to be applied to the registry."""

    key: str
    source: Source
    result: PluginVersion | LoadFailure
    content_hash: str = ""


class Registry:
    """The mutable side: claims and plugin states, turned into snapshots."""

    def __init__(self) -> None:
        self.snapshot = Snapshot(0, {}, {})
        self._lock = threading.RLock()
        self._seq = itertools.count()
        self._claims: dict[str, list[_Claim]] = {}  # tool name -> claims, first one owns
        self._claimed: dict[str, dict[str, _Claim]] = {}  # plugin -> its claims by tool name
        self._states: dict[str, _State] = {}
        self._holders: dict[str, str] = {}  # plugin name -> key that provides it
        self._callbacks: list[Callable[[RegistryChange], None]] = []

    # --- reading ---------------------------------------------------------------------------
    def attempted(self, key: str) -> str | None:
        """The content hash last loaded (or tried) for ``key``."""
        state = self._states.get(key)
        return state.attempted if state else None

    def plugin_keys(self) -> list[str]:
        return list(self._states)

    def waiting_for(self, name: str) -> list[str]:
        """Keys refused because another entry provides plugin ``name``, in order."""
        return sorted(k for k, s in self._states.items() if s.collision and s.name == name)

    # --- writing ---------------------------------------------------------------------------
    def on_change(self, callback: Callable[[RegistryChange], None]) -> Callable[[], None]:
        with self._lock:
            self._callbacks.append(callback)

        def undo() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return undo

    def refresh(self, key: str) -> None:
        """Publish the plugin's state again (its worker was quarantined, say); tools unchanged."""
        with self._lock:
            state = self._states.get(key)
            old = self.snapshot
            if state is None or key not in old.plugins:
                return
            plugins = {**old.plugins, key: self._plugin_info(state)}
            self.snapshot = Snapshot(old.version + 1, dict(old.tools), plugins)

    def register_host(self, definition: ToolDefinition) -> ToolInfo:
        """Claim a name for the host; refused if any plugin or the host already claimed it."""
        with self._lock:
            claims = self._claims.get(definition.name)
            if claims:
                raise ToolConflictError(definition.name, self._owner_text(claims[0]))
            claim = _Claim(next(self._seq), HOST, definition, None)
            self._claims[definition.name] = [claim]
            self._claimed.setdefault(HOST, {})[definition.name] = claim
            change, _ = self._swap({definition.name}, set(), set(), [])
        self._notify(change)
        return self.snapshot.tools[definition.name].info

    def apply(
        self, loads: Sequence[Load] = (), removals: Sequence[str] = ()
    ) -> tuple[RegistryChange, list[PluginEvent]]:
        """Apply loads and removals in one swap; retire what they replace."""
        with self._lock:
            events: list[PluginEvent] = []
            retired: list[PluginVersion] = []
            affected: set[str] = set()
            touched: set[str] = set()
            for key in removals:
                self._remove(key, affected, events, retired)
                touched.add(key)
            for load in loads:
                self._load(load, affected, events, retired)
                touched.add(load.key)
            loaded = {load.key for load in loads}
            change, conflict_events = self._swap(affected, touched, loaded, events)
        for version in retired:
            version.retire()
        self._notify(change)
        return change, events + conflict_events

    def _remove(
        self, key: str, affected: set[str], events: list[PluginEvent], retired: list[PluginVersion]
    ) -> None:
        state = self._states.pop(key, None)
        if state is None:
            return
        if state.serving is not None:
            affected |= self._drop_claims(state.serving.name)
            retired.append(state.serving)
        if self._holders.get(state.name) == key:
            del self._holders[state.name]
        events.append(PluginEvent("unloaded", state.name, str(state.source.path)))

    def _load(
        self,
        load: Load,
        affected: set[str],
        events: list[PluginEvent],
        retired: list[PluginVersion],
    ) -> None:
        """Apply one load: a failure, a version refused, or the version that now serves."""
        state = self._state_for(load)
        result = load.result
        path = str(load.source.path)
        if isinstance(result, LoadFailure):
            state.failure = result
            events.append(_failed(state, result, path))
            return
        refusal = self._refusal(state, load.key, result, path)
        if refusal is not None:
            retired.append(result)
            events.append(refusal)
            return
        old = state.serving
        if old is not None:
            if old.name != result.name:
                affected |= self._drop_claims(old.name)
                self._holders.pop(old.name, None)
            retired.append(old)
        state.name, state.serving = result.name, result
        state.failure = state.collision = None
        self._holders[result.name] = load.key
        affected |= self._claim(
            result, old if old is not None and old.name == result.name else None
        )
        events.append(_loaded(result, old, path))

    def _state_for(self, load: Load) -> _State:
        state = self._states.get(load.key)
        if state is None:
            result = load.result
            name = result.name if isinstance(result, PluginVersion) else load.source.name
            state = self._states[load.key] = _State(load.key, load.source, name)
        state.source, state.attempted = load.source, load.content_hash
        return state

    def _refusal(
        self, state: _State, key: str, result: PluginVersion, path: str
    ) -> PluginEvent | None:
        """Why ``result`` may not serve, as an event: its plugin name is another entry's, or
        it has broken tools while a working version serves. None: it may."""
        holder = self._holders.get(result.name)
        if holder is not None and holder != key:
            state.name = result.name
            state.collision = (
                f"plugin '{result.name}' is already provided by "
                f"{_provider(self._states[holder].source)}; remove one of them"
            )
            return PluginEvent("conflict", result.name, path, message=state.collision)
        if state.serving is not None and result.problems:
            state.failure = LoadFailure(
                "new version not loaded, the previous one keeps serving: "
                + " | ".join(p.splitlines()[0] for p in result.problems),
                traceback="\n".join(result.problems),
            )
            return _failed(state, state.failure, path)
        return None

    def _claim(self, version: PluginVersion, old: PluginVersion | None) -> set[str]:
        """Claim the version's names; names the plugin already holds keep their place."""
        mine = self._claimed.setdefault(version.name, {})
        new = {d.name: d for d in version.definitions}
        gone = {d.name for d in old.definitions} - new.keys() if old else set()
        for name in gone:
            self._claims[name].remove(mine.pop(name))
        for name, definition in new.items():
            claim = mine.get(name)
            if claim is None:
                claim = mine[name] = _Claim(next(self._seq), version.name, definition, version)
                self._claims.setdefault(name, []).append(claim)
            else:
                claim.definition, claim.version = definition, version
        return gone | new.keys()

    def _drop_claims(self, plugin: str) -> set[str]:
        mine = self._claimed.pop(plugin, {})
        for name, claim in mine.items():
            self._claims[name].remove(claim)
        return set(mine)

    def _swap(
        self, affected: set[str], touched: set[str], loaded: set[str], events: list[PluginEvent]
    ) -> tuple[RegistryChange, list[PluginEvent]]:
        old = self.snapshot
        tools = dict(old.tools)
        added, removed, changed = [], [], []
        breaking: dict[str, tuple[str, ...]] = {}
        more_events: list[PluginEvent] = []
        for name in sorted(affected):
            claims = self._claims.get(name)
            if not claims:
                self._claims.pop(name, None)
                if tools.pop(name, None) is not None:
                    removed.append(name)
                continue
            owner, before = claims[0], old.tools.get(name)
            tools[name] = self._entry(owner, before)
            touched |= {self._holders[c.plugin] for c in claims if c.plugin in self._holders}
            if before is None:
                added.append(name)
            elif (before.info.definition.fingerprint, before.info.plugin) != (
                owner.definition.fingerprint,
                owner.plugin,
            ):
                changed.append(name)
                breaking[name] = tuple(
                    breaking_changes(before.info.input_schema, owner.definition.input_schema)
                )
            more_events += self._ownership_events(name, claims, before, loaded)
        plugins = dict(old.plugins)
        for key in touched:
            plugins.pop(key, None)
            state = self._states.get(key)
            if state is not None:
                plugins[key] = self._plugin_info(state)
        version = old.version + 1
        self.snapshot = Snapshot(version, tools, dict(sorted(plugins.items())))
        names = tuple(sorted({e.plugin for e in [*events, *more_events]}))
        change = RegistryChange(
            version, tuple(added), tuple(removed), tuple(changed), breaking, names
        )
        return change, more_events

    def _entry(self, owner: _Claim, before: Entry | None) -> Entry:
        if before is not None and before.info.definition is owner.definition:
            return before
        version = owner.version.version if owner.version else None
        return Entry.of(ToolInfo.of(owner.definition, owner.plugin, version), owner.version)

    def _ownership_events(
        self, name: str, claims: list[_Claim], before: Entry | None, loaded: set[str]
    ) -> list[PluginEvent]:
        """Conflicts for plugins just loaded, and a waiting plugin taking over a freed name."""
        found = []
        for loser in claims[1:]:
            if self._holders.get(loser.plugin) in loaded and loser.version is not None:
                message = f"tool '{name}' is owned by {self._owner_text(claims[0])}"
                found.append(
                    PluginEvent(
                        "conflict", loser.plugin, str(loser.version.source.path), message=message
                    )
                )
        owner = claims[0]
        took_over = before is not None and before.info.plugin != owner.plugin
        if (
            took_over
            and owner.version is not None
            and self._holders.get(owner.plugin) not in loaded
        ):
            assert before is not None
            message = f"now owns tool '{name}' (released by plugin '{before.info.plugin}')"
            found.append(
                PluginEvent(
                    "loaded",
                    owner.plugin,
                    str(owner.version.source.path),
                    owner.version.version,
                    len(owner.version.definitions),
                    message=message,
                )
            )
        return found

    def _plugin_info(self, state: _State) -> PluginInfo:
        serving = state.serving
        owned = tuple(
            d.name
            for d in (serving.definitions if serving else ())
            if self._claims.get(d.name) and self._claims[d.name][0].plugin == state.name
        )
        lost = [
            f"tool '{d.name}' is owned by {self._owner_text(self._claims[d.name][0])}"
            for d in (serving.definitions if serving else ())
            if d.name not in owned
        ]
        status: Status = "loaded"
        error: str | None = None
        failure = state.failure
        worker = serving.worker if serving else None
        if failure is not None:
            status, error = "failed", failure.message
        elif worker is not None and worker.state == "quarantined":
            status = "quarantined"
            error = f"its worker {worker.last_exit} again and again; save the plugin to retry"
        elif worker is not None and worker.state == "failed":
            status = "failed"
            error = f"its worker was stopped: it {worker.last_exit}; save the plugin to retry"
        elif state.collision or lost:
            status, error = "conflict", state.collision or "; ".join(lost)
        return PluginInfo(
            name=state.name,
            path=str(state.source.path),
            version=serving.version if serving else None,
            status=status,
            error=error,
            tools=owned,
            kind=state.source.kind,
            content_hash=serving.content_hash if serving else "",
            problems=serving.problems if serving else (),
            definition_errors=serving.definition_errors if serving else (),
            isolation=(serving or failure or _NOT_LOADED).isolation,
            worker=serving.worker if serving else None,
            warnings=serving.warnings if serving else (),
            load_ms=serving.load_ms if serving else 0.0,
            location=failure.location if failure else "",
            traceback=failure.traceback if failure else "",
        )

    def _owner_text(self, claim: _Claim) -> str:
        if claim.plugin == HOST:
            return "the host"
        key = self._holders.get(claim.plugin)
        where = f" ({self._states[key].source.path})" if key in self._states else ""
        return f"plugin '{claim.plugin}'{where}"

    def _notify(self, change: RegistryChange) -> None:
        for callback in list(self._callbacks):
            try:
                callback(change)
            except Exception:  # noqa: BLE001 - a listener's bug must not break the registry
                logger.exception("on_change callback {!r} failed", callback)


_NOT_LOADED = LoadFailure("")


def _failed(state: _State, failure: LoadFailure, path: str) -> PluginEvent:
    return PluginEvent(
        "failed",
        state.name,
        path,
        message=failure.message,
        location=failure.location,
        traceback=failure.traceback,
        previous_serving=state.serving is not None,
    )


def _loaded(result: PluginVersion, old: PluginVersion | None, path: str) -> PluginEvent:
    return PluginEvent(
        "reloaded" if old is not None else "loaded",
        result.name,
        path,
        result.version,
        len(result.definitions),
        result.load_ms,
        "\n".join(result.problems + result.warnings),
        tool_names=tuple(d.name for d in result.definitions),
        isolation=result.isolation,
        worker_pid=result.worker.pid if result.worker is not None else None,
        **_diff(old, result),
    )


def _diff(old: PluginVersion | None, new: PluginVersion) -> dict[str, Any]:
    """What a reload changed in the plugin's own tools, and why callers may break."""
    if old is None:
        return {}
    before = {d.name: d for d in old.definitions}
    after = {d.name: d for d in new.definitions}
    changed = [
        name
        for name in after.keys() & before.keys()
        if (after[name].input_schema, after[name].output_schema, after[name].description)
        != (before[name].input_schema, before[name].output_schema, before[name].description)
    ]
    breaking = {
        name: reasons
        for name in changed
        if (reasons := tuple(breaking_changes(before[name].input_schema, after[name].input_schema)))
    }
    return {
        "added": tuple(sorted(after.keys() - before.keys())),
        "removed": tuple(sorted(before.keys() - after.keys())),
        "changed": tuple(sorted(changed)),
        "breaking": breaking,
    }


def _provider(source: Source) -> str:
    if source.kind == "installed":
        return f"an installed distribution (entry point {source.key.partition(':')[2]})"
    return str(source.path)
