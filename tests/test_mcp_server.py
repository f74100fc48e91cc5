"""`agenthost serve` over stdio, driven by the official MCP client only (no hand-written JSON-RPC)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import mcp.client.session
import mcp.types as types
import pytest
from helpers import replace_atomically, write
from mcp import Client, StdioServerParameters

from agenthost._cli import main

LIVENESS = 10.0  # seconds: generous bounds for a notification or a reload to arrive

CALC = '''
from agenthost import tool
print("a plugin printing at import must not corrupt stdio")

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    print("nor while running")
    return a + b

@tool(permissions={"secret.read"})
def vault() -> str:
    """Needs a grant."""
    return "opened"
'''

EXTRA = '''
from agenthost import tool

@tool
def shout(text: str) -> str:
    """Upper-case text, generation {n}."""
    return text.upper() + "{suffix}"
'''


def _params(directory: Path, *extra: str) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agenthost", "serve", str(directory), *extra],
        env=env,
    )


@asynccontextmanager
async def connected(
    directory: Path, mode: str, *extra: str
) -> AsyncIterator[tuple[Client, asyncio.Queue[Any]]]:
    """A client of a server subprocess, and a queue of the notifications it receives."""
    received: asyncio.Queue[Any] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | types.ToolListChangedNotification):
            await received.put(message)

    async with Client(_params(directory, *extra), mode=mode, message_handler=on_message) as client:
        yield client, received


async def _names(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


async def _eventually(check: Callable[[], Any]) -> None:
    deadline = asyncio.get_running_loop().time() + LIVENESS
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "not within the liveness bound"
        await asyncio.sleep(0.02)


def _plugins(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    write(directory / "calc.py", CALC)
    return directory


async def _contract(client: Client) -> None:
    listing = await client.list_tools()
    assert [tool.name for tool in listing.tools] == ["add"]  # vault is not granted: hidden
    add = listing.tools[0]
    ok = await client.call_tool("add", {"a": 2, "b": 3})
    assert not ok.is_error
    assert ok.structured_content == {"result": 5}
    jsonschema.validate(ok.structured_content, add.output_schema)
    assert isinstance(ok.content[0], types.TextContent)
    assert ok.content[0].text == '{"result":5}'
    bad = await client.call_tool("add", {"a": "two"})
    assert bad.is_error
    assert isinstance(bad.content[0], types.TextContent)
    assert "invalid_arguments" in bad.content[0].text
    assert "$.a" in bad.content[0].text
    unknown = await client.call_tool("nope", {})
    assert unknown.is_error
    denied = await client.call_tool("vault", {})
    assert denied.is_error


@pytest.mark.parametrize("handshake", ["2025-06-18", "2025-11-25"])
def test_a_session_based_client_follows_every_edit(
    tmp_path: Path, handshake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", handshake)
    directory = _plugins(tmp_path)

    async def scenario() -> None:
        async with connected(directory, "legacy") as (client, received):
            assert client.session is not None
            await _contract(client)
            replace_atomically(directory / "shout.py", EXTRA.format(n=1, suffix="!"))
            notice = await asyncio.wait_for(received.get(), LIVENESS)
            assert "list_changed" in repr(notice)
            assert await _names(client) == ["add", "shout"]
            first = await client.call_tool("shout", {"text": "hi"})
            assert first.structured_content == {"result": "HI!"}
            replace_atomically(directory / "shout.py", EXTRA.format(n=2, suffix="?"))

            async def new_version() -> bool:
                result = await client.call_tool("shout", {"text": "hi"})
                return result.structured_content == {"result": "HI?"}

            await _eventually(new_version)
            (directory / "shout.py").unlink()

            async def gone() -> bool:
                return await _names(client) == ["add"]

            await _eventually(gone)

    asyncio.run(scenario())


def test_a_2026_client_is_told_through_its_listen_stream(tmp_path: Path) -> None:
    directory = _plugins(tmp_path)

    async def scenario() -> None:
        async with connected(directory, "2026-07-28") as (client, _):
            await _contract(client)
            async with client.listen(tools_list_changed=True) as subscription:
                replace_atomically(directory / "shout.py", EXTRA.format(n=1, suffix="!"))
                events = aiter(subscription)
                event = await asyncio.wait_for(anext(events), LIVENESS)
                assert "ToolsListChanged" in type(event).__name__
            assert await _names(client) == ["add", "shout"]

    asyncio.run(scenario())


def test_a_grant_shows_and_allows_the_tool(tmp_path: Path) -> None:
    directory = _plugins(tmp_path)

    async def scenario() -> None:
        async with connected(directory, "legacy", "--grant", "secret.read") as (client, _):
            assert await _names(client) == ["add", "vault"]
            opened = await client.call_tool("vault", {})
            assert not opened.is_error
            assert opened.structured_content == {"result": "opened"}

    asyncio.run(scenario())


def test_the_server_exits_0_when_stdin_closes(tmp_path: Path) -> None:
    directory = _plugins(tmp_path)
    params = _params(directory)
    # stdin is closed at once: the server must start, see end of input and exit cleanly
    finished = subprocess.run(
        [params.command, *params.args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=params.env,
        timeout=30,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr.decode()
    assert finished.stdout == b""  # the plugin's print went to stderr
    assert b"must not corrupt stdio" in finished.stderr


def test_without_the_mcp_sdk_serve_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "agenthost._mcp", None)
    assert main(["serve", str(tmp_path)]) == 2
    assert "pip install 'agenthost[mcp]'" in capsys.readouterr().err
