"""Loading plugins: the four forms, isolated namespaces, contained failures, lifecycle hooks."""

from __future__ import annotations

import json
import random
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import call, make_wheel, wheel_bytes, write

from agenthost import PluginHost
from agenthost._directory.namespace import ROOT

Host = Callable[..., PluginHost]


def plugin_modules() -> list[str]:
    return sorted(name for name in sys.modules if name.startswith(ROOT + "."))


# --- the four forms ------------------------------------------------------------------------


def test_a_module_file_is_a_plugin(plugin_dir: Path, make_host: Host) -> None:
    write(
        plugin_dir / "weather.py",
        """
        from agenthost import tool
        __version__ = "2.1"

        @tool
        def forecast(city: str) -> str:
            "Forecast."
            return f"sunny in {city}"
        """,
    )
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert (plugin.name, plugin.version, plugin.status, plugin.kind) == (
        "weather",
        "2.1",
        "loaded",
        "module",
    )
    assert plugin.tools == ("forecast",)
    assert len(plugin.content_hash) == 16
    info = host.tool("forecast")
    assert info is not None
    assert (info.plugin, info.version) == ("weather", "2.1")
    assert call(host, "forecast", city="Oslo") == "sunny in Oslo"


def test_a_package_folder_with_relative_and_absolute_imports(
    plugin_dir: Path, make_host: Host
) -> None:
    write(plugin_dir / "geo" / "__init__.py", """
        from geo.tools import distance
        from .version import VERSION as __version__
        """)  # fmt: skip
    write(plugin_dir / "geo" / "version.py", "VERSION = '0.3'\n")
    write(plugin_dir / "geo" / "core" / "__init__.py", "")
    write(
        plugin_dir / "geo" / "core" / "math.py",
        "def km(a: float, b: float) -> float:\n    return abs(a - b)\n",
    )
    write(
        plugin_dir / "geo" / "tools.py",
        """
        import geo.core.math
        from . import version
        from agenthost import tool

        @tool
        def distance(a: float, b: float) -> float:
            "Distance between two points on a line."
            import geo.core.math as lazily  # a lazy absolute import inside a call
            return geo.core.math.km(a, b) + lazily.km(0, 0)
        """,
    )
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert (plugin.name, plugin.version, plugin.kind, plugin.tools) == (
        "geo",
        "0.3",
        "package",
        ("distance",),
    )
    assert call(host, "distance", a=1, b=4) == 3
    assert "geo" not in sys.modules
    assert "geo.core.math" not in sys.modules


def test_a_wheel_with_top_level_modules(plugin_dir: Path, make_host: Host) -> None:
    make_wheel(plugin_dir, "text-tools", "1.4.0", {
        "text_tools/__init__.py": "from text_tools.impl import shout\n",
        "text_tools/impl.py": """
            from agenthost import tool
            from _helpers import exclaim

            @tool
            def shout(text: str) -> str:
                "Shout."
                return exclaim(text.upper())
            """,
        "_helpers.py": "def exclaim(text):\n    return text + '!'\n",
    })  # fmt: skip
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert (plugin.name, plugin.version, plugin.kind, plugin.status) == (
        "text_tools",
        "1.4.0",
        "wheel",
        "loaded",
    )
    assert call(host, "shout", text="hi") == "HI!"


def test_a_wheel_extracts_once_into_a_cache_named_by_its_hash(
    plugin_dir: Path, make_host: Host, tmp_path: Path
) -> None:
    import hashlib

    wheel = make_wheel(
        plugin_dir,
        "one",
        "1.0",
        {
            "one.py": "from agenthost import tool\n@tool\ndef one() -> int:\n    'One.'\n    return 1\n"
        },
    )
    host = make_host(plugin_dir).start()
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:32]
    assert (tmp_path / "cache" / "wheels" / digest / "one.py").is_file()
    assert call(host, "one") == 1


