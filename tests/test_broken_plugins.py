"""Broken plugins never stop the host: hostile objects, hanging hooks, tampered wheels, races."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import sys
import textwrap
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from helpers import Events, replace_atomically, wait_for, wheel_bytes, write

from agenthost import PluginEvent, PluginHost

Host = Callable[..., PluginHost]

GOOD = """
from agenthost import tool

@tool
def good() -> str:
    "Still loads."
    return "good"
"""


# --- every step of loading one plugin is contained ---------------------------------------------

HOSTILE = {
    "str_uses_builtins": """
        class Boom(Exception):
            def __str__(self):
                return "boom " + str(len("abc"))

        raise Boom()
        """,
    "str_raises": """
        class Boom(Exception):
            def __str__(self):
                raise RuntimeError("no text")

        raise Boom()
        """,
    "base_exception_str": """
        class Boom(BaseException):
            def __str__(self):
                raise KeyboardInterrupt

        raise Boom()
        """,
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_an_import_error_with_a_hostile_message_fails_only_that_plugin(
    plugin_dir: Path, make_host: Host, kind: str
) -> None:
    write(plugin_dir / "hostile.py", HOSTILE[kind])
    write(plugin_dir / "good.py", GOOD)
    host = make_host(plugin_dir).start()
    plugins = {p.name: p for p in host.plugins()}
    assert plugins["good"].status == "loaded"
    assert plugins["hostile"].status == "failed"
    assert plugins["hostile"].error is not None
    assert plugins["hostile"].error.startswith("Boom")
    if kind == "str_uses_builtins":
        assert plugins["hostile"].error == "Boom: boom 3"
    assert host.execute("good", {}).output == "good"
    host.rescan()  # and again, without raising


def test_the_watcher_keeps_loading_after_a_hostile_plugin(
    plugin_dir: Path, make_host: Host
) -> None:
    write(plugin_dir / "hostile.py", HOSTILE["str_uses_builtins"])
    host = make_host(plugin_dir, watch=True, debounce=0.005).start()
    replace_atomically(plugin_dir / "hostile.py", HOSTILE["str_raises"])
    write(plugin_dir / "good.py", GOOD)
    wait_for(lambda: host.tool("good") is not None, what="a new plugin to load")
    assert host.execute("good", {}).output == "good"


def test_a_version_whose_str_raises_loads_the_tools_with_a_warning(
    plugin_dir: Path, make_host: Host
) -> None:
    write(
        plugin_dir / "odd_version.py",
        """
        from agenthost import tool

        class Version:
            def __str__(self):
                raise RuntimeError("no text")

        __version__ = Version()

        @tool
        def tool_a() -> str:
            "A."
            return "a"
        """,
    )
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert (plugin.status, plugin.version, plugin.tools) == ("loaded", None, ("tool_a",))
    assert any("__version__" in w and "RuntimeError" in w for w in plugin.warnings)


@pytest.mark.parametrize("raised", ["RuntimeError('hostile')", "KeyboardInterrupt()"])
def test_an_object_whose_getattr_raises_is_one_problem_not_a_crash(
    plugin_dir: Path, make_host: Host, raised: str
) -> None:
    write(
        plugin_dir / "getattr.py",
        f"""
        from agenthost import tool

        class Hostile:
            def __call__(self, x: int) -> int:
                return x

            def __getattr__(self, name):
                raise {raised}

        hostile = tool(Hostile())
        lurking = Hostile()  # not a tool, but probed like every module attribute

        @tool
        def fine() -> str:
            "Fine."
            return "fine"
        """,
    )
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert plugin.status == "loaded"
    assert plugin.tools == ("fine",)
    assert len(plugin.problems) == 1
    assert "Hostile" in plugin.problems[0]
    assert host.execute("fine", {}).output == "fine"


def test_a_hook_raising_an_unprintable_exception_is_a_warning(
    plugin_dir: Path, make_host: Host
) -> None:
    write(
        plugin_dir / "hooked.py",
        """
        from agenthost import tool

        class Boom(Exception):
            def __str__(self):
                return "boom " + str(len("abc"))

        class Worse(BaseException):
            def __str__(self):
                raise RuntimeError

        def on_load():
            raise Boom()

        def on_unload():
            raise Worse()

        @tool
        def hooked() -> str:
            "Hooked."
            return "hooked"
        """,
    )
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert plugin.status == "loaded"
    assert plugin.warnings == ("on_load: on_load raised Boom: boom 3",)
    host.stop()  # on_unload raises an unprintable BaseException: reported, and stop completes


# --- hooks that hang --------------------------------------------------------------------------

HANGING_HOOKS = """
import threading
from agenthost import tool

def on_load():
    threading.Event().wait()

def on_unload():
    threading.Event().wait()

@tool
def patient() -> str:
    "Patient."
    return "patient"
"""

RUN_HOST = """
import sys
from agenthost import PluginHost

