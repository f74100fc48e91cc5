"""Helpers for the MCP server tests: run `agenthost serve`, connect the official client, follow changes.

Only the official `mcp` client speaks to the server; nothing here writes JSON-RPC.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged

LIVENESS = 10.0  # seconds: generous bounds for a notification, a reload or a start to happen
MODERN = "2026-07-28"

CALC = '''
import os
import time

from agenthost import tool

print("a plugin printing at import must not corrupt stdio")
os.write(1, b"nor raw bytes written to fd 1\\n")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    print("nor while running")
    return a + b


@tool(permissions={"secret.read"})
def vault() -> str:
    """Needs a grant."""
    return "opened"


@tool(definition_only=True)
def handoff(to: str) -> str:
    """For in-process clients only."""
    return to


@tool(timeout=0.2)
def nap(seconds: float) -> str:
    """Sleep, within 0.2 s."""
    time.sleep(seconds)
    return "rested"


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


@tool
def count(n: int):
    """One chunk per number."""
    for i in range(n):
        yield f"{i};"
'''

SHOUT = '''
from agenthost import tool


@tool
def shout(text: str) -> str:
    """Upper-case text, generation {n}."""
    return text.upper() + "{suffix}"
'''


def environment() -> dict[str, str]:
    """The test interpreter's environment, with its import path (agenthost may not be installed)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def command(directory: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "agenthost", "serve", str(directory), *extra]


def stdio(directory: Path, *extra: str) -> StdioServerParameters:
    args = command(directory, *extra)
    return StdioServerParameters(command=args[0], args=args[1:], env=environment())


@dataclass
class Served:
    """A running `agenthost serve --http` subprocess."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def http_server(directory: Path, *extra: str, address: str = "127.0.0.1:0") -> Iterator[Served]:
    """Start the server on a free port; always stop it."""
    log = directory.parent / f"serve-{time.monotonic_ns()}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command(directory, "--http", address, *extra),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=environment(),
        )
    try:
        deadline = time.monotonic() + LIVENESS * 2
        while not (found := re.search(r"serving MCP at (\S+)", log.read_text(errors="replace"))):
            assert process.poll() is None, f"the server exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the server did not start:\n{log.read_text()}"
            time.sleep(0.02)
        yield Served(found.group(1), process, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # Ctrl-C: no balancer's grace to wait out
            try:
                process.wait(timeout=LIVENESS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Changes:
    """The tool-list changes one client was told about, whichever way its protocol delivers them."""

    def __init__(self) -> None:
        self.seen: asyncio.Queue[object] = asyncio.Queue()

    async def next(self) -> None:
        await asyncio.wait_for(self.seen.get(), LIVENESS)

    def forget(self) -> None:
        while not self.seen.empty():
            self.seen.get_nowait()


@asynccontextmanager
async def connect(
    server: StdioServerParameters | str,
    mode: str,
    *,
    token: str | None = None,
    statuses: list[int] | None = None,
    sessions: list[str] | None = None,
    responses: list[httpx2.Response] | None = None,
) -> AsyncIterator[tuple[Client, Changes]]:
    """A connected client and the changes it hears of: notifications, or its listen stream.

    Over HTTP, ``token`` is sent as a bearer token and ``statuses`` collects the
    HTTP status of every response, ``sessions`` every session id the server named,
    ``responses`` every response.
    """
    changes = Changes()
    listening = asyncio.Event()

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)
        if responses is not None:
            responses.append(response)
        if sessions is not None and "mcp-session-id" in response.headers:
            sessions.append(response.headers["mcp-session-id"])
        if response.request.method == "GET" and response.status_code == 200:
            listening.set()  # a session's event stream: the server registers it before this

    async def on_message(message: Any) -> None:
        # at 2026-07-28 the client hands a listen stream's events to its handler too:
        # counted once, from the subscription
        if isinstance(message, types.ToolListChangedNotification) and mode != MODERN:
            await changes.seen.put(message)

    async with AsyncExitStack() as stack:
        target: Any = server
        if isinstance(server, str):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=headers,
                    timeout=httpx2.Timeout(30, read=300),  # event streams stay open
                    event_hooks={"response": [record]},
                )
            )
            target = streamable_http_client(server, http_client=http)
        client = await stack.enter_async_context(
            Client(target, mode=mode, message_handler=on_message)
        )
        if mode == "legacy" and isinstance(server, str):
            # a session-based client hears notifications on a stream it opens after its
            # handshake: a change made before it is open is not announced to it
            await asyncio.wait_for(listening.wait(), LIVENESS)
        if mode == MODERN:
            subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))

            async def follow() -> None:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        await changes.seen.put(event)

            task = asyncio.ensure_future(follow())
            stack.callback(task.cancel)
        yield client, changes


async def names(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


def text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def eventually(check: Any, what: str) -> None:
    """Await ``check()`` until it is truthy, within the liveness bound."""
    deadline = time.monotonic() + LIVENESS
    while not await check():
        assert time.monotonic() < deadline, f"not within {LIVENESS} s: {what}"
        await asyncio.sleep(0.02)


def probe(url: str, path: str, method: str = "GET") -> tuple[int, str]:
    """Status and body of a plain request, as a balancer sends it (no token, its own Host)."""
    parsed = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()
