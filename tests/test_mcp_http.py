"""`agenthost serve --http`: several clients of both protocol generations, tokens, shutdown, load.

The server runs as a subprocess on 127.0.0.1 and a free port; only the official client talks to it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import socket
import time
import urllib.parse
from pathlib import Path

import pytest
from helpers import replace_atomically, write
from mcp import Client
from mcp_clients import (
    CALC,
    LIVENESS,
    MODERN,
    SHOUT,
    Changes,
    Served,
    connect,
    eventually,
    http_server,
    names,
    probe,
    text,
)

from agenthost._cli.main import main

LISTED = ["add", "count", "explode", "nap"]
ALICE = "alice-0123456789abcdef"
BOB = "bob-0123456789abcdefgh"

LINGER = '''
import pathlib
import time

from agenthost import tool


@tool
def linger(seconds: float, mark: str) -> str:
    """Create the file ``mark``, then sleep as long as asked."""
    pathlib.Path(mark).touch()
    time.sleep(seconds)
    return "done"
'''


def _plugins(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    write(directory / "calc.py", CALC)
    return directory


def _tokens(tmp_path: Path, entries: object) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(entries))
    path.chmod(0o600)
    return path


async def _told(client: Client, changes: Changes, expected: list[str]) -> None:
    """Wait for change notifications until the list, fetched after one, is ``expected``."""
    deadline = time.monotonic() + LIVENESS
    while True:
        await changes.next()
        if await names(client) == expected:
            return
        assert time.monotonic() < deadline, f"never told of {expected}"


async def _until_listening(directory: Path, *clients: tuple[Client, Changes]) -> None:
    """Make throwaway edits until every client has heard of one, then undo them.

    A session-based HTTP client hears notifications on an event stream it opens
    after its handshake; a change made in between is not announced to it.
    """
    before = [await names(client) for client, _ in clients]
    deadline = time.monotonic() + LIVENESS
    attempt = 0
    while not all(not changes.seen.empty() for _, changes in clients):
        assert time.monotonic() < deadline, "the clients never heard of a change"
        attempt += 1
        warm = SHOUT.replace("shout", "warm").format(n=attempt, suffix="")
        replace_atomically(directory / "warmup.py", warm)
        step = time.monotonic() + 1.0
        while time.monotonic() < step and not all(not c.seen.empty() for _, c in clients):
            await asyncio.sleep(0.02)
    (directory / "warmup.py").unlink()
    for (client, changes), listed in zip(clients, before, strict=True):
        await _told(client, changes, listed)


@pytest.mark.parametrize(
    "modes",
    [("legacy", "legacy"), (MODERN, MODERN), ("legacy", MODERN)],
    ids=["two-session-based", "two-2026", "one-of-each"],
)
def test_two_clients_at_once_are_each_told_of_an_add_and_a_delete(
    tmp_path: Path, modes: tuple[str, str]
) -> None:
    directory = _plugins(tmp_path)

    async def scenario(url: str) -> None:
        async with connect(url, modes[0]) as first, connect(url, modes[1]) as second:
            clients = (first, second)
            for client, _ in clients:
                assert await names(client) == LISTED
                tools = client.server_capabilities.tools
                if client.protocol_version != MODERN:  # session-based: from the handshake
                    assert tools is not None
                    assert tools.list_changed is True
            await _until_listening(directory, *clients)

            replace_atomically(directory / "shout.py", SHOUT.format(n=1, suffix="!"))
            for client, changes in clients:
                await _told(client, changes, sorted([*LISTED, "shout"]))
                called = await client.call_tool("shout", {"text": "hi"})
                assert called.structured_content == {"result": "HI!"}

            (directory / "shout.py").unlink()
            for client, changes in clients:
                await _told(client, changes, LISTED)
                gone = await client.call_tool("shout", {"text": "hi"})
                assert gone.is_error
                assert "unknown_tool" in text(gone)

    with http_server(directory) as served:
        asyncio.run(scenario(served.url))


def test_a_2026_client_discovers_list_changed_over_http(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        async with connect(url, "auto") as (client, _):
            assert client.protocol_version == MODERN
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True

    with http_server(_plugins(tmp_path)) as served:
        asyncio.run(scenario(served.url))


LOCKED = '''
from agenthost import tool


@tool(permissions={{"secret.read"}})
def locked() -> str:
    """Needs a grant, generation {n}."""
    return "opened"
'''


@pytest.mark.parametrize("mode", ["legacy", MODERN])
def test_a_change_to_tools_a_caller_cannot_see_is_not_announced_to_it(
    tmp_path: Path, mode: str
) -> None:
    directory = _plugins(tmp_path)
    write(directory / "locked.py", LOCKED.format(n=0))
    tokens = _tokens(
        tmp_path,
        {ALICE: {"session": "alice", "grants": ["secret.read"]}, BOB: {"session": "bob"}},
    )

    async def scenario(url: str) -> None:
        async with (
            connect(url, mode, token=ALICE) as (_, alice),
            connect(url, mode, token=BOB) as (_, bob),
        ):
            replace_atomically(directory / "locked.py", LOCKED.format(n=1))
            await alice.next()  # alice may call it: she hears of it, bob (told with her) not
            assert bob.seen.empty()
            replace_atomically(directory / "shout.py", SHOUT.format(n=1, suffix=""))
            await bob.next()  # a change to his own list he hears of
            await alice.next()

    with http_server(directory, "--tokens", str(tokens)) as served:
        asyncio.run(scenario(served.url))


@pytest.mark.parametrize("mode", ["legacy", MODERN])
def test_tokens_decide_what_each_caller_sees_and_may_call(tmp_path: Path, mode: str) -> None:
    tokens = _tokens(
        tmp_path,
        {ALICE: {"session": "alice", "grants": ["secret.read"]}, BOB: {"session": "bob"}},
    )

    async def scenario(url: str) -> None:
        async with connect(url, mode, token=ALICE) as (alice, _):
            assert await names(alice) == sorted([*LISTED, "vault"])
            opened = await alice.call_tool("vault", {})
            assert opened.structured_content == {"result": "opened"}
            async with connect(url, mode, token=BOB) as (bob, _):
                assert await names(bob) == LISTED  # at once, on the same registry version
                refused = await bob.call_tool("vault", {})  # as if alice's tool did not exist
                assert text(refused) == "Error (unknown_tool): unknown tool 'vault'"
                guessed = await bob.call_tool("vaul", {})  # no hint of alice's tools
                assert text(guessed) == "Error (unknown_tool): unknown tool 'vaul'"
                chunks: list[str | None] = []

                async def on_progress(
                    done: float, total: float | None, message: str | None
                ) -> None:
                    chunks.append(message)

                counted = await bob.call_tool("count", {"n": 2}, progress_callback=on_progress)
                assert text(counted) == "0;1;"
                assert chunks == ["0;", "1;"]
        for token in (None, "not-a-known-token-at-all"):
            statuses: list[int] = []
            with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK wraps the HTTP error
                async with connect(url, mode, token=token, statuses=statuses):
                    pass
            assert statuses
            assert set(statuses) == {401}

    with http_server(_plugins(tmp_path), "--tokens", str(tokens)) as served:
        assert "2 tokens" in served.output()
        asyncio.run(scenario(served.url))
        # the operator still learns why, and how to let the caller in
        assert "MCP caller 'bob' called 'vault', which needs secret.read" in served.output()
        assert "add --grant secret.read" in served.output()


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0", "192.0.2.7:8000", "example.com:80"])
def test_a_non_loopback_bind_without_tokens_is_refused(
    tmp_path: Path, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(tmp_path), "--http", address]) == 2
    err = capsys.readouterr().err
    assert "without --tokens" in err
    assert "127.0.0.1" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON"),
        ("[]", "must be a JSON object of tokens"),
        ("{}", "must be a JSON object of tokens"),
        (json.dumps({"short": {"session": "a"}}), "at least 16"),
        (json.dumps({" " + ALICE: {"session": "a"}}), "surrounding spaces"),
        (json.dumps({ALICE: {"grants": []}}), "session: Field required"),
        (json.dumps({ALICE: {"session": "a", "grant": ["x"]}}), "grant: Extra inputs"),
        (json.dumps({ALICE: {"session": "a", "grants": [""]}}), "non-empty permission"),
        (json.dumps({ALICE: "alice"}), "entry for session (none)"),
        (f'{{"{ALICE}": {{"session": "a"}}, "{ALICE}": {{"session": "b"}}}}', "'alic...' twice"),
    ],
)
def test_a_bad_token_file_is_refused_with_the_fix(
    tmp_path: Path, content: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(content)
    assert main(["serve", str(tmp_path), "--http", "0", "--tokens", str(tokens)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert str(tokens) in err


def test_tokens_need_http_and_a_readable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = _tokens(tmp_path, {ALICE: {"session": "alice"}})
    assert main(["serve", str(tmp_path), "--tokens", str(tokens)]) == 2
    assert "--http" in capsys.readouterr().err
    missing = tmp_path / "missing.json"
    assert main(["serve", str(tmp_path), "--http", "0", "--tokens", str(missing)]) == 2
    assert "cannot read token file" in capsys.readouterr().err
    assert main(["serve", str(tmp_path), "--http", "localhost:99999"]) == 2
    assert "0 to 65535" in capsys.readouterr().err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_drains_the_calls_in_flight_and_exits_0(tmp_path: Path, signum: int) -> None:
    directory = _plugins(tmp_path)
    write(directory / "slow.py", LINGER)

    marks = [tmp_path / "long.started", tmp_path / "short.started"]

    async def scenario(served: Served) -> None:
        async with (
            connect(served.url, "legacy") as (old, _),
            connect(served.url, MODERN) as (new, _),
        ):
            await new.list_tools()  # the client checks a result against it: no list needed later
            long = old.call_tool("linger", {"seconds": 60, "mark": str(marks[0])})
            short = new.call_tool("linger", {"seconds": 1, "mark": str(marks[1])})
            calls = [asyncio.ensure_future(long), asyncio.ensure_future(short)]

            async def started() -> bool:
                return all(mark.exists() for mark in marks)

            await eventually(started, "both calls started")
            served.process.send_signal(signum)
            if signum == signal.SIGTERM:  # Ctrl-C skips the grace: nobody's balancer to tell
                # a balancer polling /readyz hears at once that this replica is going
                assert await asyncio.to_thread(probe, served.url, "/readyz") == (
                    503,
                    '{"status": "draining"}',
                )
            cancelled, finished = await asyncio.wait_for(asyncio.gather(*calls), LIVENESS)
            assert finished.structured_content == {"result": "done"}
            assert cancelled.is_error
            assert "shutting down" in text(cancelled)

    with http_server(directory) as served:
        asyncio.run(scenario(served))
        assert served.process.wait(timeout=LIVENESS) == 0, served.output()
        assert "stopped" in served.output()


def test_fifty_rewrites_under_load_fail_no_call(tmp_path: Path) -> None:
    directory = _plugins(tmp_path)
    write(directory / "shout.py", SHOUT.format(n=0, suffix="0"))
    answers: list[str] = []
    failures: list[str] = []

    async def scenario(url: str) -> None:
        async with (
            connect(url, "legacy") as (first, _),
            connect(url, "legacy") as (second, _),
            connect(url, MODERN) as (third, _),
            connect(url, MODERN) as (fourth, _),
        ):
            stop = asyncio.Event()

            async def keep_calling(client: Client) -> None:
                while not stop.is_set():
                    result = await client.call_tool("shout", {"text": "hi"})
                    if result.is_error:
                        failures.append(text(result))
                    else:
                        assert isinstance(result.structured_content, dict)
                        answers.append(result.structured_content["result"])

            callers = [
                asyncio.ensure_future(keep_calling(c)) for c in (first, second, third, fourth)
            ]
            for generation in range(1, 51):
                replace_atomically(
                    directory / "shout.py", SHOUT.format(n=generation, suffix=generation)
                )

                async def served(expected: str = f"HI{generation}") -> bool:
                    return expected in answers[-8:]

                await eventually(served, f"generation {generation} answers")
            stop.set()
            await asyncio.gather(*callers)

    with http_server(directory) as served:
        asyncio.run(scenario(served.url))
    assert failures == []
    assert len(answers) > 200
    assert {f"HI{n}" for n in range(1, 51)} <= set(answers)


def test_sessions_are_forgotten_when_their_clients_leave(tmp_path: Path) -> None:
    """In-process, to count the server's sessions; `stop` ends the server like a signal."""
    from agenthost import PluginHost
    from agenthost._serve.http import serve_http
    from agenthost._serve.server import McpServer

    server = McpServer(PluginHost(_plugins(tmp_path), watch=False))

    async def scenario() -> None:
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        serving = asyncio.ensure_future(
            serve_http(server, "127.0.0.1", 0, ready=ready.set_result, stop=stop)
        )
        url = await ready

        async def count(expected: int) -> None:
            async def reached() -> bool:
                return server.sessions == expected

            await eventually(reached, f"{expected} open sessions")

        for _ in range(3):
            async with connect(url, "legacy") as (client, _), connect(url, MODERN) as (new, _):
                await client.list_tools()
                await new.list_tools()
                await count(1)  # the 2026-07-28 client holds no session
            await count(0)
        stop.set()
        await asyncio.wait_for(serving, LIVENESS)

    asyncio.run(scenario())


