"""What a newcomer trips on: each mistake gets a specific error, said where it happens."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import importlib_metadata
import pytest
from helpers import wait_for, wheel_bytes, write
from mcp_clients import LIVENESS, command, environment, http_server

from agenthost import PluginHost
from agenthost._cli.main import main

PING = '''
from agenthost import tool


@tool
def ping() -> str:
    """Pong."""
    return "pong"
'''


def test_a_mistyped_plugin_directory_is_an_error_not_an_empty_host(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    with pytest.raises(FileNotFoundError, match="plugns does not exist: fix the path"):
        PluginHost(tmp_path / "plugns", installed=False).start()
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(NotADirectoryError, match=r"notes\.txt is a file"):
        PluginHost(tmp_path / "notes.txt", installed=False).start()


def test_a_watched_directory_may_appear_later_and_its_absence_is_said(
    tmp_path: Path, make_host: Callable[..., PluginHost], warnings: list[str]
) -> None:
    later = tmp_path / "later"
    host = make_host(later, watch=True, debounce=0.02).start()
    assert any(f"{later} does not exist yet" in line for line in warnings), warnings
    write(later / "ping.py", PING)
    wait_for(lambda: host.tool("ping"), what="the plugin of the new directory to load")


GUARDED = '''
from agenthost import tool


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool(permissions={"http.get"})
def fetch(url: str) -> str:
    """Fetch."""
    return url


@tool(permissions={"fs.write"})
def erase(path: str) -> str:
    """Erase."""
    return path
'''


def test_serve_says_which_tools_each_caller_cannot_see_and_the_grant_that_shows_them(
    tmp_path: Path,
) -> None:
    plugins = write(tmp_path / "plugins" / "guarded.py", GUARDED).parent
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({
        "a" * 32: {"session": "alice", "grants": ["http.get"]},
        "b" * 32: {"session": "bob", "grants": ["*"]},
    }))  # fmt: skip
    tokens.chmod(0o600)
    with http_server(plugins, "--tokens", str(tokens)) as served:
        wait_for(lambda: "hidden from" in served.output(), what="the hidden tools to be named")
        assert (
            "    hidden from session 'alice': erase (needs fs.write); add [\"fs.write\"] to the "
            f"grants of session 'alice' in {tokens} (or add --grant fs.write for every "
            "caller)\n"
        ) in served.output()
        assert "session 'bob'" not in served.output()  # "*": it sees everything
        write(plugins / "guarded.py", GUARDED.replace('"fs.write"', '"fs.delete"'))
        wait_for(lambda: "needs fs.delete" in served.output(), what="a reload to say it again")


def test_serve_over_stdio_says_what_every_caller_cannot_see(tmp_path: Path) -> None:
    plugins = write(tmp_path / "plugins" / "guarded.py", GUARDED).parent
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command(plugins, "--grant", "fs.write"),
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=sink,
                                   env=environment())  # fmt: skip
    try:
        wait_for(lambda: "hidden from" in log.read_text(), LIVENESS, what="the hidden tools")
        assert (
            "    hidden from every caller: fetch (needs http.get); add --grant http.get\n"
        ) in log.read_text()
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the client hung up: the server ends
        process.wait(LIVENESS)


def test_list_says_what_each_tool_needs_and_what_serve_would_hide(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = write(tmp_path / "plugins" / "guarded.py", GUARDED).parent
    assert main(["list", str(plugins), "--grant", "http.get"]) == 0
    shown = capsys.readouterr().out
    assert (
        "guarded:\n  hidden from serve's callers with --grant http.get: erase (needs fs.write); "
        "serve with --grant http.get --grant fs.write\n"
    ) in shown
    assert main(["list", str(plugins), "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    needs = {t["name"]: (t["permissions"], t["hidden_without"]) for t in record["tools"]}
    assert needs == {
        "add": ([], []),
        "fetch": (["http.get"], ["http.get"]),
        "erase": (["fs.write"], ["fs.write"]),
    }


def test_watch_prints_a_definition_errors_header_once(tmp_path: Path) -> None:
    plugins = write(tmp_path / "plugins" / "geo.py", PING).parent
    log = tmp_path / "watch.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([*command(plugins)[:3], "watch", str(plugins)],
                                   stdout=sink, stderr=subprocess.STDOUT,
                                   env=environment())  # fmt: skip
    try:
        wait_for(lambda: "watching" in log.read_text(), LIVENESS, what="watch to start")
        write(plugins / "geo.py", PING + "\n\n@tool\ndef lookup(city) -> str:\n    return city\n")
        wait_for(lambda: "(1 problem):" in log.read_text(), LIVENESS, what="the error")
        shown = log.read_text()
        assert shown.count("cannot define tool from function 'lookup'") == 1, shown
        assert "- parameter 'city' (line 11): has no type annotation" in shown
    finally:
        process.terminate()
        process.wait(LIVENESS)


def test_make_watch_installs_what_serve_needs(tmp_path: Path) -> None:
    checkout = Path(__file__).resolve().parent.parent
    planned = subprocess.run(
        ["make", "-n", "-B", "watch", f"VENV={tmp_path / 'venv'}"],
        cwd=checkout, capture_output=True, text=True, check=True, timeout=LIVENESS,
    ).stdout  # fmt: skip
    [install] = [line for line in planned.splitlines() if " -m pip install " in line]
    assert " -e '.[mcp]'" in install  # the README's next step after `make watch` is `serve`


def test_outside_a_checkout_the_install_hint_names_the_extras_own_requirements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Installed from a wheel, ``pip install 'agenthost[mcp]'`` finds no agenthost on the
    index: the hint installs what the extra adds, which is there."""
    real = importlib_metadata.distribution("agenthost")

    class FromAWheel:
        requires = real.requires

        def read_text(self, name: str) -> str | None:
            return '{"url": "file:///tmp/agenthost-1.0-py3-none-any.whl", "archive_info": {}}'

    monkeypatch.setattr(importlib_metadata, "distribution", lambda name: FromAWheel())
    monkeypatch.setitem(sys.modules, "agenthost._serve.server", None)  # as if not installed
    assert main(["serve", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"agenthost serve needs the MCP SDK: {sys.executable} -m pip install 'mcp<3,>=2.3'\n"
    )


def test_one_wheel_has_one_plugin_name_installed_or_dropped_in_and_is_provided_once(
    tmp_path: Path, make_host: Callable[..., PluginHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    shout = """
        from agenthost import tool

        @tool
        def shout(text: str) -> str:
            "Shout."
            return text.upper()
        """
    data = wheel_bytes("Text-Tools", "1.4", {"text_tools/__init__.py": shout},
                       entry_points={"text_tools": "text_tools"})  # fmt: skip
    site = tmp_path / "site"  # pip install: the archive unpacked onto the import path
    zipfile.ZipFile(io.BytesIO(data)).extractall(site)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "text_tools", raising=False)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "text_tools-1.4-py3-none-any.whl").write_bytes(data)
    try:
        host = make_host(plugins, installed=True).start()
        by_kind = {p.kind: p for p in host.plugins()}
        assert (by_kind["installed"].name, by_kind["installed"].status) == ("text_tools", "loaded")
        dropped = by_kind["wheel"]
        assert (dropped.name, dropped.status) == ("text_tools", "conflict")
        assert dropped.error == (
            "plugin 'text_tools' is already provided by an installed distribution (entry point "
            "text_tools); remove one of them"
        )
        assert host.execute("shout", {"text": "hi"}).output == "HI"
    finally:
        sys.modules.pop("text_tools", None)


def test_check_of_a_plugin_directory_checks_each_plugin_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = write(tmp_path / "plugins" / "ping.py", PING).parent
    write(plugins / "guarded.py", GUARDED)
    assert main(["check", str(plugins)]) == 0
    shown = capsys.readouterr().out
    assert "plugin guarded: 3 tools\n" in shown
    assert "plugin ping: 1 tool\n" in shown
    assert "__init__.py" not in shown
    missing = tmp_path / "nope.py"
    assert main(["check", str(missing)]) == 1
    assert capsys.readouterr().out == f"{missing}: no such file or directory\n"
    (tmp_path / "empty").mkdir()
    assert main(["check", str(tmp_path / "empty")]) == 1
    assert "no plugins in this folder" in capsys.readouterr().out


@pytest.mark.parametrize(
    "target",
    [["greet", "name=Bob"], ["greet", '{"name": "Bob"}', '{"times": 2}'],
     ["{plugins}", "greet", '{"name": "Bob"}', '{"times": 2}']],
)  # fmt: skip
def test_call_says_the_arguments_are_one_json_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    target: list[str],
) -> None:  # fmt: skip
    plugins = write(tmp_path / "plugins" / "ping.py", PING).parent
    monkeypatch.chdir(tmp_path)
    assert main(["call", *(str(plugins) if t == "{plugins}" else t for t in target)]) == 2
    assert capsys.readouterr().err == (
        "agenthost call: the arguments are one JSON object after the tool's name, e.g. "
        """agenthost call greet '{"name": "Bob"}' (or - to read them from stdin)\n"""
    )


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "soon"])
def test_a_timeout_must_be_more_than_zero_seconds(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["call", "ping", f"--timeout={timeout}"])
    assert exited.value.code == 2
    assert "argument --timeout:" in capsys.readouterr().err


