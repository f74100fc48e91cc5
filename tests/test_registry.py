"""The registry: atomic snapshots, diffs, first registration wins, failed reloads keep serving."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import Events, call, write

from agenthost import PluginHost, RegistryChange, ToolConflictError

Host = Callable[..., PluginHost]


def tool_source(*tools: str, body: str = "return {n!r}", version: str = "1") -> str:
    lines = ["from agenthost import tool", f"__version__ = {version!r}", ""]
    for name in tools:
        lines += [
            "@tool",
            f"def {name}(x: int = 0) -> str:",
            f"    'Tool {name}.'",
            "    " + body.format(n=name),
            "",
        ]
    return "\n".join(lines)


def test_every_change_bumps_the_version_and_reports_a_diff(
    plugin_dir: Path, make_host: Host
) -> None:
    path = write(plugin_dir / "p.py", tool_source("a", "b"))
    host = make_host(plugin_dir).start()
    changes: list[RegistryChange] = []
    undo = host.on_change(changes.append)
    start = host.version
    write(path, tool_source("b", "c"))
    change = host.rescan()
    assert (change.added, change.removed, change.changed) == (("c",), ("a",), ())
    assert change.version == host.version == start + 1
    assert change.plugins == ("p",)
    assert changes == [change]
    undo()
    write(path, tool_source("b"))
    host.rescan()
    assert len(changes) == 1


def test_only_tools_whose_definition_changed_are_reported(
    plugin_dir: Path, make_host: Host
) -> None:
    path = write(plugin_dir / "p.py", tool_source("a", "b"))
    host = make_host(plugin_dir).start()
    write(path, tool_source("a", "b", body="return {n!r} + '!'"))
    change = host.rescan()
    assert (change.added, change.removed, change.changed) == ((), (), ())
    assert call(host, "a") == "a!"  # the new code serves anyway
    source = tool_source("a", "b").replace("'Tool b.'", "'Tool b, improved.'")
    write(path, source)
    assert host.rescan().changed == ("b",)


def test_breaking_schema_changes_are_flagged(plugin_dir: Path, make_host: Host) -> None:
    path = write(plugin_dir / "p.py", """
        from typing import Literal
        from agenthost import tool

        @tool
        def search(query: str, limit: int = 10, mode: Literal["a", "b"] = "a") -> str:
            "Search."
            return query

        @tool
        def fetch(url: str) -> str:
            "Fetch."
            return url
        """)  # fmt: skip
    host = make_host(plugin_dir).start()
    write(path, """
        from typing import Literal
        from agenthost import tool

        @tool
        def search(query: str, limit: int = 10, mode: Literal["a", "b", "c"] = "a", page: int = 1) -> str:
            "Search better."
            return query

        @tool
        def fetch(url: str, timeout: float) -> str:
            "Fetch."
            return url
        """)  # fmt: skip
    change = host.rescan()
    assert set(change.changed) == {"search", "fetch"}
    assert not change.is_breaking("search")
    assert change.breaking["fetch"] == ("parameter 'timeout' is now required",)


def test_readers_see_all_of_a_plugin_version_or_none_of_it(
    plugin_dir: Path, make_host: Host
) -> None:
    names = [f"t{i}" for i in range(20)]
    path = write(plugin_dir / "many.py", tool_source(*names, body="return 'v0'"))
    host = make_host(plugin_dir).start()
    stop = threading.Event()
    mixed: list[set[str]] = []

    def reader() -> None:
        while not stop.is_set():
            snapshot = host._snapshot
            versions = {entry.info.definition.function() for entry in snapshot.tools.values()}  # type: ignore[misc]
            if len(versions) != 1:
                mixed.append(versions)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for generation in range(1, 40):
            write(path, tool_source(*names, body=f"return 'v{generation}'"))
            host.rescan()
    finally:
        stop.set()
        thread.join()
    assert mixed == []
    assert call(host, "t0") == "v39"


def test_the_host_owns_its_names_whatever_plugins_do(plugin_dir: Path, make_host: Host) -> None:
    write(plugin_dir / "hijack.py", tool_source("search", "other"))
    host = make_host(plugin_dir)

    def search(query: str) -> str:
        """The application's own search."""
        return "host"

    host.register(search)
    host.start()
    assert host.tool("search").plugin == "(host)"  # type: ignore[union-attr]
    [plugin] = host.plugins()
    assert plugin.status == "conflict"
    assert plugin.error == "tool 'search' is owned by the host"
    assert plugin.tools == ("other",)
    with pytest.raises(ToolConflictError, match="tool 'other' is already owned by plugin 'hijack'"):
        host.register(lambda: 1, name="other", description="Other.")


def test_a_later_plugin_never_takes_a_name_whatever_its_file_name(
    plugin_dir: Path, make_host: Host
) -> None:
    write(plugin_dir / "zzz_owner.py", tool_source("search"))
    host = make_host(plugin_dir, watch=False).start()
    events = Events(host)
    write(plugin_dir / "aaa_late.py", tool_source("search", "extra", body="return 'hijacked'"))
    host.rescan()
    assert call(host, "search") == "search"
    late = next(p for p in host.plugins() if p.name == "aaa_late")
    assert late.status == "conflict"
    assert (
        late.error
        == f"tool 'search' is owned by plugin 'zzz_owner' ({plugin_dir / 'zzz_owner.py'})"
    )
    assert [e.message for e in events.of("conflict")] == [late.error]