def test_wheel_entry_points_choose_what_is_scanned(plugin_dir: Path, make_host: Host) -> None:
    make_wheel(
        plugin_dir,
        "picky",
        "1.0",
        {
            "picky/__init__.py": "",
            "picky/public.py": "from agenthost import tool\n@tool\ndef wanted() -> str:\n    'Wanted.'\n    return 'yes'\n",
            "picky/other.py": "from agenthost import tool\n@tool\ndef unwanted() -> str:\n    'Unwanted.'\n    return 'no'\n",
        },
        entry_points={"picky": "picky.public"},
    )
    make_wheel(
        plugin_dir,
        "single",
        "1.0",
        {
            "single.py": "from agenthost import tool\n@tool\ndef a() -> int:\n    'A.'\n    return 1\n@tool\ndef b() -> int:\n    'B.'\n    return 2\n"
        },
        entry_points={"single": "single:b"},
    )
    host = make_host(plugin_dir).start()
    assert [t.name for t in host.tools()] == ["b", "wanted"]


def test_a_wheel_names_its_missing_requirements(plugin_dir: Path, make_host: Host) -> None:
    make_wheel(
        plugin_dir,
        "needy",
        "1.0",
        {"needy.py": "import not_installed_anywhere\n"},
        requires=["not-installed-anywhere>=2", "pydantic>=99", "pytest; python_version < '3'"],
    )
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert plugin.status == "failed"
    assert plugin.error == (
        "missing dependencies: not-installed-anywhere>=2, pydantic>=99 (installed: "
        f"{__import__('importlib.metadata').metadata.version('pydantic')}); "
        f"install them into the host's environment: {sys.executable} -m pip install "
        "'not-installed-anywhere>=2' 'pydantic>=99'"
    )


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("../escape.py", "it would escape the extraction directory"),
        ("ok/../../escape.py", "it would escape the extraction directory"),
        ("/etc/escape.py", "absolute or Windows path"),
        ("C:/escape.py", "absolute or Windows path"),
        ("evil.pth", ".pth files run code at interpreter start"),
        ("speedups.cpython-311-x86_64-linux-gnu.so", "compiled extensions are not supported"),
        ("mod.pyd", "compiled extensions are not supported"),
        ("x-1.0.data/scripts/run", ".data directories are not supported"),
    ],
)
def test_unsafe_wheel_entries_are_refused_and_nothing_is_written(
    plugin_dir: Path, make_host: Host, tmp_path: Path, entry: str, reason: str
) -> None:
    data = wheel_bytes("evil", "1.0", {"evil_mod.py": "x = 1\n"}, raw=[(entry, b"print('pwned')")])
    (plugin_dir / "evil-1.0-py3-none-any.whl").write_bytes(data)
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert plugin.status == "failed"
    assert plugin.error == f"unusable wheel: refused entry {entry!r}: {reason}"
    assert not (tmp_path / "escape.py").exists()
    cache = tmp_path / "cache" / "wheels"
    assert not cache.exists() or not any(cache.iterdir()), "nothing may be extracted"


def test_links_in_a_wheel_are_refused(plugin_dir: Path, make_host: Host) -> None:
    link = zipfile.ZipInfo("link.py")
    link.external_attr = 0o120777 << 16
    data = wheel_bytes("linky", "1.0", {"linky.py": "x = 1\n"}, raw=[(link, b"/etc/passwd")])
    (plugin_dir / "linky-1.0-py3-none-any.whl").write_bytes(data)
    [plugin] = make_host(plugin_dir).start().plugins()
    assert plugin.error == "unusable wheel: refused entry 'link.py': links are not allowed"


def test_a_platform_wheel_is_refused(plugin_dir: Path, make_host: Host) -> None:
    make_wheel(plugin_dir, "native", "1.0", {"native.py": "x = 1\n"}, pure=False)
    [plugin] = make_host(plugin_dir).start().plugins()
    assert plugin.error == "unusable wheel: not a pure-Python wheel (Root-Is-Purelib is not true)"