host = PluginHost(sys.argv[1], installed=False, cache_dir=sys.argv[2], hook_timeout=0.2)
host.start()
[plugin] = host.plugins()
print(plugin.status, plugin.warnings, flush=True)
print(host.execute("patient", {}).output, flush=True)
host.stop()
print("stopped", flush=True)
"""


def test_hanging_hooks_are_cut_off_and_the_process_can_still_exit(
    plugin_dir: Path, tmp_path: Path
) -> None:
    write(plugin_dir / "patient.py", HANGING_HOOKS)
    finished = subprocess.run(
        [sys.executable, "-c", RUN_HOST, str(plugin_dir), str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=60,  # liveness: the process exits although both hooks still hang
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert lines[0] == "loaded ('on_load: on_load did not finish within 0.2 s',)"
    assert lines[1:] == ["patient", "stopped"]


def test_the_hook_time_limit_is_a_setting(
    plugin_dir: Path, make_host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(plugin_dir / "patient.py", HANGING_HOOKS.replace("on_unload", "unused"))
    monkeypatch.setenv("AGENTHOST_HOOK_TIMEOUT", "0.05")
    [plugin] = make_host(plugin_dir).start().plugins()
    assert plugin.warnings == ("on_load: on_load did not finish within 0.05 s",)
    (plugin_dir / "patient.py").touch()
    [plugin] = make_host(plugin_dir, hook_timeout=0.1).start().plugins()
    assert plugin.warnings == ("on_load: on_load did not finish within 0.1 s",)


# --- wheels ------------------------------------------------------------------------------------

WHEEL_FILES = {
    "stamp.py": """
    from agenthost import tool

    @tool
    def stamp() -> str:
        "Which code runs."
        return "original"
    """
}


def rewrite(
    data: bytes, changes: dict[str, bytes | None], extra: Sequence[tuple[str, bytes]] = ()
) -> bytes:
    """The same archive with some entries replaced or removed (None) and raw entries added."""
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for info in source.infolist():
            content = changes.get(info.filename, source.read(info))
            if content is not None:
                target.writestr(info.filename, content)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns about the duplicates we add on purpose
            for name, content in extra:
                target.writestr(name, content)
    return buffer.getvalue()


def record_line(name: str, content: bytes, algorithm: str = "sha256") -> str:
    digest = base64.urlsafe_b64encode(hashlib.new(algorithm, content).digest()).rstrip(b"=")
    return f"{name},{algorithm}={digest.decode()},{len(content)}"


def stamp_wheel() -> bytes:
    return wheel_bytes("stamp", "1.0", WHEEL_FILES)


RECORD = "stamp-1.0.dist-info/RECORD"


def record_of(data: bytes) -> str:
    return zipfile.ZipFile(io.BytesIO(data)).read(RECORD).decode()


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (
            lambda d: rewrite(d, {}, [("stamp.py", b"print('second copy')")]),
            "refused entry 'stamp.py': it appears twice in the archive",
        ),
        (
            lambda d: rewrite(d, {}, [("./stamp.py", b"print('second copy')")]),
            "refused entry './stamp.py': it appears twice in the archive",
        ),
        (
            lambda d: rewrite(d, {}, [("other-2.0.dist-info/METADATA", b"Name: other\n")]),
            "more than one .dist-info directory (other-2.0.dist-info, stamp-1.0.dist-info)",
        ),
        (
            lambda d: rewrite(d, {"stamp.py": b"print('tampered')"}),
            "'stamp.py' does not match its hash in RECORD",
        ),
        (
            lambda d: rewrite(d, {}, [("sneaky.py", b"print('unlisted')")]),
            "'sneaky.py' is not listed in RECORD",
        ),
        (
            lambda d: rewrite(d, {"stamp.py": None}),
            "RECORD lists 'stamp.py', which the archive lacks",
        ),
        (lambda d: rewrite(d, {RECORD: None}), "stamp-1.0.dist-info/RECORD is missing"),
        (
            lambda d: rewrite(
                d,
                {
                    RECORD: record_of(d)
                    .replace(
                        record_line("stamp.py", zipfile.ZipFile(io.BytesIO(d)).read("stamp.py")),
                        record_line(
                            "stamp.py", zipfile.ZipFile(io.BytesIO(d)).read("stamp.py"), "md5"
                        ),
                    )
                    .encode()
                },
            ),
            "'stamp.py' is hashed with md5 in RECORD; sha256 or stronger is required",
        ),
    ],
)
def test_a_wheel_that_fails_a_check_is_refused_and_nothing_is_extracted(
    plugin_dir: Path, make_host: Host, tmp_path: Path, make: Callable[[bytes], bytes], reason: str
) -> None:
    (plugin_dir / "stamp-1.0-py3-none-any.whl").write_bytes(make(stamp_wheel()))
    [plugin] = make_host(plugin_dir).start().plugins()
    assert plugin.status == "failed"
    assert plugin.error == f"unusable wheel: {reason}"
    cache = tmp_path / "cache" / "wheels"
    assert not cache.exists() or not any(cache.iterdir()), "nothing may be extracted"


def test_a_tampered_cache_is_never_served(
    plugin_dir: Path, make_host: Host, tmp_path: Path
) -> None:
    data = stamp_wheel()
    (plugin_dir / "stamp-1.0-py3-none-any.whl").write_bytes(data)
    first = make_host(plugin_dir).start()
    assert first.execute("stamp", {}).output == "original"
    first.stop()
    extraction = tmp_path / "cache" / "wheels" / hashlib.sha256(data).hexdigest()[:32]
    (extraction / "stamp.py").write_text(
        textwrap.dedent(WHEEL_FILES["stamp.py"]).replace('"original"', '"tampered"')
    )
    write(extraction / "implant.py", GOOD.replace("good", "implant"))
    second = make_host(plugin_dir).start()
    assert second.execute("stamp", {}).output == "original"
    assert second.tool("implant") is None
    assert (extraction / "stamp.py").read_text() == textwrap.dedent(
        WHEEL_FILES["stamp.py"]
    ).lstrip()
    assert not (extraction / "implant.py").exists()


# --- reconciling -------------------------------------------------------------------------------


def test_a_plugin_taking_a_freed_name_is_not_reloaded_by_a_later_rescan(
    plugin_dir: Path, make_host: Host
) -> None:
    write(plugin_dir / "dup.py", GOOD.replace("good", "from_module"))
    write(plugin_dir / "dup" / "__init__.py", GOOD.replace("good", "from_package"))
    host = make_host(plugin_dir).start()
    (plugin_dir / "dup" / "__init__.py").unlink()
    (plugin_dir / "dup").rmdir()
    host.rescan()
    assert [t.name for t in host.tools()] == ["from_module"]
    events = Events(host)
    version = host.version
    change = host.rescan()
    assert (change.version, host.version) == (version, version)
    assert events.all == []


def test_a_save_made_while_the_host_starts_is_not_lost(plugin_dir: Path, make_host: Host) -> None:
    path = write(plugin_dir / "early.py", GOOD.replace('"good"', '"v1"'))
    write(plugin_dir / "later.py", GOOD.replace("good", "later"))
    host = make_host(plugin_dir, watch=True, debounce=0.005)
    saved = threading.Event()

    def save_during_start(event: PluginEvent) -> None:
        # runs inside start(), after the first scan read early.py
        if event.plugin == "later" and not saved.is_set():
            replace_atomically(path, GOOD.replace('"good"', '"v2"'))
            saved.set()

    host.on_event(save_during_start)
    host.start()
    assert saved.is_set()
    wait_for(lambda: host.execute("good", {}).output == "v2", what="the save made during start")


def test_a_plugin_larger_than_the_host_reads_fails_before_it_is_read(
    plugin_dir: Path, make_host: Callable[..., PluginHost]
) -> None:
    write(plugin_dir / "fine.py", GOOD)
    package = plugin_dir / "hoard"
    write(package / "__init__.py", GOOD.replace("good", "hoarded"))
    with (package / "data.bin").open("wb") as sparse:  # 1 GB on paper, nothing on disk
        sparse.truncate(2**30)
    host = make_host(plugin_dir).start()
    plugins = {p.name: p for p in host.plugins()}
    assert plugins["hoard"].status == "failed"
    assert "holds 1,024 MB of files; the host reads at most 100 MB" in (
        plugins["hoard"].error or ""
    )
    assert host.execute("good").output == "good"


def test_an_unknown_tool_name_never_reads_a_failed_plugins_traps(
    plugin_dir: Path, make_host: Callable[..., PluginHost]
) -> None:
    package = plugin_dir / "trap"
    write(package / "__init__.py", "raise RuntimeError('broken on purpose')\n")
    write(package / "real.py", "def wanted(): ...\n")
    os.mkfifo(package / "fifo.py")  # reading it would wait for a writer for ever
    (package / "zero.py").symlink_to("/dev/zero")  # reading it would never end
    host = make_host(plugin_dir).start()
    missing = host.execute("made_up_by_a_model", {})  # any name a model chooses
    assert missing.error is not None
    assert missing.error.code == "unknown_tool"
    failed = host.execute("wanted", {})
    assert "defines it but failed to load" in (failed.error.message if failed.error else "")


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_wheel_compressed_other_than_deflate_is_refused_before_it_is_expanded(
    plugin_dir: Path, make_host: Callable[..., PluginHost], method: int
) -> None:
    packed = zipfile.ZipInfo("packed/__init__.py")
    packed.compress_type = method  # these expand a whole block at once, whatever it declares
    data = wheel_bytes("packed", "1.0", {}, raw=[(packed, b"#" * 2**20)])
    (plugin_dir / "packed-1.0-py3-none-any.whl").write_bytes(data)
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert plugin.status == "failed"
    assert f"compressed with method {method}; wheels are stored or deflated" in (plugin.error or "")
