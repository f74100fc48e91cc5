"""The watcher: every editor and copy pattern ends in exactly one correct load.

Each test waits on conditions with a deadline. To prove that nothing *else*
happened, it then settles the watcher: a marker plugin is written after the
scenario and its load awaited; debouncing is per plugin and in order, so every
earlier change has been handled by then.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import Events, call, replace_atomically, wait_for, wheel_bytes, write
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingEmitter

from agenthost import PluginHost
from agenthost._directory.watcher import DEFAULT_DEBOUNCE, Watcher, debounce_from

Host = Callable[..., PluginHost]
DEBOUNCE = 0.05
_markers = itertools.count()


def source(result: str) -> str:
    return f"from agenthost import tool\n\n@tool\ndef hello() -> str:\n    'Hello.'\n    return {result!r}\n"


def settle(directory: Path, events: Events) -> None:
    """Wait until every change made so far has been handled."""
    marker = f"zz_settle_{next(_markers)}"
    write(directory / f"{marker}.py", "x = 1\n")
    wait_for(lambda: events.of("loaded", marker), what=f"{marker} to load")
    events.all[:] = [e for e in events.all if not e.plugin.startswith("zz_settle_")]


@pytest.fixture
def watched(plugin_dir: Path, make_host: Host) -> tuple[PluginHost, Events, Path]:
    """A watching host on a directory holding hello.py (returning 'v1'), events from then on."""
    write(plugin_dir / "hello.py", source("v1"))
    host = make_host(plugin_dir, watch=True, debounce=DEBOUNCE)
    events = Events(host)
    host.start()
    events.all.clear()
    return host, events, plugin_dir / "hello.py"


def await_reload(host: PluginHost, events: Events, directory: Path, expected: str) -> None:
    wait_for(
        lambda: host.tool("hello") and call(host, "hello") == expected,
        what=f"hello() == {expected!r}",
    )
    settle(directory, events)


def test_atomic_save_by_rename(watched: tuple[PluginHost, Events, Path]) -> None:
    host, events, path = watched
    replace_atomically(path, source("v2"))
    await_reload(host, events, path.parent, "v2")
    assert events.kinds() == ["reloaded"]


def test_vim_style_save(watched: tuple[PluginHost, Events, Path]) -> None:
    host, events, path = watched
    probe = path.parent / "4913"
    probe.write_text("")
    probe.unlink()
    backup = path.with_name(path.name + "~")
    os.rename(path, backup)
    path.write_text(source("v2"))
    backup.unlink()
    await_reload(host, events, path.parent, "v2")
    assert events.kinds() == ["reloaded"]


def test_jetbrains_safe_write(watched: tuple[PluginHost, Events, Path]) -> None:
    host, events, path = watched
    temp = path.with_name(path.name + "___jb_tmp___")
    old = path.with_name(path.name + "___jb_old___")
    temp.write_text(source("v2"))
    os.rename(path, old)
    os.rename(temp, path)
    old.unlink()
    await_reload(host, events, path.parent, "v2")
    assert events.kinds() == ["reloaded"]


def test_duplicate_events_give_one_reload(watched: tuple[PluginHost, Events, Path]) -> None:
    host, events, path = watched
    for _ in range(5):
        path.write_text(source("v2"))
        os.utime(path)
    await_reload(host, events, path.parent, "v2")
    assert events.kinds() == ["reloaded"]


def test_the_same_content_saved_again_does_not_reload(
    watched: tuple[PluginHost, Events, Path],
) -> None:
    host, events, path = watched
    version = host.version
    replace_atomically(path, source("v1"))
    path.write_text(source("v1"))
    settle(path.parent, events)
    assert events.kinds() == []
    assert host.version == version + 1  # the marker only


def test_delete_then_recreate_inside_the_debounce_window(
    watched: tuple[PluginHost, Events, Path],
) -> None:
    host, events, path = watched
    path.unlink()
    path.write_text(source("v2"))
    await_reload(host, events, path.parent, "v2")
    assert events.kinds() == ["reloaded"]


def test_a_rename_unloads_the_old_name_and_loads_the_new(
    watched: tuple[PluginHost, Events, Path],
) -> None:
    host, events, path = watched
    os.rename(path, path.with_name("greeter.py"))
    wait_for(lambda: events.of("loaded", "greeter"), what="greeter to load")
    settle(path.parent, events)
    assert sorted((e.kind, e.plugin) for e in events.all) == [
        ("loaded", "greeter"),
        ("unloaded", "hello"),
    ]
    assert host.tool("hello").plugin == "greeter"  # type: ignore[union-attr]


def test_a_folder_created_with_many_files_loads_once(
    watched: tuple[PluginHost, Events, Path], tmp_path: Path
) -> None:
    host, events, path = watched
    staging = tmp_path / "staging" / "bigpkg"
    modules = [f"m{i}" for i in range(40)]
    write(
        staging / "__init__.py",
        "".join(f"from bigpkg import {m}\n" for m in modules) + "from bigpkg.m0 import big\n",
    )
    write(
        staging / "m0.py",
        "from agenthost import tool\n@tool\ndef big() -> int:\n    'Big.'\n    return 40\n",
    )
    for module in modules[1:]:
        write(staging / f"{module}.py", "VALUE = 1\n")
    shutil.copytree(staging, path.parent / "bigpkg")
    wait_for(lambda: host.tool("big"), what="bigpkg to load")
    settle(path.parent, events)
    assert [(e.kind, e.plugin) for e in events.all] == [("loaded", "bigpkg")]


def test_a_change_inside_a_package_reloads_that_package_only(
    watched: tuple[PluginHost, Events, Path],
) -> None:
    host, events, path = watched
    package = path.parent / "pkg"
    write(package / "__init__.py", "from pkg.impl import value\n")
    write(
        package / "impl.py",
        "from agenthost import tool\n@tool\ndef value() -> int:\n    'Value.'\n    return 1\n",
    )
    wait_for(lambda: host.tool("value"), what="pkg to load")
    settle(path.parent, events)
    hello_owner = host._snapshot.tools["hello"].owner
    events.all.clear()
    replace_atomically(
        package / "impl.py",
        "from agenthost import tool\n@tool\ndef value() -> int:\n    'Value.'\n    return 2\n",
    )
    wait_for(lambda: call(host, "value") == 2, what="pkg to reload")
    settle(path.parent, events)
    assert [(e.kind, e.plugin) for e in events.all] == [("reloaded", "pkg")]
    assert host._snapshot.tools["hello"].owner is hello_owner


def test_editor_litter_is_ignored(watched: tuple[PluginHost, Events, Path]) -> None:
    _host, events, path = watched
    directory = path.parent
    for name in (
        ".hidden.py",
        "hello.py~",
        ".hello.py.swp",
        "#hello.py#",
        "hello.py.bak",
        "notes.tmp",
    ):
        (directory / name).write_text("raise SystemExit('must not load')\n")
    write(directory / "__pycache__" / "hello.cpython-311.pyc", "garbage")
    settle(directory, events)
    assert events.kinds() == []


def test_a_wheel_copied_slowly_loads_once_complete(plugin_dir: Path, make_host: Host) -> None:
    def tool_wheel(result: str) -> bytes:
        body = f"from agenthost import tool\n@tool\ndef packed() -> str:\n    'Packed.'\n    return {result!r}\n"
        return wheel_bytes("packed", "1.0", {"packed.py": body, "padding.txt": "x" * 200_000})

    wheel = plugin_dir / "packed-1.0-py3-none-any.whl"
    wheel.write_bytes(tool_wheel("v1"))
    host = make_host(plugin_dir, watch=True, debounce=0.3)
    events = Events(host)
    host.start()
    events.all.clear()
    data = tool_wheel("v2")
    chunks = [data[i : i + 20_000] for i in range(0, len(data), 20_000)]
    with open(wheel, "wb") as copy:  # a slow copy: chunks arrive well inside the window
        for chunk in chunks:
            copy.write(chunk)
            copy.flush()
            time.sleep(0.03)
            assert events.all == [], "loaded before the copy was complete"
    wait_for(lambda: call(host, "packed") == "v2", what="the complete wheel to load")
    # The event follows the swap that made v2 answer, from the watcher's thread.
    wait_for(lambda: events.of("reloaded", "packed"), what="the reloaded event")
    settle(plugin_dir, events)
    assert events.kinds() == ["reloaded"]


def test_a_truncated_wheel_leaves_the_old_version_serving(
    plugin_dir: Path, make_host: Host
) -> None:
    body = (
        "from agenthost import tool\n@tool\ndef packed() -> str:\n    'Packed.'\n    return 'v1'\n"
    )
    wheel = plugin_dir / "packed-1.0-py3-none-any.whl"
    wheel.write_bytes(wheel_bytes("packed", "1.0", {"packed.py": body}))
    host = make_host(plugin_dir, watch=True, debounce=DEBOUNCE)
    events = Events(host)
    host.start()
    data = wheel_bytes("packed", "1.0", {"packed.py": body.replace("v1", "v2")})
    wheel.write_bytes(data[: len(data) // 2])
    wait_for(lambda: events.of("failed", "packed"), what="the truncated wheel to fail")
    assert call(host, "packed") == "v1"
    assert host.plugins()[0].status == "failed"
    wheel.write_bytes(data)
    wait_for(lambda: call(host, "packed") == "v2", what="the complete wheel to load")
    assert host.plugins()[0].status == "loaded"


def test_a_missing_directory_is_watched_until_it_appears(tmp_path: Path, make_host: Host) -> None:
    directory = tmp_path / "later" / "plugins"
    host = make_host(directory, watch=True, debounce=DEBOUNCE).start()
    assert host.tools() == []
    write(directory / "hello.py", source("late"))
    wait_for(lambda: host.tool("hello"), what="the plugin in the new directory")
    assert call(host, "hello") == "late"


def test_a_deleted_and_recreated_directory(watched: tuple[PluginHost, Events, Path]) -> None:
    host, events, path = watched
    directory = path.parent
    shutil.rmtree(directory)
    wait_for(lambda: host.tools() == [], what="every tool to unload")
    wait_for(lambda: events.of("unloaded", "hello"), what="the unloaded event")  # after the swap
    assert events.kinds() == ["unloaded"]
    write(directory / "hello.py", source("v3"))
    wait_for(
        lambda: host.tool("hello") and call(host, "hello") == "v3", what="the recreated plugin"
    )
    replace_atomically(directory / "hello.py", source("v4"))
    wait_for(lambda: call(host, "hello") == "v4", what="edits in the recreated directory")


def test_a_directory_recreated_at_once_is_watched_even_with_the_same_inode(
    plugin_dir: Path, make_host: Host
) -> None:
    """Deleted and made again within one debounce window, the new folder usually gets the
    old one's inode number back (ext4 reuses it at once): the watch of the deleted folder
    is dead all the same and must be replaced, or edits are never seen again."""
    write(plugin_dir / "hello.py", source("v1"))
    host = make_host(plugin_dir, watch=True, debounce=0.3)
    events = Events(host)
    host.start()
    shutil.rmtree(plugin_dir)
    write(plugin_dir / "hello.py", source("v3"))  # within the window: one settle sees both
    wait_for(lambda: call(host, "hello") == "v3", what="the recreated plugin")
    settle(plugin_dir, events)  # a look at the whole folder still pending may see this one
    settle(plugin_dir, events)  # only a live watch sees this one
    replace_atomically(plugin_dir / "hello.py", source("v4"))
    wait_for(lambda: call(host, "hello") == "v4", what="edits in the recreated directory")


def test_polling_takes_over_when_inotify_cannot_add_a_watch(
    plugin_dir: Path, make_host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    from watchdog.observers import Observer

    class Exhausted(Observer):  # type: ignore[misc, valid-type]
        def schedule(self, *args: object, **kwargs: object) -> object:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr("agenthost._directory.watcher.NativeObserver", Exhausted)
    write(plugin_dir / "hello.py", source("v1"))
    host = make_host(plugin_dir, watch=True, debounce=DEBOUNCE).start()
    assert host.watch_mode == "polling"
    replace_atomically(plugin_dir / "hello.py", source("polled"))
    wait_for(lambda: call(host, "hello") == "polled", what="polling to see the edit")


def test_the_debounce_window_comes_from_argument_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch, make_host: Host
) -> None:
    monkeypatch.delenv("AGENTHOST_DEBOUNCE_MS", raising=False)
    assert debounce_from(None) == DEFAULT_DEBOUNCE
    monkeypatch.setenv("AGENTHOST_DEBOUNCE_MS", "250")
    assert debounce_from(None) == 0.25
    assert debounce_from(0.1) == 0.1
    assert make_host(debounce=None).debounce == 0.25
    monkeypatch.setenv("AGENTHOST_DEBOUNCE_MS", "soon")
    assert debounce_from(None) == DEFAULT_DEBOUNCE


class _Deaf(BaseObserver):
    """An observer that never reports anything: the events of a copy have not arrived yet."""

    def __init__(self) -> None:
        super().__init__(PollingEmitter, timeout=60)

    def schedule(self, *args: object, **kwargs: object) -> ObservedWatch:  # type: ignore[override]
        return ObservedWatch(str(args[1]), recursive=False)


def test_files_still_changing_on_disk_wait_even_if_events_lag(plugin_dir: Path) -> None:
    window = 0.3
    settled: list[tuple[set[str], float]] = []
    watcher = Watcher(
        plugin_dir,
        lambda keys: settled.append((keys, time.time())),
        debounce=window,
        observer_class=_Deaf,
    )
    watcher.start()
    try:
        watcher.mark("late")  # its event came early; the copy is still going on
        # The last chunk lands a third of the window later (the watcher cannot fire
        # before the window ends, so this wait decides nothing by itself).
        time.sleep(window / 3)
        write(
            plugin_dir / "late" / "__init__.py",
            "from agenthost import tool\n@tool\ndef late() -> int:\n    'Late.'\n    return 1\n",
        )
        written = (plugin_dir / "late" / "__init__.py").stat().st_mtime
        wait_for(lambda: settled, what="the quiet package to settle")
        keys, when = settled[0]
        assert keys == {"late"}
        assert when - written >= window  # not handed on while its files were still changing
    finally:
        watcher.stop()