def test_at_start_names_are_claimed_in_plugin_name_order(plugin_dir: Path, make_host: Host) -> None:
    for name in ("mmm", "bbb", "yyy"):  # written in this order, listed in any order
        write(plugin_dir / f"{name}.py", tool_source("shared", body=f"return {name!r}"))
    host = make_host(plugin_dir).start()
    assert call(host, "shared") == "bbb"
    assert [p.status for p in host.plugins()] == ["loaded", "conflict", "conflict"]


def test_a_freed_name_goes_to_the_next_claimant_in_order(plugin_dir: Path, make_host: Host) -> None:
    for name in ("first", "second", "third"):
        write(plugin_dir / f"{name}.py", tool_source("shared", body=f"return {name!r}"))
    host = make_host(plugin_dir).start()
    events = Events(host)
    (plugin_dir / "first.py").unlink()
    change = host.rescan()
    assert call(host, "shared") == "second"
    assert change.changed == ("shared",)
    assert [(e.kind, e.plugin) for e in events.all] == [("unloaded", "first"), ("loaded", "second")]
    assert events.all[1].message == "now owns tool 'shared' (released by plugin 'first')"
    statuses = {p.name: p.status for p in host.plugins()}
    assert statuses == {"second": "loaded", "third": "conflict"}


def test_a_plugin_reloading_keeps_its_names(plugin_dir: Path, make_host: Host) -> None:
    owner = write(plugin_dir / "owner.py", tool_source("shared", body="return 'v1'"))
    write(plugin_dir / "waiting.py", tool_source("shared", body="return 'waiting'"))
    host = make_host(plugin_dir).start()
    write(owner, tool_source("shared", body="return 'v2'"))
    host.rescan()
    assert call(host, "shared") == "v2"


@pytest.mark.parametrize(
    "broken",
    [
        "def oops(:\n",
        "raise RuntimeError('half-written')\n",
        "from agenthost import tool\n@tool\ndef a(x) -> str:\n    'A.'\n    return 'bad'\n",
    ],
)
def test_a_failed_reload_keeps_the_previous_version_serving(
    plugin_dir: Path, make_host: Host, broken: str
) -> None:
    path = write(plugin_dir / "p.py", tool_source("a", body="return 'v1'", version="1.0"))
    host = make_host(plugin_dir).start()
    write(path, broken)
    change = host.rescan()
    assert (change.added, change.removed, change.changed) == ((), (), ())
    [plugin] = host.plugins()
    assert (plugin.status, plugin.version, plugin.tools) == ("failed", "1.0", ("a",))
    assert call(host, "a") == "v1"
    write(path, tool_source("a", body="return 'v3'", version="3.0"))
    host.rescan()
    [plugin] = host.plugins()
    assert (plugin.status, plugin.version, plugin.error) == ("loaded", "3.0", None)
    assert call(host, "a") == "v3"


def test_the_same_content_saved_again_does_not_reload(plugin_dir: Path, make_host: Host) -> None:
    path = write(plugin_dir / "p.py", tool_source("a"))
    host = make_host(plugin_dir).start()
    version = host.version
    path.write_text(path.read_text())
    assert host.rescan().version == version
    assert host.version == version


def test_two_entries_with_one_plugin_name(plugin_dir: Path, make_host: Host) -> None:
    write(plugin_dir / "dup.py", tool_source("from_module"))
    write(plugin_dir / "dup" / "__init__.py", tool_source("from_package"))
    host = make_host(plugin_dir).start()
    statuses = sorted((p.path.endswith(".py"), p.status) for p in host.plugins())
    assert statuses == [(False, "loaded"), (True, "conflict")]
    assert [t.name for t in host.tools()] == ["from_package"]
    (plugin_dir / "dup" / "__init__.py").unlink()
    (plugin_dir / "dup").rmdir()
    host.rescan()
    assert [t.name for t in host.tools()] == ["from_module"]


def test_tools_plugins_and_schemas_reflect_the_snapshot(plugin_dir: Path, make_host: Host) -> None:
    write(plugin_dir / "p.py", tool_source("b", "a"))
    host = make_host(plugin_dir).start()
    assert [t.name for t in host.tools()] == ["a", "b"]
    schemas = host.schemas("anthropic")
    assert [s["name"] for s in schemas] == ["a", "b"]
    assert host.schemas("anthropic") is schemas  # cached until the next change
    (plugin_dir / "p.py").unlink()
    host.rescan()
    assert host.tools() == []
    assert host.schemas("anthropic") == []
    assert host.plugins() == []


def test_a_callback_that_fails_does_not_break_the_registry(
    plugin_dir: Path, make_host: Host
) -> None:
    host = make_host(plugin_dir).start()
    host.on_change(lambda change: 1 / 0)
    write(plugin_dir / "p.py", tool_source("a"))
    assert host.rescan().added == ("a",)