def test_call_help_says_what_it_prints_and_reads(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["call", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert shown.startswith("usage: agenthost call [options] [DIR] TOOL [ARGS | -] ")
    assert "..." not in shown.split("positional arguments")[0]  # one call, not a chain
    assert "(- reads them from stdin)" in shown
    assert "the answer the model would see" in shown


def test_a_permission_error_in_the_cli_leads_with_the_flag_that_grants_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = write(tmp_path / "plugins" / "guarded.py", GUARDED).parent
    assert main(["call", str(plugins), "fetch", '{"url": "x"}', "--output", "text"]) == 1
    assert capsys.readouterr() == (
        "",
        "agenthost call: tool 'fetch' needs http.get; run again with --grant http.get\n",
    )
    assert main(["call", str(plugins), "fetch", '{"url": "x"}', "--output", "json"]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("agenthost call: tool 'fetch' needs http.get; run again with --grant")
    assert "host.permissions.grant(" in json.loads(out)["error"]["message"]  # the library's way


@pytest.mark.parametrize("command", [["schema"], ["call", "ping", "--output", "json"]])
def test_schema_and_call_say_which_functions_of_a_loaded_plugin_are_not_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    half = PING + "\n\n@tool\ndef lookup(city) -> str:\n    return city\n"
    plugins = write(tmp_path / "plugins" / "half.py", half).parent
    assert main([command[0], str(plugins), *command[1:]]) == 0
    assert capsys.readouterr().err == (
        f"agenthost {command[0]}: plugin 'half' loaded without 1 function that cannot be tools "
        f"(lookup); see agenthost check {plugins / 'half.py'}\n"
    )


def test_an_import_that_hangs_in_a_worker_fails_within_the_import_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = write(tmp_path / "plugins" / "ping.py", PING).parent
    write(plugins / "slow.py", "import time\n\ntime.sleep(600)\n")
    started = time.monotonic()
    code = main(["list", str(plugins), "--isolation", "process", "--import-timeout", "3"])
    assert time.monotonic() - started < 20  # a liveness bound: the default waits 30 s
    assert code == 0
    shown = capsys.readouterr().out
    assert "process (no worker: the load failed)" in shown
    assert (
        "error: the plugin's import did not finish within 3 s; worker stopped (more time: "
        "--import-timeout or WorkerOptions.import_timeout)" in shown
    )


def test_tracing_without_opentelemetry_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "agenthost.otel", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    with pytest.raises(ImportError) as raised:
        import agenthost.otel  # noqa: F401
    checkout = Path(__file__).resolve().parent.parent
    assert str(raised.value) == (
        f"agenthost.otel needs OpenTelemetry: {sys.executable} -m pip install -e '{checkout}[otel]'"
    )


@pytest.mark.parametrize(
    ("isolation", "said"),
    [("proces", "isolation is 'proces'"), ({"ping": "Process"}, "isolation['ping'] is 'Process'")],
)
def test_a_mistyped_isolation_level_is_refused_not_run_in_process(
    tmp_path: Path, isolation: object, said: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{said}: a level is one of")):
        PluginHost(tmp_path, installed=False, isolation=isolation)  # type: ignore[arg-type]


def test_a_level_from_a_callable_that_is_not_one_fails_the_plugin_closed(
    tmp_path: Path, make_host: Callable[..., PluginHost]
) -> None:
    plugins = write(tmp_path / "plugins" / "ping.py", PING).parent
    host = make_host(plugins, isolation=lambda name: "sandboxed").start()
    [plugin] = host.plugins()
    assert (plugin.status, host.tools()) == ("failed", [])
    assert plugin.error == (
        "isolation 'sandboxed' for plugin ping is not one of in-process, process; "
        "the plugin is not loaded"
    )


def test_an_init_file_in_the_plugin_directory_is_no_plugin_and_is_named(
    tmp_path: Path, make_host: Callable[..., PluginHost], warnings: list[str]
) -> None:
    plugins = write(tmp_path / "plugins" / "ping.py", PING).parent
    (plugins / "__init__.py").write_text("")
    host = make_host(plugins).start()
    assert [p.name for p in host.plugins()] == ["ping"]
    assert any("__init__.py is not loaded: a plugin directory is not a package" in line
               for line in warnings), warnings  # fmt: skip


def test_call_given_only_a_directory_asks_for_the_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = write(tmp_path / "plugins" / "ping.py", PING).parent
    assert main(["call", str(plugins)]) == 2
    assert capsys.readouterr().err.startswith(
        f"agenthost call: {plugins} is a directory: name the tool after it"
    )


@pytest.mark.parametrize("flag", [["--allow-host", "proxy.example"], ["--allow-origin", "x"]])
def test_serve_over_stdio_refuses_http_only_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    plugins = write(tmp_path / "plugins" / "ping.py", PING).parent
    assert main(["serve", str(plugins), *flag]) == 2
    assert capsys.readouterr().err == (
        f"agenthost serve: {flag[0]} applies to HTTP: add --http [HOST:]PORT\n"
    )
