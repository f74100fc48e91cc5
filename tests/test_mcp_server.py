"""`agenthost serve` over stdio, driven by the official MCP client only (no hand-written JSON-RPC)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import mcp.client.session
import pytest
from helpers import replace_atomically, write
from mcp import Client
from mcp_clients import (
    CALC,
    LIVENESS,
    MODERN,
    SHOUT,
    Changes,
    command,
    connect,
    environment,
    eventually,
    names,
    stdio,
    text,
)

from agenthost._cli.main import main


def _plugins(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    write(directory / "calc.py", CALC)
    return directory


LISTED = ["add", "count", "explode", "nap"]  # not vault (not granted), not handoff (in-process)


async def _contract(client: Client) -> None:
    listing = await client.list_tools()
    assert [tool.name for tool in listing.tools] == LISTED
    add = listing.tools[0]
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]
    ok = await client.call_tool("add", {"a": 2, "b": 3})
    assert not ok.is_error
    assert ok.structured_content == {"result": 5}
    assert add.output_schema is not None
    jsonschema.validate(ok.structured_content, add.output_schema)
    assert text(ok) == '{"result":5}'

    bad = await client.call_tool("add", {"a": "two"})
    assert bad.is_error
    assert "invalid_arguments" in text(bad)
    assert "$.a" in text(bad)
    unknown = await client.call_tool("nope", {})
    assert unknown.is_error
    assert "unknown_tool" in text(unknown)
    # a tool this caller may not see answers as one that does not exist, with no hint of it
    denied = await client.call_tool("vault", {})
    assert denied.is_error
    assert text(denied) == "Error (unknown_tool): unknown tool 'vault'"
    hidden = await client.call_tool("handoff", {"to": "x"})
    assert text(hidden) == "Error (unknown_tool): unknown tool 'handoff'"
    near = await client.call_tool("vaults", {})  # a near name: only the caller's own tools
    assert text(near) == "Error (unknown_tool): unknown tool 'vaults'"
    assert "did you mean 'add'?" in text(await client.call_tool("ad", {}))
    slow = await client.call_tool("nap", {"seconds": 5})
    assert slow.is_error
    assert "timeout" in text(slow)
    broken = await client.call_tool("explode", {})
    assert broken.is_error
    assert "kaboom" in text(broken)
    assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


async def _follow_edits(client: Client, directory: Path, changes: Changes) -> None:
    replace_atomically(directory / "shout.py", SHOUT.format(n=1, suffix="!"))
    await changes.next()
    assert await names(client) == sorted([*LISTED, "shout"])
    first = await client.call_tool("shout", {"text": "hi"})
    assert first.structured_content == {"result": "HI!"}

    changes.forget()
    replace_atomically(directory / "shout.py", SHOUT.format(n=2, suffix="?"))
    await changes.next()

    async def new_version() -> bool:
        result = await client.call_tool("shout", {"text": "hi"})
        return result.structured_content == {"result": "HI?"}

    await eventually(new_version, "the edited tool answers")

    changes.forget()
    (directory / "shout.py").unlink()
    await changes.next()

    async def gone() -> bool:
        return await names(client) == LISTED

    await eventually(gone, "the deleted tool is gone")


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", MODERN])
def test_every_client_generation_follows_every_edit(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if version != MODERN:  # the session-based client proposes the newest handshake version
        monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", version)
    directory = _plugins(tmp_path)

    async def scenario() -> None:
        mode = MODERN if version == MODERN else "legacy"
        async with connect(stdio(directory), mode) as (client, changes):
            assert client.protocol_version == version
            await _contract(client)
            await _follow_edits(client, directory, changes)

    asyncio.run(scenario())


def test_the_handshake_advertises_list_changed(tmp_path: Path) -> None:
    directory = _plugins(tmp_path)

    async def scenario() -> None:
        async with connect(stdio(directory), "legacy") as (client, _):
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True
        async with connect(stdio(directory), "auto") as (client, _):  # discovers 2026-07-28
            assert client.protocol_version == MODERN
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True

    asyncio.run(scenario())


@pytest.mark.parametrize("mode", ["legacy", MODERN])
def test_a_streaming_tool_sends_its_chunks_as_progress(tmp_path: Path, mode: str) -> None:
    directory = _plugins(tmp_path)

    async def scenario() -> None:
        async with connect(stdio(directory), mode) as (client, _):
            chunks: list[tuple[float, str | None]] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                chunks.append((progress, message))

            result = await client.call_tool("count", {"n": 3}, progress_callback=on_progress)
            assert text(result) == "0;1;2;"
            assert chunks == [(1, "0;"), (2, "1;"), (3, "2;")]
            plain = await client.call_tool("count", {"n": 2})  # no progress asked: one result
            assert text(plain) == "0;1;"

    asyncio.run(scenario())


def test_a_grant_shows_and_allows_the_tool(tmp_path: Path) -> None:
    directory = _plugins(tmp_path)

    async def scenario() -> None:
        async with connect(stdio(directory, "--grant", "secret.read"), "legacy") as (client, _):
            assert await names(client) == sorted([*LISTED, "vault"])
            opened = await client.call_tool("vault", {})
            assert not opened.is_error
            assert opened.structured_content == {"result": "opened"}

    asyncio.run(scenario())


def test_the_server_exits_0_when_stdin_closes(tmp_path: Path) -> None:
    directory = _plugins(tmp_path)
    # stdin is closed at once: the server must start, see end of input and exit cleanly
    finished = subprocess.run(
        command(directory),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=environment(),
        timeout=LIVENESS * 3,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr.decode()
    assert finished.stdout == b""  # the plugin's print went to stderr
    assert b"must not corrupt stdio" in finished.stderr
    assert b"nor raw bytes written to fd 1" in finished.stderr
    assert b"loaded   calc" in finished.stderr  # the watch event lines, on stderr


def test_serve_refuses_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(tmp_path / "nowhere")]) == 2
    assert "no directory" in capsys.readouterr().err


def test_without_the_mcp_sdk_serve_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "agenthost._serve.server", None)
    assert main(["serve", str(tmp_path)]) == 2
    checkout = Path(__file__).resolve().parent.parent
    assert capsys.readouterr().err == (
        f"agenthost serve needs the MCP SDK: {sys.executable} -m pip install -e '{checkout}[mcp]'\n"
    )


def test_help_ends_with_client_configurations(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    for needle in ("claude mcp add", '"mcpServers"', ".vscode/mcp.json", "Cursor", "--tokens"):
        assert needle in shown
    # a client starts the server without an activated venv: the snippets name the real
    # executable, which runs as they say
    start = shown.index('{"mcpServers": {"tools": {"command"')
    end = shown.index("}}}", start) + 3
    config = json.loads(shown[start:end])["mcpServers"]["tools"]
    assert Path(config["command"]).is_absolute()
    ran = subprocess.run([config["command"], *config["args"][:1], "--help"],
                         capture_output=True, text=True, timeout=LIVENESS)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "claude mcp add" in ran.stdout
    assert f"claude mcp add tools -- {config['command']} serve " in shown