def test_a_truncated_wheel_is_a_clear_failure(plugin_dir: Path, make_host: Host) -> None:
    data = wheel_bytes("cut", "1.0", {"cut.py": "x = 1\n"})
    (plugin_dir / "cut-1.0-py3-none-any.whl").write_bytes(data[: len(data) // 2])
    [plugin] = make_host(plugin_dir).start().plugins()
    assert plugin.status == "failed"
    assert plugin.error is not None
    assert plugin.error.startswith("unusable wheel: not a readable zip archive")


def test_installed_distributions_with_the_entry_point_group_load_at_start(
    tmp_path: Path, make_host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    write(site / "installed_tools.py", """
        from agenthost import tool

        @tool
        def installed_ping() -> str:
            "Ping."
            return "pong"
        """)  # fmt: skip
    info = site / "installed_tools-3.2.dist-info"
    write(info / "METADATA", "Metadata-Version: 2.1\nName: installed-tools\nVersion: 3.2\n")
    write(info / "entry_points.txt", "[agenthost.plugins]\ninstalled = installed_tools\n")
    monkeypatch.syspath_prepend(str(site))
    host = make_host(None, installed=True).start()
    [plugin] = host.plugins()
    assert (plugin.name, plugin.version, plugin.kind, plugin.tools) == (
        "installed",
        "3.2",
        "installed",
        ("installed_ping",),
    )
    assert call(host, "installed_ping") == "pong"
    assert host.rescan().added == ()  # not part of the watched directory
    assert host.tool("installed_ping") is not None
    sys.modules.pop("installed_tools", None)


# --- isolation --------------------------------------------------------------------------------

UTILS_MAIN = """
    from agenthost import tool
    import utils

    @tool(name="{name}")
    def which() -> str:
        "Which utils."
        return utils.WHO
    """


def test_two_plugins_shipping_utils_each_get_their_own(plugin_dir: Path, make_host: Host) -> None:
    for who in ("alpha", "beta"):
        make_wheel(plugin_dir, who, "1.0", {
            f"{who}.py": UTILS_MAIN.format(name=f"{who}_utils"),
            "utils.py": f"WHO = {who!r}\n",
        })  # fmt: skip
    host = make_host(plugin_dir).start()
    assert call(host, "alpha_utils") == "alpha"
    assert call(host, "beta_utils") == "beta"
    assert "utils" not in sys.modules


def test_a_plugin_shipping_json_or_random_shadows_nothing_for_others(
    plugin_dir: Path, make_host: Host
) -> None:
    make_wheel(plugin_dir, "shadow", "1.0", {
        "shadow_main.py": """
            import json, random
            from agenthost import tool

            @tool
            def shadowed() -> str:
                "Its own json and random."
                return json.WHO + random.WHO
            """,
        "json.py": "WHO = 'fake-json '\n",
        "random.py": "WHO = 'fake-random'\n",
    })  # fmt: skip
    write(plugin_dir / "random.py", """
        import json
        from agenthost import tool

        @tool
        def uses_stdlib_json() -> str:
            "The real json."
            return json.dumps({"ok": True})
        """)  # fmt: skip
    host = make_host(plugin_dir).start()
    assert call(host, "shadowed") == "fake-json fake-random"
    assert call(host, "uses_stdlib_json") == '{"ok": true}'
    assert json.dumps([1]) == "[1]"
    assert random.randint(1, 1) == 1
    assert sys.modules["json"].__file__ != str(plugin_dir / "json.py")


def test_the_host_gains_no_bare_plugin_module_names(plugin_dir: Path, make_host: Host) -> None:
    write(
        plugin_dir / "pkgx" / "__init__.py",
        "from pkgx import sub\nfrom agenthost import tool\n@tool\ndef px() -> int:\n    'Px.'\n    return sub.V\n",
    )
    write(plugin_dir / "pkgx" / "sub.py", "V = 7\n")
    write(
        plugin_dir / "modx.py",
        "from agenthost import tool\n@tool\ndef mx() -> int:\n    'Mx.'\n    return 1\n",
    )
    before = set(sys.modules)
    host = make_host(plugin_dir).start()
    added = set(sys.modules) - before
    assert {"pkgx", "pkgx.sub", "modx"}.isdisjoint(sys.modules)
    assert all(name.startswith(ROOT) for name in added)
    host.stop()
    assert set(sys.modules) - before <= {ROOT}


def test_dataclasses_future_annotations_and_pydantic_models_work_inside_plugins(
    plugin_dir: Path, make_host: Host
) -> None:
    write(plugin_dir / "shapes.py", """
        from __future__ import annotations

        from dataclasses import dataclass
        from pydantic import BaseModel
        from agenthost import tool

        @dataclass
        class Size:
            width: int
            height: int = 1

        class Style(BaseModel):
            color: str
            size: Size

        @tool
        def area(style: Style, extra: Size | None = None) -> int:
            "Area."
            return style.size.width * style.size.height + (extra.width if extra else 0)
        """)  # fmt: skip
    host = make_host(plugin_dir).start()
    info = host.tool("area")
    assert info is not None
    assert info.input_schema["properties"]["style"]["properties"]["size"]["required"] == ["width"]
    assert (
        call(
            host,
            "area",
            style={"color": "red", "size": {"width": 3, "height": 2}},
            extra={"width": 1},
        )
        == 7
    )


def test_two_versions_coexist_while_the_old_one_drains(plugin_dir: Path, make_host: Host) -> None:
    path = write(
        plugin_dir / "ver.py",
        "from agenthost import tool\n@tool\ndef v() -> int:\n    'V.'\n    return 1\n",
    )
    host = make_host(plugin_dir).start()
    old = host._snapshot.tools["v"].owner
    assert old is not None
    assert old.enter()  # a call in flight on version 1
    write(path, "from agenthost import tool\n@tool\ndef v() -> int:\n    'V.'\n    return 2\n")
    host.rescan()
    assert call(host, "v") == 2
    assert old.namespace is not None
    assert old.namespace.prefix in sys.modules  # the old version is still importable
    assert len({n.split(".")[1] for n in plugin_modules()}) == 2
    old.exit()
    assert old.closed
    assert len({n.split(".")[1] for n in plugin_modules()}) == 1


# --- containing failures ------------------------------------------------------------------------

FAILURES = {
    "syntax": ("def broken(:\n", "SyntaxError: invalid syntax", 1),
    "import_error": (
        "import no_such_module_anywhere\n",
        "ModuleNotFoundError: No module named 'no_such_module_anywhere'",
        1,
    ),
    "exception": (
        "x = 1\nraise RuntimeError('boom at import')\n",
        "RuntimeError: boom at import",
        2,
    ),
    "system_exit": ("import sys\nsys.exit(3)\n", "SystemExit: 3", 2),
    "keyboard_interrupt": ("raise KeyboardInterrupt\n", "KeyboardInterrupt", 1),
    "base_exception": ("class Odd(BaseException):\n    pass\nraise Odd('odd')\n", "Odd: odd", 3),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_import_failures_are_contained_and_reported(
    plugin_dir: Path, make_host: Host, case: str
) -> None:
    source, message, line = FAILURES[case]
    write(plugin_dir / "bad.py", source)
    write(
        plugin_dir / "good.py",
        "from agenthost import tool\n@tool\ndef fine() -> str:\n    'Fine.'\n    return 'fine'\n",
    )
    host = make_host(plugin_dir).start()
    bad = next(p for p in host.plugins() if p.name == "bad")
    assert (bad.status, bad.error, bad.tools) == ("failed", message, ())
    assert bad.location == f"{plugin_dir / 'bad.py'}:{line}"
    assert f'File "{plugin_dir / "bad.py"}", line {line}' in bad.traceback
    assert call(host, "fine") == "fine"
    assert not [n for n in plugin_modules() if "bad" in n]


def test_a_package_failing_half_way_leaves_nothing_in_sys_modules(
    plugin_dir: Path, make_host: Host
) -> None:
    write(plugin_dir / "half" / "__init__.py", "from half import first\nfrom half import second\n")
    write(plugin_dir / "half" / "first.py", "X = 1\n")
    write(plugin_dir / "half" / "second.py", "raise ValueError('second fails')\n")
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert plugin.error == "ValueError: second fails"
    assert plugin.location == f"{plugin_dir / 'half' / 'second.py'}:1"
    assert plugin_modules() == []


def test_one_bad_tool_does_not_stop_the_rest_of_a_new_plugin(
    plugin_dir: Path, make_host: Host
) -> None:
    write(plugin_dir / "mixed.py", """
        from agenthost import tool

        @tool
        def good(x: int) -> int:
            "Good."
            return x

        @tool
        def bad(x) -> int:
            "Bad."
            return x
        """)  # fmt: skip
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert (plugin.status, plugin.tools) == ("loaded", ("good",))
    [problem] = plugin.problems
    assert problem.startswith(
        f"cannot define tool from function 'bad' at {plugin_dir / 'mixed.py'}:"
    )
    assert "parameter 'x' (line 9): has no type annotation" in problem


# --- lifecycle hooks --------------------------------------------------------------------------

HOOKS = """
    import json, os
    from agenthost import tool
    LOG = os.environ["HOOK_LOG"]

    def record(what):
        with open(LOG, "a") as f:
            f.write(what + "\\n")

    {on_load}

    {on_unload}

    @tool
    def hooked() -> str:
        "Hooked."
        return "{tag}"
    """


def hooks_source(tag: str, on_load: str = "", on_unload: str = "") -> str:
    return HOOKS.format(tag=tag, on_load=on_load, on_unload=on_unload)


def test_on_load_runs_after_import_and_on_unload_after_the_last_call(
    plugin_dir: Path, make_host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "hooks.log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    load = "def on_load():\n        record('load {tag}')"
    unload = "async def on_unload():\n        record('unload {tag}')"
    path = write(
        plugin_dir / "life.py", hooks_source("v1", load.format(tag="v1"), unload.format(tag="v1"))
    )
    host = make_host(plugin_dir).start()
    assert log.read_text().split("\n")[:-1] == ["load v1"]
    version = host._snapshot.tools["hooked"].owner
    assert version is not None
    assert version.enter()
    write(path, hooks_source("v2", load.format(tag="v2"), unload.format(tag="v2")))
    host.rescan()
    assert log.read_text().split("\n")[:-1] == ["load v1", "load v2"]  # v1 still has a call
    version.exit()
    assert log.read_text().split("\n")[:-1] == ["load v1", "load v2", "unload v1"]
    host.stop()
    assert log.read_text().split("\n")[:-1] == ["load v1", "load v2", "unload v1", "unload v2"]


def test_hook_errors_are_reported_never_fatal(
    plugin_dir: Path, make_host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "log"))
    write(plugin_dir / "grumpy.py", hooks_source(
        "ok",
        "def on_load():\n        raise ConnectionError('database down')",
        "def on_unload():\n        raise RuntimeError('cannot close')",
    ))  # fmt: skip
    host = make_host(plugin_dir).start()
    [plugin] = host.plugins()
    assert (plugin.status, plugin.tools) == ("loaded", ("hooked",))
    assert plugin.warnings == ("on_load: on_load raised ConnectionError: database down",)
    assert plugin.problems == ()
    host.stop()  # on_unload fails: logged, and stop still completes
    assert plugin_modules() == []


def test_stale_wheel_extractions_are_pruned_at_start(
    plugin_dir: Path, make_host: Host, tmp_path: Path
) -> None:
    import os
    import time

    stale = tmp_path / "cache" / "wheels" / ("0" * 32)
    fresh = tmp_path / "cache" / "wheels" / ("1" * 32)
    for path in (stale, fresh):
        write(path / "mod.py", "x = 1\n")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(stale, (day_ago, day_ago))
    make_host(plugin_dir).start()
    assert not stale.exists()
    assert fresh.exists()


def test_a_failing_on_load_does_not_stop_a_reload(
    plugin_dir: Path, make_host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "log"))
    path = write(plugin_dir / "grumpy.py", hooks_source("v1"))
    host = make_host(plugin_dir).start()
    write(path, hooks_source("v2", "def on_load():\n        raise ConnectionError('down')"))
    host.rescan()
    [plugin] = host.plugins()
    assert (plugin.status, plugin.warnings) == (
        "loaded",
        ("on_load: on_load raised ConnectionError: down",),
    )
    assert call(host, "hooked") == "v2"


def test_names_a_provider_refuses_are_warned_about_at_load(
    plugin_dir: Path, make_host: Host
) -> None:
    write(
        plugin_dir / "render.py",
        "from agenthost import tool\n@tool(name='3d_render')\ndef r() -> int:\n    'Render.'\n    return 3\n",
    )
    [plugin] = make_host(plugin_dir).start().plugins()
    assert plugin.status == "loaded"
    assert plugin.warnings == (
        f"tool '3d_render' at {plugin_dir / 'render.py'}:2: gemini refuses the name "
        "(start with a letter or '_', then a-z A-Z 0-9 _ . : -, at most 128)",
    )