# --- DNS rebinding: Host and Origin, whatever the bind address ---------------------------------

INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw", "version": "1"}},
})  # fmt: skip


def post(
    url: str, host: str | None = None, origin: str | None = None, token: str | None = None
) -> int:
    """The status a raw ``initialize`` gets, with these Host, Origin and bearer token."""
    parsed = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=10)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if origin is not None:
        headers["Origin"] = origin
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        connection.putrequest("POST", parsed.path, skip_host=True)
        connection.putheader("Host", host or parsed.netloc)
        for key, value in headers.items():
            connection.putheader(key, value)
        body = INITIALIZE.encode()
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize("address", ["127.0.0.2:0", "LOCALHOST:0"])
def test_a_foreign_host_or_origin_is_refused_on_any_loopback_spelling(
    tmp_path: Path, address: str
) -> None:
    with http_server(_plugins(tmp_path), address=address) as served:
        port = urllib.parse.urlsplit(served.url).port
        assert post(served.url) == 200
        assert post(served.url, host=f"evil.example:{port}") == 421  # a name rebound to us
        assert post(served.url, origin="http://evil.example") == 403  # a page elsewhere
        assert post(served.url, origin="null") == 403  # a sandboxed page
        assert post(served.url, origin=f"http://{served.url.split('/')[2]}") == 200


