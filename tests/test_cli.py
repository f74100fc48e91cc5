"""The command line, through main(argv), and `agenthost watch` as a real process."""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from helpers import replace_atomically, wheel_bytes, write

from agenthost._cli.main import main

GOOD = """
    from agenthost import tool
    __version__ = "1.2"

    @tool
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b
    """


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_list_prints_a_table_and_errors(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTHOST_CACHE_DIR", str(plugin_dir.parent / "cache"))
    write(plugin_dir / "math_tools.py", GOOD)
    write(plugin_dir / "broken.py", "raise RuntimeError('no config')\n")
    code, out = run(capsys, "list", str(plugin_dir))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["PLUGIN", "VERSION", "STATUS", "TOOLS", "RUNS", "IN", "PATH"]
    assert lines[1].split() == [
        "broken", "-", "failed", "-", "in-process", str(plugin_dir / "broken.py")
    ]  # fmt: skip
    assert lines[2].split() == [
        "math_tools",
        "1.2",
        "loaded",
        "add",
        "in-process",
        str(plugin_dir / "math_tools.py"),
    ]
    assert "broken:\n  error: RuntimeError: no config" in out


def test_list_json(plugin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(plugin_dir / "math_tools.py", GOOD)
    code, out = run(capsys, "list", str(plugin_dir), "--json")
    [record] = json.loads(out)
    assert (code, record["name"], record["status"]) == (0, "math_tools", "loaded")
    assert record["tools"][0]["name"] == "add"
    assert record["tools"][0]["input_schema"]["required"] == ["a", "b"]


def test_check_a_good_plugin(plugin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(plugin_dir / "math_tools.py", GOOD)
    code, out = run(capsys, "check", str(path))
    assert code == 0
    assert out.splitlines() == [
        "plugin math_tools 1.2: 1 tool",
        "  add(a, b): Add two integers.",
        "OK",
    ]


def test_check_reports_definition_errors_and_provider_findings(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(plugin_dir / "mixed.py", """
        from agenthost import tool

        @tool(name="3d_render")
        def render(scene: str) -> str:
            "Render."
            return scene

        @tool
        def untyped(x) -> str:
            "Untyped."
            return x
        """)  # fmt: skip
    code, out = run(capsys, "check", str(path))
    assert code == 1
    assert "error: cannot define tool from function 'untyped'" in out
    # gemini alone refuses the name: a warning by default (the untyped tool still fails the check)
    assert f"{path}:3: warning: [gemini] tool '3d_render': name '3d_render' breaks the rule" in out
    assert out.splitlines()[-1] == "FAILED"
    code, out = run(capsys, "check", str(path), "--provider", "gemini")
    assert f"{path}:3: error: [gemini] tool '3d_render': name '3d_render' breaks the rule" in out


def test_check_a_plugin_that_does_not_import(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(plugin_dir / "syntax.py", "def f(:\n")
    code, out = run(capsys, "check", str(path))
    assert code == 1
    assert out.startswith(f"failed: {path}:1: SyntaxError: invalid syntax")


def test_check_does_not_run_hooks_or_leave_modules(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = plugin_dir.parent / "hook-ran"
    hook = f"\ndef on_load():\n    open({str(marker)!r}, 'w').close()\n"
    path = write(plugin_dir / "hooked.py", textwrap.dedent(GOOD) + hook)
    before = set(sys.modules)
    assert run(capsys, "check", str(path))[0] == 0
    assert not marker.exists()
    assert {n for n in set(sys.modules) - before if n.count(".")} == set()


def test_check_json(plugin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(plugin_dir / "math_tools.py", GOOD)
    code, out = run(capsys, "check", str(path), "--json")
    [record] = json.loads(out)
    assert (code, record["ok"], record["tools"][0]["name"], record["findings"]) == (
        0,
        True,
        "add",
        [],
    )


BAD_PARAMETER = """
from agenthost import tool

class Opaque:
    pass

@tool
def bad(thing: Opaque) -> str:
    'Takes something no model can send.'
    return ''
"""


def test_check_json_of_several_paths_is_one_array_with_structured_problems(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(plugin_dir / "math_tools.py", GOOD)
    bad = write(plugin_dir / "bad_tools.py", BAD_PARAMETER)
    broken = write(plugin_dir / "broken.py", "def oops(:\n")
    dashed = write(plugin_dir / "my-tools.py", GOOD)
    code, out = run(capsys, "check", str(good), str(bad), str(broken), str(dashed), "--json")
    records = json.loads(out)  # one document, whatever the number of paths
    assert code == 1
    assert [(r["plugin"], r["ok"]) for r in records] == [
        ("math_tools", True), ("bad_tools", False), (None, False), (None, False)
    ]  # fmt: skip
    lines = bad.read_text().splitlines()
    [problem] = records[1]["problems"]
    decorator = lines.index("@tool") + 1
    assert (problem["function"], problem["file"], problem["line"]) == ("bad", str(bad), decorator)
    [detail] = problem["problems"]
    assert (detail["parameter"], detail["line"]) == ("thing", decorator + 1)
    assert "Opaque" in detail["message"]
    assert (records[2]["file"], records[2]["line"]) == (str(broken), 1)
    assert "rename it my_tools.py" in records[3]["error"]


def test_new_writes_a_template_that_loads_and_passes_check(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "new", "notes", "--dir", str(plugin_dir))
    target = plugin_dir / "notes.py"
    assert (code, out.strip()) == (0, f"wrote {target}; check it with: agenthost check {target}")
    assert run(capsys, "check", str(target)) == (
        0,
        "plugin notes 0.1.0: 1 tool\n  notes_echo(text, times, style): Send the text back, repeated.\nOK\n",
    )
    assert main(["new", "notes", "--dir", str(plugin_dir)]) == 1
    assert capsys.readouterr() == ("", f"agenthost new: {target} exists; choose another name\n")
    assert main(["new", "not-valid", "--dir", str(plugin_dir)]) == 2
    assert capsys.readouterr() == ("", "agenthost new: plugin name 'not-valid' must be a Python "
                                       "identifier that does not start with '_'; try not_valid\n")  # fmt: skip
    # a plugin author's own project: ruff's defaults (88 columns), agenthost a third party
    author = ["--isolated", "--select", "E,F,I,W,UP,B"]
    for ruff in (["check", *author], ["format", "--isolated", "--check"]):
        linted = subprocess.run(
            [sys.executable, "-m", "ruff", *ruff, str(target)],
            capture_output=True,
            text=True,
            check=False,
            cwd=plugin_dir,
        )
        assert linted.returncode == 0, linted.stdout


def test_schema_prints_provider_definitions(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(plugin_dir / "math_tools.py", GOOD)
    code, out = run(capsys, "schema", str(plugin_dir), "--format", "openai-responses", "--strict")
    [definition] = json.loads(out)
    assert (code, definition["name"], definition["strict"]) == (0, "add", True)


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: agenthost" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["watch", "list", "check", "new", "schema", "call"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    assert f"usage: agenthost {command}" in capsys.readouterr().out


class Process:
    """`agenthost watch` in a subprocess, its stdout read line by line with deadlines."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agenthost", "watch", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._pump_thread.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, *words: str, timeout: float = 10.0) -> str:
        while True:
            line = self.lines.get(timeout=timeout)
            if all(word in line for word in words):
                return line


@pytest.mark.parametrize("as_json", [False, True])
def test_watch_logs_load_reload_unload_and_exits_0_on_ctrl_c(
    plugin_dir: Path, tmp_path: Path, as_json: bool
) -> None:
    env = {
        **os.environ,
        "AGENTHOST_CACHE_DIR": str(tmp_path / "cache"),
        "AGENTHOST_DEBOUNCE_MS": "20",
    }
    process = Process(str(plugin_dir), *(["--json"] if as_json else []), env=env)
    try:
        assert process.proc.stderr is not None
        assert process.proc.stderr.readline() == "ready: 0 plugins, 0 tools, 0 failed\n"
        assert "watching" in process.proc.stderr.readline()
        path = write(plugin_dir / "math_tools.py", GOOD)
        loaded = process.expect("loaded", "math_tools")
        replace_atomically(path, GOOD_V2)
        reloaded = process.expect("reloaded", "math_tools")
        replace_atomically(path, "def broken(:\n")
        failed = process.expect("failed", "math_tools")
        path.unlink()
        unloaded = process.expect("unloaded", "math_tools")
        process.proc.send_signal(signal.SIGINT)
        assert process.proc.wait(timeout=10) == 0
    finally:
        process.close()
    if as_json:
        records = [json.loads(line) for line in (loaded, reloaded, failed, unloaded)]
        assert [r["event"] for r in records] == ["loaded", "reloaded", "failed", "unloaded"]
        assert (records[0]["version"], records[0]["tools"]) == ("1.2", 1)
        assert records[0]["tool_names"] == ["add"]
        assert (records[1]["added"], records[1]["removed"], records[1]["changed"]) == (
            ["sub"],
            [],
            ["add"],
        )
        assert records[1]["breaking"] == {"add": ["parameter 'c' is now required"]}
        assert records[2]["previous_serving"] is True
        assert records[2]["location"] == f"{path}:1"
        assert "SyntaxError" in records[2]["message"]
    else:
        assert "math_tools 1.2: 1 tool (add) in " in loaded
        assert f"({path})" in loaded
        assert (
            "reloaded math_tools 1.2: 2 tools, +sub ~add (breaking: parameter 'c' is now "
            "required) in " in reloaded
        )
        assert f"failed   math_tools: {path}:1: SyntaxError: invalid syntax" in failed
        assert failed.rstrip().endswith("(the previous version keeps serving)")
        assert "\033[" not in loaded  # piped: no colour codes
        assert "unloaded math_tools" in unloaded


GOOD_V2 = """
    from agenthost import tool
    __version__ = "1.2"

    @tool
    def add(a: int, b: int, c: int) -> int:
        "Add three integers."
        return a + b + c

    @tool
    def sub(a: int, b: int) -> int:
        "Subtract."
        return a - b
    """


SECURE = """
    from agenthost import tool

    @tool(permissions={"http.get"})
    def fetch(url: str) -> str:
        "Fetch."
        return "got " + url
    """


def test_call_prints_the_result_as_json_and_exits_0(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(plugin_dir / "math_tools.py", GOOD)
    code, out = run(capsys, "call", str(plugin_dir), "add", '{"a": 2, "b": 3}')
    result = json.loads(out)
    assert (code, result["success"], result["output"], result["data"], result["plugin"]) == (
        0,
        True,
        "5",
        5,
        "math_tools",
    )


def test_call_exits_1_when_the_call_fails(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(plugin_dir / "math_tools.py", GOOD)
    code, out = run(capsys, "call", str(plugin_dir), "add", '{"a": "two"}')
    assert code == 1
    assert json.loads(out)["error"]["code"] == "invalid_arguments"
    code, out = run(capsys, "call", str(plugin_dir), "subtract", "{}")
    assert (code, json.loads(out)["error"]["code"]) == (1, "unknown_tool")


def test_call_with_session_and_grants(plugin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(plugin_dir / "secure.py", SECURE)
    code, out = run(capsys, "call", str(plugin_dir), "fetch", '{"url": "x"}', "--session", "s1")
    assert (code, json.loads(out)["error"]["code"]) == (1, "permission_denied")
    code, out = run(
        capsys,
        "call",
        str(plugin_dir),
        "fetch",
        '{"url": "x"}',
        "--session",
        "s1",
        "--grant",
        "http.get",
    )
    assert (code, json.loads(out)["output"]) == (0, "got x")


def test_call_usage_errors_exit_2(
    plugin_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run(capsys, "call", str(plugin_dir), "add", "{}", "extra")[0] == 2
    assert run(capsys, "call", str(tmp_path / "missing"), "add", "{}")[0] == 2
    with pytest.raises(SystemExit) as exited:
        main(["call"])
    assert exited.value.code == 2
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "plugins" / "math_tools.py", GOOD)
    code, out = run(capsys, "call", "add", '{"a": 1, "b": 1}')  # DIR defaults to ./plugins
    assert (code, json.loads(out)["output"]) == (0, "2")


@pytest.mark.parametrize("command", ["list", "schema", "watch", "serve"])
def test_a_missing_directory_is_an_error_not_an_empty_success(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "plugnis"
    assert main([command, str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"no directory {missing}" in err
    assert f"mkdir {missing}" in err
    afile = write(tmp_path / "plugins.py", "x = 1\n")
    assert main([command, str(afile)]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_call_refuses_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["call", str(tmp_path / "nowhere"), "add", "{}"]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_watch_create_makes_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "plugins"
    process = subprocess.Popen(
        [sys.executable, "-m", "agenthost", "watch", str(directory), "--create"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if line.startswith("watching"):
                break
        assert f"created {directory}\n" in lines
        assert directory.is_dir()
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=20)
        if process.stderr is not None:
            process.stderr.close()
    assert code == 0


def test_verbose_works_after_the_command_name(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", str(plugin_dir), "-v"]) == 0
    after = capsys.readouterr().err
    assert "DEBUG" in after
    assert main(["-v", "list", str(plugin_dir)]) == 0
    assert "DEBUG" in capsys.readouterr().err
    assert main(["list", str(plugin_dir)]) == 0
    assert "DEBUG" not in capsys.readouterr().err


def test_a_closed_pipe_exits_quietly(plugin_dir: Path) -> None:
    write(plugin_dir / "math_tools.py", GOOD)
    # The reader has left before the first byte is written, as `| head` does on a long output.
    reader = subprocess.Popen(["true"], stdin=subprocess.PIPE)
    reader.wait(timeout=10)
    writer = subprocess.run(
        [sys.executable, "-m", "agenthost", "schema", str(plugin_dir), "--format", "anthropic"],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=60,
        check=False,
    )
    assert reader.stdin is not None
    reader.stdin.close()
    assert writer.stderr == b""
    assert writer.returncode == 0


def test_the_package_is_typed_for_plugin_authors(tmp_path: Path) -> None:
    """py.typed ships, so mypy checks calls to @tool functions instead of skipping agenthost."""
    import importlib.resources

    assert importlib.resources.files("agenthost").joinpath("py.typed").is_file()
    source = write(
        tmp_path / "typed_plugin.py",
        """
        from agenthost import tool


        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add.\"\"\"
            return a + b


        total: int = add(1, 2)
        wrong: str = add(1, 2)
        """,
    )
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert "typed_plugin.py:11: error: Incompatible types in assignment" in checked.stdout
    assert "import-untyped" not in checked.stdout
    assert "untyped-decorator" not in checked.stdout
    assert "Found 1 error" in checked.stdout


def test_dev_tools_are_pinned_and_installed_as_pinned() -> None:
    """`make test` installs with the constraints file, so lint and type checks do not drift."""
    import importlib.metadata

    root = Path(__file__).parent.parent
    assert "-c constraints-dev.txt" in (root / "Makefile").read_text()
    pins = dict(
        line.split("==")
        for line in (root / "constraints-dev.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert {"ruff", "mypy", "pytest", "hypothesis"} <= set(pins)
    for name, version in pins.items():
        assert importlib.metadata.version(name) == version, name


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_words_are_coloured_on_a_terminal_only(
    plugin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenthost import PluginEvent
    from agenthost._cli.events import text_event

    event = PluginEvent("failed", "math_tools", str(plugin_dir / "m.py"), message="boom")
    terminal = _Terminal()
    monkeypatch.delenv("NO_COLOR", raising=False)
    text_event(event, terminal)
    assert "\033[31mfailed  \033[0m math_tools" in terminal.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = _Terminal()
    text_event(event, plain)
    assert "\033[" not in plain.getvalue()
    assert "failed   math_tools" in plain.getvalue()


def test_a_conflict_loser_is_told_how_to_fix_it(plugin_dir: Path) -> None:
    from agenthost import PluginEvent
    from agenthost._cli.events import text_event

    out = io.StringIO()
    message = "tool 'search' is owned by plugin 'alpha' (plugins/alpha.py)"
    text_event(PluginEvent("conflict", "beta", str(plugin_dir / "beta.py"), message=message), out)
    assert (
        out.getvalue().rstrip().endswith(f"{message}; give yours another name with @tool(name=...)")
    )


def test_the_start_up_summary_counts_failures(plugin_dir: Path) -> None:
    from agenthost import PluginHost
    from agenthost._cli.events import summary

    write(plugin_dir / "math_tools.py", GOOD)
    write(plugin_dir / "broken.py", "raise RuntimeError('no')\n")
    with PluginHost(plugin_dir, installed=False) as host:
        assert summary(host) == "ready: 2 plugins, 1 tool, 1 failed (broken)"


def test_schema_strict_without_a_strict_mode_says_so(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", str(plugin_dir), "--format", "gemini", "--strict"]) == 2
    assert "--format gemini has no strict mode" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["schema", "--help"])
    assert "(default: openai)" in capsys.readouterr().out


CHUNKS = """
    from agenthost import tool

    @tool
    def count(n: int):
        "Count, one line per number."
        for i in range(n):
            yield f"{i}\\n"
    """


def test_call_reads_arguments_from_stdin(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(plugin_dir / "math_tools.py", GOOD)
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"a": 2, "b": 3}'))
    assert main(["call", str(plugin_dir), "add", "-", "--output", "text"]) == 0
    assert capsys.readouterr().out == "5\n"


def test_call_output_json_or_text(plugin_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(plugin_dir / "math_tools.py", GOOD)
    assert main(["call", str(plugin_dir), "add", '{"a": 2, "b": 3}']) == 0  # piped: json
    assert json.loads(capsys.readouterr().out)["data"] == 5
    assert main(["call", str(plugin_dir), "add", '{"a": 2}', "--output", "text"]) == 1
    assert capsys.readouterr().out.startswith("Error (invalid_arguments):")


def test_call_stream_prints_chunks_as_they_come(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(plugin_dir / "counting.py", CHUNKS)
    assert main(["call", str(plugin_dir), "count", '{"n": 3}', "--stream", "--output", "text"]) == 0
    assert capsys.readouterr().out == "0\n1\n2\n"
    assert main(["call", str(plugin_dir), "count", '{"n": 2}', "--stream", "--output", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.endswith("0\n1\n")
    assert json.loads(captured.out)["output"] == "0\n1\n"


def test_a_denied_call_from_the_cli_names_the_grant(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(plugin_dir / "secure.py", SECURE)
    assert main(["call", str(plugin_dir), "fetch", '{"url": "x"}']) == 1
    assert "run again with --grant http.get" in capsys.readouterr().err


def test_check_passes_the_project_samples_together(capsys: pytest.CaptureFixture[str]) -> None:
    samples = sorted(str(p) for p in (Path(__file__).parent.parent / "sample_plugins").glob("*.py"))
    assert len(samples) >= 4
    assert main(["check", *samples]) == 0
    out = capsys.readouterr().out
    assert out.count("\nOK\n") + out.startswith("OK\n") == len(samples)


DICT_TOOL = """
    from agenthost import tool

    @tool
    def tag(labels: dict[str, str]) -> str:
        "Tag with free-form labels."
        return ",".join(labels)
    """


def test_one_providers_refusal_warns_unless_that_provider_is_asked_for(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(plugin_dir / "tags.py", DICT_TOOL)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning: [gemini] tool 'tag'" in out
    assert "(only gemini refuses it; --provider gemini makes this fail)" in out
    assert main(["check", str(path), "--provider", "gemini"]) == 1
    assert "error: [gemini] tool 'tag'" in capsys.readouterr().out
    assert main(["check", str(path), "--provider", "anthropic"]) == 0
    assert "gemini" not in capsys.readouterr().out


def test_the_newcomer_path_shows_every_change_on_the_watch_screen(
    plugin_dir: Path, tmp_path: Path
) -> None:
    """Write a plugin, break it, fix it, split it into a package, drop a wheel: each step is
    a line on screen that says what happened and what is serving now."""
    env = {**os.environ, "AGENTHOST_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1",
           "AGENTHOST_DEBOUNCE_MS": "20"}  # fmt: skip
    process = Process(str(plugin_dir), env=env)
    try:
        path = write(plugin_dir / "geo.py", GEO)
        assert "geo: 1 tool (distance)" in process.expect("loaded", "geo")
        replace_atomically(path, GEO.replace("return 1.0", "return 1.0 +"))
        failed = process.expect("failed", "geo")
        assert f"{path}:" in failed
        assert "the previous version keeps serving" in failed
        replace_atomically(path, GEO + AREA)
        assert "+area" in process.expect("reloaded", "geo")
        package = tmp_path / "geo"  # split into a package, then moved into place at once
        write(
            package / "__init__.py", "from geo.shapes import area\nfrom geo.core import distance\n"
        )
        write(package / "core.py", GEO)
        write(package / "shapes.py", "from agenthost import tool\n" + AREA)
        path.unlink()
        package.rename(plugin_dir / "geo")
        split = process.expect("geo", "area", "distance")
        assert "loaded" in split
        assert "failed" not in split
        (plugin_dir / "units-0.1-py3-none-any.whl").write_bytes(
            wheel_bytes("units", "0.1", {"units.py": UNITS})
        )
        assert "units 0.1: 1 tool (to_metres)" in process.expect("loaded", "units")
    finally:
        process.close()


GEO = """from agenthost import tool


@tool
def distance(a: str, b: str) -> float:
    '''Distance between two cities in km.'''
    return 1.0
"""
AREA = """

@tool
def area(city: str) -> float:
    '''Area of a city in square km.'''
    return 2.0
"""
UNITS = """from agenthost import tool


@tool
def to_metres(feet: float) -> float:
    '''Feet to metres.'''
    return feet * 0.3048
"""


SCREEN_TRICKS = "\x1b[2J\x1b[H\u202eevil\u200b\r"  # clear, home, reverse, hide, rewind


def test_plugin_text_reaches_the_terminal_inert(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTHOST_CACHE_DIR", str(plugin_dir.parent / "cache"))
    trick = repr(SCREEN_TRICKS)
    write(plugin_dir / "loud.py", f"raise RuntimeError({trick} + 'no config')\n")
    write(plugin_dir / "isolated.py", f"""
        __agenthost_isolation__ = "process"
        __version__ = "1.0\\nready: 9 plugins" + {trick}
        from agenthost import tool

        @tool
        def shout() -> str:
            "Shout."
            return {trick}
        """)  # fmt: skip
    assert main(["list", str(plugin_dir)]) == 0
    assert main(["call", str(plugin_dir), "shout", "--output", "text"]) == 0
    out, err = capsys.readouterr()
    for text in (out, err):
        assert not {"\x1b", "\u202e", "\u200b", "\r"} & set(text)
    assert "\\x1b[2J\\x1b[H\\u202eevil\\u200b\\rno config" in out
    assert "1.0\\nready: 9 plugins\\x1b[2J" in out  # a worker's one-line field stays one line
