"""The benchmarks still run: each once in smoke mode, as `python -m benchmarks --smoke NAME`.

The packages only the ``bench`` extra installs are hidden from the run, as in a
checkout set up for ``make test``, so a smoke run must leave those peers out,
say so, and still produce agenthost's own figures. No figure is compared with
anything: a smoke run takes a few iterations, and its times mean nothing.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from services import need_services

from agenthost._directory.wheel import open_wheel

ROOT = Path(__file__).parent.parent
BENCH_ONLY = ("psutil", "fastmcp", "langchain_core", "agents", "pydantic_ai")  # not in dev
# `python -m benchmarks ARGS`, where importing a hidden package fails as if it were missing
RUN = (
    "import runpy, sys; sys.modules.update(dict.fromkeys({hidden!r}));"
    " runpy.run_module('benchmarks', run_name='__main__', alter_sys=True)"
)
FIGURE = r"\s+(?P<figure>\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?) ?(?:ns|µs|ms|s|calls/s)\b"
NOT_INSTALLED = r"\s+n/a \(not installed\)"

# Per benchmark: the lines of agenthost's own that must carry a figure above zero,
# and what it must say it left out (the peers hidden from it, or started only in
# real runs).
OWN = {
    "cluster": (
        [r"1 replica direct, session-based", r"nginx -> 2 replicas, 2026-07-28",
         r"session-based, through B, relayed to A", r"client of B \(other replica\), session-based"],
        [],
    ),
    "execute": (
        [r"agenthost execute, inline \(sync, no timeout\)", r"agenthost aexecute, worker \(sync tool\)",
         r"\+ OpenTelemetryInterceptor \(SDK, no exporter\)", r"   worker:"],
        [rf"LangChain StructuredTool, sync tool{NOT_INSTALLED}"],
    ),
    "isolation": (
        [r"process, sandboxed, with a timeout", r"worker process gone \(beyond the limit\)",
         r"from the pool, no sandbox: load plugin \+ first call", r"   process, sandboxed:"],
        [],
    ),
    "mcp": (
        [r"agenthost", r"agenthost serve, stdio, session-based client", r"agenthost, 10 files",
         r"  of which agenthost's own handler, 10 files"],
        [r"FastMCP is not installed", r"MCP SDK MCPServer: left out of a smoke run"],
    ),
    "reload": (
        [r"module: os\.replace -> new version live", r"wheel: os\.replace -> new version live",
         r"atomic rename: first to last event"],
        [],
    ),
    "scale": (
        [r"schemas\('openai'\) warm, 200 tools", r"tools\(\) warm, 200 tools",
         r"   agenthost host\.register: register [\d.]+ s, schemas\('mcp'\) warm"],
        [r"   LangChain StructuredTool: n/a \(not installed\)"],
    ),
    "schema": (
        [r"agenthost ToolDefinition\.from_function", r"openai strict: uncached"],
        [rf"pydantic-ai Tool\(fn\){NOT_INSTALLED}"],
    ),
    "validation": (
        [r"agenthost definition\.validate\(json\)"],
        [rf"LangChain json\.loads \+ StructuredTool\._parse_input{NOT_INSTALLED}"],
    ),
}  # fmt: skip


def smoke(name: str) -> str:
    """Run one benchmark's smoke mode the way a user does, without the bench extra; its output."""
    done = subprocess.run(
        [sys.executable, "-c", RUN.format(hidden=BENCH_ONLY), "--smoke", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"# smoke run of {name}: done" in done.stdout, output
    return done.stdout


def test_every_benchmark_is_smoke_tested() -> None:
    assert sorted(OWN) == sorted(p.stem[6:] for p in (ROOT / "benchmarks").glob("bench_*.py"))


@pytest.mark.parametrize("name", sorted(OWN))
def test_a_smoke_run_completes_with_figures(name: str) -> None:
    if name == "cluster":
        need_services()  # real redis-server and nginx: skipped locally without them, fails in CI
    output = smoke(name)
    own, left_out = OWN[name]
    for label in own:
        found = re.search(f"^{label}{FIGURE}", output, re.MULTILINE)
        assert found, f"no figure for {label!r}:\n{output}"
        assert float(found["figure"].replace(",", "")) > 0, found.group()
    for said in left_out:
        assert re.search(f"^{said}", output, re.MULTILINE), f"{said!r} not said:\n{output}"
    for line in output.splitlines():  # a row either measured something or names a missing peer
        assert "n/a" not in line or "(not installed)" in line, line


def test_the_benchmark_wheels_are_built_as_pip_builds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks._wheels import build_wheel, wheel_name

    source = (
        "from agenthost import tool\n\n@tool\ndef probe() -> int:\n    'Probe.'\n    return 1\n"
    )
    data = build_wheel("probe-wheel", "1.0", {"probe_wheel.py": source})
    assert wheel_name("probe-wheel", "1.0") == "probe_wheel-1.0-py3-none-any.whl"
    info = "probe_wheel-1.0.dist-info"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        entries = archive.infolist()
        contents = {entry.filename: archive.read(entry) for entry in entries}
    assert [e.filename for e in entries] == [
        "probe_wheel.py", f"{info}/METADATA", f"{info}/WHEEL", f"{info}/RECORD"
    ]  # fmt: skip
    assert {(e.compress_type, e.external_attr >> 16) for e in entries} == {
        (zipfile.ZIP_DEFLATED, 0o100644)
    }
    assert b"Root-Is-Purelib: true\nTag: py3-none-any\n" in contents[f"{info}/WHEEL"]
    rows = list(csv.reader(contents[f"{info}/RECORD"].decode().splitlines()))
    assert rows[-1] == [f"{info}/RECORD", "", ""]
    for path, digest, size in rows[:-1]:
        expected = base64.urlsafe_b64encode(hashlib.sha256(contents[path]).digest()).rstrip(b"=")
        assert (digest, size) == (f"sha256={expected.decode()}", str(len(contents[path])))
    assert len(rows) == len(entries)
    wheel = open_wheel(data, tmp_path)  # the host's own checks
    assert (wheel.version, wheel.modules) == ("1.0", ["probe_wheel"])


def test_help_says_how_to_run_them_and_a_wrong_name_is_refused() -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip

    helped = run("--help")
    assert (helped.returncode, helped.stdout.split(";")[0]) == (
        0,
        "usage: python -m benchmarks [--smoke] [NAME ...]",
    )
    refused = run("nope")
    assert refused.returncode == 2
    assert refused.stderr.startswith("unknown benchmark(s): nope\nusage:")