def test_tokens_do_not_lift_the_host_check_and_allow_flags_add_names(tmp_path: Path) -> None:
    tokens = _tokens(tmp_path, {ALICE: {"session": "alice"}})
    extra = ("--tokens", str(tokens), "--allow-host", "tools.example", "--allow-host",
             "lb.example:8080", "--allow-origin", "https://app.example")  # fmt: skip
    with http_server(_plugins(tmp_path), *extra) as served:
        port = urllib.parse.urlsplit(served.url).port
        assert post(served.url, host=f"evil.example:{port}", token=ALICE) == 421  # a token too
        assert post(served.url, host=f"tools.example:{port}", token=ALICE) == 200
        # a proxy in front, on its own port or the default one, passes the name clients use
        assert post(served.url, host="tools.example", token=ALICE) == 200
        assert post(served.url, host="lb.example:8080", token=ALICE) == 200
        assert post(served.url, host=f"lb.example:{port}", token=ALICE) == 421
        assert post(served.url, origin="https://app.example", token=ALICE) == 200
        assert post(served.url, origin="https://other.example", token=ALICE) == 403


def test_a_wildcard_bind_answers_this_machines_names_only(tmp_path: Path) -> None:
    tokens = _tokens(tmp_path, {ALICE: {"session": "alice"}})
    with http_server(_plugins(tmp_path), "--tokens", str(tokens), address="0.0.0.0:0") as served:
        port = urllib.parse.urlsplit(served.url).port
        for name in ("127.0.0.1", "localhost", socket.gethostname()):
            assert post(served.url, host=f"{name}:{port}", token=ALICE) == 200, name
        assert post(served.url, host=f"evil.example:{port}", token=ALICE) == 421
        assert post(served.url, host=f"127.0.0.1:{port + 1}", token=ALICE) == 421  # another port
