"""What MCP callers get back: every result shape, every failure, hostile arguments, shutdown.

The official client connects to the server in-process here; the transports are
covered by test_mcp_server.py (stdio) and test_mcp_http.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import write
from mcp import Client
from mcp_clients import MODERN, eventually, text

from agenthost import PluginHost
from agenthost._serve.server import SESSION, McpServer

ODD = '''
import math
from typing import Optional

from pydantic import BaseModel

from agenthost import tool


class Point(BaseModel):
    x: int
    y: int


@tool
def liar() -> int:
    """Says int, returns text."""
    return "abc"


@tool
def truthy() -> int:
    """Says int, returns a bool (JSON true is not an integer)."""
    return True


@tool
def whole() -> float:
    """Says float, returns an int: a JSON number either way."""
    return 2


@tool
def infinite() -> float:
    """Returns inf, which JSON cannot carry."""
    return math.inf


@tool
def raw() -> bytes:
    """Binary."""
    return b"\\x00\\xff"


@tool
def big() -> dict[str, int]:
    """More than max_output."""
    return {f"k{i}": i for i in range(5000)}


@tool
def long_text() -> str:
    """A long string: cut, still a string."""
    return "x" * 5000


@tool
def nothing() -> None:
    """Returns None."""


@tool
def maybe() -> Optional[int]:
    """None, typed as Optional."""
    return None


@tool
def point() -> Point:
    """A model."""
    return Point(x=1, y=2)


@tool
def items() -> list[int]:
    """A list."""
    return [1, 2]


@tool
def untyped():
    """No annotation: text only."""
    return {"a": 1}


@tool
def echo(value: dict) -> dict:
    """Returns what it got."""
    return value


@tool
def exits() -> str:
    """Raises SystemExit."""
    raise SystemExit(3)


@tool
def interrupts() -> str:
    """Raises KeyboardInterrupt."""
    raise KeyboardInterrupt


@tool
def unprintable() -> str:
    """Raises an exception whose str() raises."""

    class Nasty(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    raise Nasty()


@tool
def waits(until: str) -> str:
    """Blocks until the file ``until`` exists (30 s at most)."""
    import pathlib
    import time

    deadline = time.monotonic() + 30
    while not pathlib.Path(until).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return "released"


@tool(permissions={"fs.write"})
def writes() -> str:
    """Needs fs.write."""
    return "written"
'''


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    write(tmp_path / "plugins" / "odd.py", ODD)
    return tmp_path / "plugins"


@asynccontextmanager
async def served(
    directory: Path, mode: str = "legacy", **options: Any
) -> AsyncIterator[tuple[Client, McpServer]]:
    server = McpServer(PluginHost(directory, max_output=2000), **options)
    async with server.running(), Client(server.server, mode=mode) as client:
        yield client, server


@pytest.mark.parametrize("mode", ["legacy", MODERN])
def test_structured_results_match_their_output_schema(directory: Path, mode: str) -> None:
    async def scenario() -> None:
        async with served(directory, mode) as (client, _):
            schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            expected = {
                "items": {"result": [1, 2]},
                "maybe": {"result": None},
                "point": {"x": 1, "y": 2},
                "raw": {"result": "AP8="},  # base64, as the schema's binary string
                "whole": {"result": 2},
                "echo": {"nested": [1, {"a": None}]},
            }
            for name, structured in expected.items():
                arguments = {"value": structured} if name == "echo" else {}
                result = await client.call_tool(name, arguments)
                assert not result.is_error, text(result)
                assert result.structured_content == structured
                assert json.loads(text(result)) == structured
                jsonschema.validate(structured, schemas[name])
            cut = await client.call_tool("long_text", {})
            assert isinstance(cut.structured_content, dict)
            assert cut.structured_content["result"].startswith("x" * 2000)
            assert "[truncated" in cut.structured_content["result"]
            for name, shown in (("untyped", '{"a":1}'), ("nothing", "")):
                assert schemas[name] is None
                result = await client.call_tool(name, {})
                assert result.structured_content is None
                assert text(result) == shown

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("liar", "returned 'abc', which does not match its output schema"),
        ("infinite", "returned 'inf'"),
        ("truthy", "returned 'true'"),
        ("big", "more than the host's max_output"),
        ("exits", "SystemExit"),
        ("interrupts", "KeyboardInterrupt"),
        ("unprintable", "Nasty"),
    ],
)
def test_a_tool_that_breaks_its_contract_is_an_error_result(
    directory: Path, name: str, message: str
) -> None:
    async def scenario() -> None:
        async with served(directory) as (client, _):
            result = await client.call_tool(name, {})
            assert result.is_error
            assert message in text(result)
            assert (await client.call_tool("items", {})).structured_content == {"result": [1, 2]}

    asyncio.run(scenario())


def test_hostile_arguments_are_error_results(directory: Path) -> None:
    deep: Any = 0
    for _ in range(230):  # past the host's 200 levels, within what the client can send
        deep = {"a": deep}

    async def scenario() -> None:
        async with served(directory) as (client, _):
            nested = await client.call_tool("echo", {"value": deep})
            assert nested.is_error
            assert "invalid_arguments" in text(nested)
            assert "200 levels deep" in text(nested)
            huge = await client.call_tool("echo", {"value": {"s": "y" * 3_000_000}})
            assert huge.is_error  # the output is over max_output, and structured
            assert "max_output" in text(huge)
            for arguments in ({"value": 1}, {"value": {}, "extra": 1}, {}):
                bad = await client.call_tool("echo", arguments)
                assert bad.is_error
                assert "invalid_arguments" in text(bad)
            none = await client.call_tool("items", None)
            assert none.structured_content == {"result": [1, 2]}

    asyncio.run(scenario())


def test_fifty_concurrent_calls_each_get_their_own_answer(directory: Path) -> None:
    async def scenario() -> None:
        async with served(directory) as (client, _):
            results = await asyncio.gather(
                *(client.call_tool("echo", {"value": {"i": i}}) for i in range(50))
            )
            assert [r.structured_content for r in results] == [{"i": i} for i in range(50)]

    asyncio.run(scenario())


def test_grants_decide_the_list_and_the_call(directory: Path) -> None:
    async def scenario() -> None:
        async with served(directory) as (client, server):
            before = [t.name for t in (await client.list_tools()).tools]
            assert "writes" not in before
            hidden = text(await client.call_tool("writes", {}))  # as if it did not exist
            assert hidden.startswith("Error (unknown_tool): unknown tool 'writes'")
            assert "writes'?" not in hidden  # close names are the caller's own tools
            server.host.permissions.grant(SESSION, "fs.write")  # no registry change needed
            after = [t.name for t in (await client.list_tools()).tools]
            assert after == sorted([*before, "writes"])
            assert (await client.call_tool("writes", {})).structured_content == {
                "result": "written"
            }

    asyncio.run(scenario())


def test_a_drain_answers_the_call_in_flight_and_refuses_new_ones(
    directory: Path, tmp_path: Path
) -> None:
    release = tmp_path / "release"

    async def scenario() -> None:
        async with served(directory) as (client, server):
            waiting = asyncio.ensure_future(client.call_tool("waits", {"until": str(release)}))

            async def arrived() -> bool:
                return bool(server._calls)

            await eventually(arrived, "the call reached the server")
            await server.drain(grace=0.1)
            cancelled = await waiting
            assert cancelled.is_error
            assert "shutting down" in text(cancelled)
            refused = await client.call_tool("items", {})
            assert refused.is_error
            assert "shutting down" in text(refused)
        release.touch()  # let the abandoned worker thread finish

    asyncio.run(scenario())


def test_a_change_reaches_every_session_once(directory: Path) -> None:
    async def scenario() -> None:
        server = McpServer(PluginHost(directory, watch=False))
        heard: list[list[str]] = [[], []]

        def handler(index: int) -> Callable[[Any], Awaitable[None]]:
            async def on_message(message: Any) -> None:
                heard[index].append(type(message).__name__)

            return on_message

        async with (
            server.running(),
            Client(server.server, mode="legacy", message_handler=handler(0)) as first,
            Client(server.server, mode="legacy", message_handler=handler(1)) as second,
        ):
            for client in (first, second):
                await client.list_tools()
            write(
                directory / "more.py",
                "from agenthost import tool\n\n@tool\ndef more() -> int:\n    return 1\n",
            )
            await asyncio.to_thread(server.host.rescan)

            async def both() -> bool:
                return all(heard)

            await eventually(both, "both sessions notified")
            await first.list_tools()  # a round trip: anything else queued has arrived
            await second.list_tools()
            assert heard == [["ToolListChangedNotification"]] * 2

    asyncio.run(scenario())


def test_notifications_skip_a_session_that_went_away(directory: Path) -> None:
    async def scenario() -> None:
        server = McpServer(PluginHost(directory, watch=False))
        heard: list[object] = []

        async def on_message(message: Any) -> None:
            heard.append(message)

        async def notified() -> bool:
            return bool(heard)

        async with server.running():
            async with Client(server.server, mode="legacy") as gone:
                await gone.list_tools()
            async with Client(server.server, mode="legacy", message_handler=on_message) as live:
                await live.list_tools()

                async def one_left() -> bool:
                    return server.sessions == 1

                await eventually(one_left, "the closed session forgotten")
                write(
                    directory / "more.py",
                    "from agenthost import tool\n\n@tool\ndef more() -> int:\n    return 1\n",
                )
                await asyncio.to_thread(server.host.rescan)
                await eventually(notified, "the live session notified")
                assert "more" in [t.name for t in (await live.list_tools()).tools]

    asyncio.run(scenario())
