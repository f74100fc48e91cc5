"""Nothing goes missing silently: tools in submodules are found, look-alikes are named with the fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import make_wheel, wait_for, write

from agenthost import PluginHost
from agenthost._cli.main import main

TOOL = '''
from agenthost import tool


@tool
def {name}() -> str:
    """{name}."""
    return "{name}"
'''


def test_tools_in_every_module_the_package_loads_are_found(
    plugin_dir: Path, make_host: Callable[..., PluginHost]
) -> None:
    write(plugin_dir / "geo" / "__init__.py", "from . import extra\nfrom .deep import inner\n")
    write(plugin_dir / "geo" / "extra.py", TOOL.format(name="distance"))
    write(plugin_dir / "geo" / "deep" / "__init__.py", "")
    write(plugin_dir / "geo" / "deep" / "inner.py", TOOL.format(name="bearing"))
    write(plugin_dir / "geo" / "unused.py", TOOL.format(name="orphan"))
    host = make_host(plugin_dir).start()
    assert [t.name for t in host.tools()] == ["bearing", "distance"]
    assert host.execute("bearing").output == "bearing"
    [geo] = host.plugins()
    assert geo.warnings == (
        "geo/unused.py has @tool functions, but nothing imports it, so they are not loaded; "
        "import it from geo/__init__.py (`from . import unused`)",
    )


def test_a_re_exported_tool_is_defined_once(
    plugin_dir: Path, make_host: Callable[..., PluginHost]
) -> None:
    write(plugin_dir / "geo" / "__init__.py", "from .extra import distance\n")
    write(plugin_dir / "geo" / "extra.py", TOOL.format(name="distance"))
    host = make_host(plugin_dir).start()
    [geo] = host.plugins()
    assert (geo.tools, geo.problems) == (("distance",), ())


def test_a_wheel_without_entry_points_finds_tools_in_its_submodules(
    plugin_dir: Path, make_host: Callable[..., PluginHost]
) -> None:
    make_wheel(
        plugin_dir,
        "geo-tools",
        "1.0",
        {
            "geo_tools/__init__.py": "from . import extra\n",
            "geo_tools/extra.py": TOOL.format(name="distance"),
            "geo_tools/unused.py": TOOL.format(name="orphan"),
        },
    )
    host = make_host(plugin_dir).start()
    assert [t.name for t in host.tools()] == ["distance"]
    [wheel] = host.plugins()
    assert any("geo_tools/unused.py has @tool functions" in w for w in wheel.warnings)


@pytest.mark.parametrize(
    ("entry", "fix"),
    [
        ("my-tools.py", "my-tools.py is not loaded: its name is not a Python module name; "
         "rename it my_tools.py"),
        ("2fast.py", "rename it _2fast.py"),
        ("loose/mod.py", "loose/ is not loaded: a package folder needs an __init__.py; "
         "create loose/__init__.py"),
        ("geo-kit/__init__.py", "geo-kit/ is not loaded: its name is not a Python package name; "
         "rename it geo_kit/"),
    ],
)  # fmt: skip
def test_a_look_alike_is_named_with_the_fix(
    entry: str,
    fix: str,
    plugin_dir: Path,
    make_host: Callable[..., PluginHost],
    warnings: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    write(plugin_dir / entry, TOOL.format(name="lost"))
    host = make_host(plugin_dir).start()
    assert host.tools() == []
    assert any(fix in line for line in warnings), warnings
    folder = plugin_dir / entry.split("/")[0]
    if entry == "loose/mod.py":  # a folder without __init__.py may be a plugin directory
        assert main(["check", str(folder)]) == 0
        assert capsys.readouterr().out.startswith("plugin mod: 1 tool\n")
        return
    assert main(["check", str(folder)]) == 1
    assert fix in capsys.readouterr().out


def test_a_look_alike_saved_while_watching_is_named(
    plugin_dir: Path, make_host: Callable[..., PluginHost], warnings: list[str]
) -> None:
    make_host(plugin_dir, watch=True).start()
    write(plugin_dir / "my-tools.py", TOOL.format(name="lost"))
    wait_for(lambda: any("rename it my_tools.py" in line for line in warnings), 5, "a warning")


def test_litter_and_plain_folders_are_not_warned_about(
    plugin_dir: Path, make_host: Callable[..., PluginHost], warnings: list[str]
) -> None:
    write(plugin_dir / "notes.txt", "not code")
    write(plugin_dir / "data" / "table.csv", "a,b\n")
    write(plugin_dir / ".hidden-thing.py", "x = 1\n")
    write(plugin_dir / "__pycache__" / "x-1.py", "x = 1\n")
    make_host(plugin_dir).start()
    assert warnings == []


def test_list_shows_each_plugins_problems_and_warnings(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(plugin_dir / "geo" / "__init__.py", "")
    write(plugin_dir / "geo" / "unused.py", TOOL.format(name="orphan"))
    write(
        plugin_dir / "broken.py",
        "from agenthost import tool\n\n@tool\ndef bad(*args: int) -> int:\n    return 1\n",
    )
    assert main(["list", str(plugin_dir)]) == 0
    out = capsys.readouterr().out
    assert "geo:\n  warning: geo/unused.py has @tool functions" in out
    assert "broken:\n  problem: " in out
    assert "*args" in out


BROKEN = '''
from agenthost import tool

raise RuntimeError("no config")


@tool
def forecast(city: str) -> str:
    """The forecast."""
    return city
'''


def test_unknown_tool_names_the_failed_plugin_that_defines_it(
    plugin_dir: Path, make_host: Callable[..., PluginHost]
) -> None:
    write(plugin_dir / "weather.py", BROKEN)
    write(plugin_dir / "geo" / "__init__.py", "from .core import *\n")
    write(plugin_dir / "geo" / "core.py", "import missing_dependency\n" + TOOL.format(name="where"))
    host = make_host(plugin_dir).start()
    result = host.execute("forecast", {"city": "Oslo"})
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    assert "plugin 'weather'" in result.error.message
    assert "failed to load: RuntimeError: no config" in result.error.message
    assert result.error.details == {"failed_plugin": "weather"}
    nested = host.execute("where")
    assert nested.error is not None
    assert "plugin 'geo'" in nested.error.message
    other = host.execute("forcast")  # a typo of nothing loaded: the usual answer
    assert other.error is not None
    assert "failed" not in other.error.message


@pytest.mark.parametrize("command", [["schema"], ["call", "forecast", '{"city": "Oslo"}']])
def test_call_and_schema_say_when_plugins_failed(
    command: list[str], plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(plugin_dir / "weather.py", BROKEN)
    argv = [command[0], str(plugin_dir), *command[1:]]
    main(argv)
    err = capsys.readouterr().err
    assert f"agenthost {command[0]}: plugin 'weather' failed to load" in err
    assert "RuntimeError: no config" in err
