"""Many replicas behind a round-robin nginx, Redis as their bus: real processes only.

Every replica is an ``agenthost serve --http ... --redis URL`` subprocess; Redis and
nginx (running the shipped ``deploy/nginx.conf``) are started by ``services``. The
clients are the official MCP client of both protocol generations, over a fresh
connection per request where it matters, so nothing sticks to one replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
import redis
from helpers import replace_atomically, write
from mcp.shared.exceptions import MCPError
from mcp_clients import (
    LIVENESS,
    MODERN,
    SHOUT,
    Changes,
    command,
    connect,
    environment,
    names,
    probe,
    text,
)
from services import Nginx, RedisServer, free_port, need_services

T = TypeVar("T")
MODES = ["legacy", MODERN]
TOKENS = {f"token-{n:02d}-0123456789abcdef": {"session": f"caller{n}"} for n in range(12)}
TOKEN = list(TOKENS)

SLOW = '''
import time

from agenthost import tool


@tool
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"


@tool
def count(n: int):
    """One chunk per number, a little apart."""
    for i in range(n):
        time.sleep(0.05)
        yield f"{i};"
'''

RELAY = '''
import os
import time

from agenthost import tool


@tool
def relay(mark: str):
    """Yield once, wait for the client to have that chunk, yield again."""
    yield "first;"
    deadline = time.monotonic() + 10
    while not os.path.exists(mark) and time.monotonic() < deadline:
        time.sleep(0.01)
    yield "second;" if os.path.exists(mark) else "the first chunk never arrived;"
'''

EXTRA = '''
from agenthost import tool


@tool
def extra(text: str) -> str:
    """Only in some copies of the directory."""
    return text + "+"
'''


@dataclass
class Replica:
    """One ``agenthost serve --http ... --redis`` subprocess, restartable on its port."""

    directory: Path
    redis: str
    extra: Sequence[str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def launch(self) -> None:
        self.starts += 1
        self.log = self.directory.parent / f"replica-{self.port}-{self.starts}.log"
        args = ["--http", self.address, "--redis", self.redis, *self.extra]
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                command(self.directory, *args),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=environment(),
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""

    def ready(self) -> bool:
        assert self.process is not None
        assert self.process.poll() is None, f"replica exited:\n{self.output()}"
        return re.search(r"replica \w+ of cluster", self.output()) is not None

    @property
    def rid(self) -> str:
        found = re.search(r"replica (\w+) of cluster", self.output())
        assert found, self.output()
        return found.group(1)

    def stop(self, sig: int = signal.SIGINT) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=LIVENESS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()


def until(check: Callable[[], Any], what: str, timeout: float = LIVENESS) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)
    return value


@contextmanager
def cluster(
    tmp_path: Path,
    directories: Sequence[Path],
    *extra: str,
    nginx: bool = True,
    redis_server: RedisServer | None = None,
) -> Iterator[tuple[list[Replica], Nginx | None, RedisServer]]:
    """Redis, a replica per directory, and nginx in front of them; all stopped after."""
    need_services()
    with ExitStack() as stack:
        if redis_server is None:
            redis_server = stack.enter_context(RedisServer(tmp_path / "redis"))
        tokens = tmp_path / "tokens.json"
        tokens.write_text(json.dumps(TOKENS))
        tokens.chmod(0o600)
        replicas = [
            Replica(directory, redis_server.url, ["--tokens", str(tokens), *extra])
            for directory in directories
        ]
        balancer = Nginx([r.address for r in replicas], tmp_path / "nginx") if nginx else None
        allow = ["--allow-host", f"127.0.0.1:{balancer.port}"] if balancer else []
        for replica in replicas:
            replica.extra = [*replica.extra, *allow]
            stack.callback(replica.stop)
            replica.launch()
        for replica in replicas:
            until(replica.ready, "the replica serves")
        if balancer is not None:
            stack.enter_context(balancer)
        yield replicas, balancer, redis_server


def plugins(tmp_path: Path, name: str = "plugins") -> Path:
    directory = tmp_path / name
    write(directory / "shout.py", SHOUT.format(n=0, suffix=""))
    write(directory / "slow.py", SLOW)
    return directory


def run(scenario: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(scenario, 120))


async def heard_exactly(clients: Sequence[Changes], times: int) -> None:
    """Every client heard ``times`` changes (so far: the caller makes a barrier after)."""
    await asyncio.gather(*(asyncio.wait_for(_count(c, times), LIVENESS) for c in clients))


async def _count(changes: Changes, times: int) -> None:
    for _ in range(times):
        await changes.seen.get()


# --- any replica answers any request ------------------------------------------------------
def test_both_protocols_through_round_robin_nginx_never_fail_and_hear_each_change_once(
    tmp_path: Path,
) -> None:
    directory = plugins(tmp_path)
    with cluster(tmp_path, [directory] * 3) as (replicas, balancer, _):
        assert balancer is not None
        url = f"{balancer.url}/mcp"
        failures: list[str] = []

        async def client(n: int, mode: str, seen: list[httpx2.Response]) -> Changes:
            async with connect(url, mode, token=TOKEN[n], responses=seen) as (c, changes):
                assert "shout" in await names(c)
                for i in range(200):
                    result = await c.call_tool("shout", {"text": f"c{n} {i}"})
                    if result.is_error or result.structured_content != {"result": f"C{n} {i}"}:
                        failures.append(f"{mode} {n} {i}: {result}")
                return changes

        async def scenario() -> None:
            seen: list[list[httpx2.Response]] = [[] for _ in range(4)]
            await asyncio.gather(*(client(n, MODES[n % 2], seen[n]) for n in range(4)))
            assert failures == []
            # every message was answered (a session's event stream a client reopens may
            # meet a replica too busy to relay it at once: that is no failure)
            posts = [{r.status_code for r in s if r.request.method == "POST"} for s in seen]
            assert all(p == {200, 202} or p == {200} for p in posts), posts

        run(scenario())
        # a session opened on one replica was served by all: nginx spread its requests
        for replica in replicas:
            assert "Session not found" not in replica.output()

        async def hearing() -> None:
            async with (
                connect(url, "legacy", token=TOKEN[0]) as (first, one),
                connect(url, "legacy", token=TOKEN[1]) as (_, two),
                connect(url, "legacy", token=TOKEN[2]) as (_, three),
                connect(url, MODERN, token=TOKEN[3]) as (fourth, four),
                connect(url, MODERN, token=TOKEN[4]) as (_, five),
            ):
                everyone = [one, two, three, four, five]
                replace_atomically(directory / "shout.py", SHOUT.format(n=1, suffix="!"))
                await heard_exactly(everyone, 1)
                assert await shout(first, "a") == "A!"
                await _all_reloaded(replicas, "shout")
                # a barrier: the next change is heard once more, with nothing in between
                replace_atomically(directory / "shout.py", SHOUT.format(n=2, suffix="?"))
                await heard_exactly(everyone, 1)
                assert all(c.seen.empty() for c in everyone)
                assert await shout(fourth, "b") == "B?"

        run(hearing())


async def shout(client: Any, words: str) -> Any:
    result = await client.call_tool("shout", {"text": words})
    assert not result.is_error, result
    return result.structured_content["result"]


async def _all_reloaded(replicas: Sequence[Replica], plugin: str, times: int = 1) -> None:
    """Every replica logged ``times`` reloads (so each has announced them on the bus)."""

    async def done() -> bool:
        return all(r.output().count(f"reloaded {plugin}") >= times for r in replicas)

    deadline = time.monotonic() + LIVENESS
    while not await done():
        assert time.monotonic() < deadline, [r.output() for r in replicas]
        await asyncio.sleep(0.02)


# --- the bus ------------------------------------------------------------------------------
def test_a_change_on_one_replica_reaches_the_clients_of_another_once(tmp_path: Path) -> None:
    first, second = plugins(tmp_path, "a"), plugins(tmp_path, "b")
    with cluster(tmp_path, [first, second], nginx=False) as (replicas, _, _):
        a, b = replicas

        async def scenario() -> None:
            async with (
                connect(a.url, MODERN, token=TOKEN[0]) as (_, on_a),
                connect(b.url, MODERN, token=TOKEN[1]) as (listener, on_b),
                connect(b.url, "legacy", token=TOKEN[2]) as (session, on_b_too),
            ):
                replace_atomically(first / "shout.py", SHOUT.format(n=1, suffix="!"))
                await on_a.next()
                heard = time.monotonic()
                await asyncio.gather(on_b.next(), on_b_too.next())
                # B has not loaded it: only the bus told its clients, a moment after A's
                assert time.monotonic() - heard < 0.2
                assert "reloaded" not in b.output()
                # B's list waits for B's copy, which the operator syncs a little later
                syncing = asyncio.get_running_loop().call_later(
                    0.3, replace_atomically, second / "shout.py", SHOUT.format(n=1, suffix="!")
                )
                listed = {t.name: t for t in (await session.list_tools()).tools}
                assert "generation 1" in (listed["shout"].description or "")
                assert await shout(listener, "x") == "X!"
                # B's own reload of the same edit is no news to anyone
                await _all_reloaded([b], "shout")
                syncing.cancel()
                replace_atomically(first / "shout.py", SHOUT.format(n=2, suffix="?"))
                replace_atomically(second / "shout.py", SHOUT.format(n=2, suffix="?"))
                everyone = [on_a, on_b, on_b_too]
                await heard_exactly(everyone, 1)
                await _all_reloaded([a, b], "shout", times=2)
                assert all(c.seen.empty() for c in everyone)

        run(scenario())


def test_a_call_for_a_tool_another_replica_has_waits_for_this_one_to_load_it(
    tmp_path: Path,
) -> None:
    first, second = plugins(tmp_path, "a"), plugins(tmp_path, "b")
    with cluster(tmp_path, [first, second], nginx=False) as (replicas, _, _):
        a, b = replicas

        async def scenario() -> None:
            async with (
                connect(a.url, MODERN, token=TOKEN[0]) as (on_a, changes),
                connect(b.url, MODERN, token=TOKEN[0]) as (on_b, _),
            ):
                write(first / "extra.py", EXTRA)
                await changes.next()
                assert "extra" in await names(on_a)
                await _listed_in_redis(a, "extra")
                # the operator's sync reaches B's copy a second later: B's call waits for it
                loop = asyncio.get_running_loop()
                loop.call_later(1.0, write, second / "extra.py", EXTRA)
                result = await on_b.call_tool("extra", {"text": "b"})
                assert not result.is_error, result
                assert result.structured_content == {"result": "b+"}
                # one that never arrives: after the wait, a clear error naming the laggard
                write(first / "other.py", EXTRA.replace("def extra", "def other"))
                await changes.next()
                await _listed_in_redis(a, "other")
                started = time.monotonic()
                missing = await on_b.call_tool("other", {"text": "b"})
                waited = time.monotonic() - started
                assert missing.is_error
                assert text(missing).startswith("Error (unknown_tool): unknown tool 'other' on ")
                assert f"replica {b.rid}" in text(missing)
                assert f"replica {a.rid}" in text(missing)
                assert waited >= 1.9  # the default --skew-wait, not an answer at once
                # a tool no replica has answers at once, as ever
                started = time.monotonic()
                nowhere = await on_b.call_tool("nowhere", {})
                assert text(nowhere) == "Error (unknown_tool): unknown tool 'nowhere'"
                assert time.monotonic() - started < 1.9

        run(scenario())


async def _listed_in_redis(replica: Replica, tool: str) -> None:
    """The replica's record says it serves ``tool`` (its next heartbeat, within a second)."""
    from agenthost._cluster.record import tool_key

    key = tool_key(tool)  # no --state-key: the names are hashed unsalted
    client = redis.Redis.from_url(replica.redis)
    try:
        deadline = time.monotonic() + LIVENESS
        while True:
            record = client.get(f"agenthost:replica:{replica.rid}")
            if record and key in json.loads(record)["tools"]:
                return
            assert time.monotonic() < deadline, f"{tool} not in {replica.rid}'s record"
            await asyncio.sleep(0.05)
    finally:
        client.close()


# --- a replica dies, Redis goes away ------------------------------------------------------
@dataclass
class Caller:
    """One client calling in a loop through nginx, reconnecting when its session is gone."""

    n: int
    mode: str
    url: str
    ok: list[float] = field(default_factory=list)
    failed: list[tuple[float, str]] = field(default_factory=list)
    hung: int = 0
    sessions: list[str] = field(default_factory=list)

    async def loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with connect(
                    self.url, self.mode, token=TOKEN[self.n], sessions=self.sessions
                ) as (client, _):
                    while not stop.is_set():
                        await self._call(client)
            except Exception as exc:  # noqa: BLE001 - the session is gone: open another
                self.failed.append((time.monotonic(), f"session: {exc!r}"[:300]))

    async def _call(self, client: Any) -> None:
        try:
            result = await asyncio.wait_for(client.call_tool("slow", {"seconds": 0.02}), LIVENESS)
        except asyncio.TimeoutError:
            self.hung += 1
            raise
        except MCPError as exc:  # this call failed (a 502 from nginx): the next one may not
            self.failed.append((time.monotonic(), f"call: {exc!r}"[:300]))
            if "Session" in str(exc):  # the session is gone: open another
                raise
            return
        if result.is_error:
            self.failed.append((time.monotonic(), text(result)))
        else:
            self.ok.append(time.monotonic())

    def after(self, moment: float) -> list[float]:
        return [t for t in self.ok if t > moment]


# The official client, its session broken under it (the point of these tests), may leave a
# socket for the garbage collector: a warning about the client, not about the server.
CLIENT_LEAKS = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)


def callers(url: str, count: int) -> list[Caller]:
    return [Caller(n, MODES[n % 2], url) for n in range(count)]


async def calling(
    group: Sequence[Caller], stop: asyncio.Event, enough: Callable[[], bool]
) -> list[asyncio.Task[None]]:
    tasks = [asyncio.ensure_future(c.loop(stop)) for c in group]
    deadline = time.monotonic() + LIVENESS * 3
    while not enough():
        assert time.monotonic() < deadline, [(c.ok[-1:], c.failed[-3:]) for c in group]
        assert not any(t.done() for t in tasks), [t.exception() for t in tasks if t.done()]
        await asyncio.sleep(0.02)
    return tasks


@CLIENT_LEAKS
def test_a_replica_killed_under_load_costs_only_its_calls_in_flight_and_rejoins(
    tmp_path: Path,
) -> None:
    directory = plugins(tmp_path)
    with cluster(tmp_path, [directory] * 3) as (replicas, balancer, redis_server):
        assert balancer is not None
        victim, survivors = replicas[0], replicas[1:]
        old_rid = victim.rid
        group = callers(f"{balancer.url}/mcp", 8)

        async def scenario() -> float:
            stop = asyncio.Event()
            tasks = await calling(group, stop, lambda: all(len(c.ok) >= 20 for c in group))
            killed = time.monotonic()
            await asyncio.to_thread(victim.kill)
            await calling(group, stop, lambda: all(len(c.after(killed)) >= 20 for c in group))
            stop.set()
            await asyncio.gather(*tasks)
            return killed

        killed = run(scenario())
        assert all(c.hung == 0 for c in group)
        for c in group:
            # a call in flight on (or relayed through) the killed replica fails; a session it
            # owned is gone too (404: the client opens a new one); nothing else fails
            assert len(c.failed) <= 3, c.failed
            assert all(t >= killed for t, _ in c.failed), c.failed
        # calls succeed again within 2 s (the median client: one that had to open a new
        # session on a loaded 2-core machine may take longer, never past the liveness bound)
        back = sorted(c.after(killed)[0] - killed for c in group)
        assert back[len(back) // 2] < 2.0, back
        assert back[-1] < LIVENESS, back
        client = redis.Redis.from_url(redis_server.url)
        try:
            until(
                lambda: client.get(f"agenthost:replica:{old_rid}") is None,
                "the dead replica's record expires",
                timeout=8,
            )
            victim.launch()
            until(victim.ready, "the replica restarts on its port")
            assert victim.rid != old_rid
            for survivor in survivors:  # nothing else restarted
                assert survivor.process is not None
                assert survivor.process.poll() is None, survivor.output()
                assert survivor.starts == 1
            rids = {r.rid for r in replicas}
            until(
                lambda: (
                    {k.decode().rsplit(":", 1)[1] for k in client.keys("agenthost:replica:*")}
                    == rids
                ),
                "the restarted replica rejoins",
            )
        finally:
            client.close()

        async def served_by_all() -> None:
            async with connect(victim.url, "legacy", token=TOKEN[0]) as (session, _):
                for _ in range(6):  # through every replica in turn
                    assert await shout(session, "z") == "Z"

        run(served_by_all())


@CLIENT_LEAKS
def test_redis_going_away_under_load_fails_no_call_and_the_bus_resumes(tmp_path: Path) -> None:
    first, second = plugins(tmp_path, "a"), plugins(tmp_path, "b")
    with cluster(tmp_path, [first, second]) as (replicas, balancer, redis_server):
        assert balancer is not None
        group = callers(f"{balancer.url}/mcp", 4)

        def readiness() -> set[str]:
            return {probe(r.url, "/readyz")[1] for r in replicas}

        async def scenario() -> None:
            stop = asyncio.Event()
            tasks = await calling(group, stop, lambda: all(len(c.ok) >= 10 for c in group))
            await asyncio.to_thread(redis_server.stop)
            gone = time.monotonic()
            await eventually_true(lambda: readiness() == {'{"status": "degraded"}'})
            await calling(group, stop, lambda: all(len(c.after(gone)) >= 20 for c in group))
            await asyncio.to_thread(redis_server.start)
            back = time.monotonic()
            await eventually_true(lambda: readiness() == {'{"status": "ready"}'})
            await calling(group, stop, lambda: all(len(c.after(back)) >= 10 for c in group))
            stop.set()
            await asyncio.gather(*tasks)
            # the bus is back: a change to A's copy alone reaches a client of B
            async with connect(replicas[1].url, MODERN, token=TOKEN[9]) as (_, changes):
                replace_atomically(first / "shout.py", SHOUT.format(n=1, suffix="!"))
                await changes.next()

        run(scenario())
        assert all(c.failed == [] and c.hung == 0 for c in group), [c.failed for c in group]
        for replica in replicas:
            assert "Traceback" not in replica.output(), replica.output()


async def eventually_true(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + LIVENESS
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


@CLIENT_LEAKS
def test_sigterm_under_load_answers_until_the_port_closes_and_fails_no_call(
    tmp_path: Path,
) -> None:
    directory = plugins(tmp_path)
    with cluster(tmp_path, [directory] * 3) as (replicas, balancer, _):
        assert balancer is not None
        victim = replicas[0]
        group = callers(f"{balancer.url}/mcp", 8)
        states: list[str] = []

        def closed() -> bool:
            try:
                states.append(probe(victim.url, "/readyz")[1])
            except OSError:
                return True
            return False

        async def scenario() -> tuple[float, dict[int, str]]:
            stop = asyncio.Event()
            tasks = await calling(group, stop, lambda: all(len(c.ok) >= 10 for c in group))
            owners = {c.n: c.sessions[-1].partition(".")[0] for c in group if c.sessions}
            victim.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            asked = time.monotonic()
            await eventually_true(closed)
            gone = time.monotonic()
            await calling(group, stop, lambda: all(len(c.after(gone)) >= 10 for c in group))
            stop.set()
            await asyncio.gather(*tasks)
            return asked, owners

        _asked, owners = run(scenario())
        assert victim.process is not None
        assert victim.process.wait(LIVENESS) == 0
        # /readyz said so at once, while the port still answered; then the port closed
        assert states, "the port closed before /readyz answered once"
        assert set(states) == {'{"status": "draining"}'}, states
        for c in group:
            assert c.hung == 0
            if owners.get(c.n) == victim.rid:
                continue  # its session lived in the stopped replica: its calls go there, and
                # end with it; the client opens another session
            assert c.failed == [], (c.mode, c.failed)
        assert any(owner != victim.rid for owner in owners.values())


# --- what crosses between replicas ----------------------------------------------------------
def test_a_relayed_request_is_never_relayed_again_and_a_forged_hop_vouches_for_nobody(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path, [plugins(tmp_path)] * 2, nginx=False) as (replicas, _, _):
        a, b = replicas
        sessions: list[str] = []
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

        def post(sid: str, **extra: str) -> httpx2.Response:
            headers = {
                "authorization": f"Bearer {TOKEN[0]}",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2025-11-25",
                "mcp-session-id": sid,
                **extra,
            }
            return httpx2.post(b.url, json=body, headers=headers)

        async def scenario() -> None:
            async with connect(a.url, "legacy", token=TOKEN[0], sessions=sessions) as (c, _):
                assert await shout(c, "a") == "A"
                sid = sessions[-1]
                assert sid.startswith(f"{a.rid}.")
                relayed = await asyncio.to_thread(post, sid)  # B relays it to A
                assert relayed.status_code == 200
                assert "shout" in relayed.text
                hop = f"{b.rid}|{time.time()}|10.9.9.9|forged"
                looped = await asyncio.to_thread(post, sid, **{"x-agenthost-hop": hop})
                assert looped.status_code == 404  # a hop names its target: never sent on
                assert looped.json()["error"]["message"] == "Session not found"
                shaped = await asyncio.to_thread(
                    lambda: httpx2.request("GET", b.url, content=b"x", headers={
                        "authorization": f"Bearer {TOKEN[0]}", "mcp-session-id": sid})
                )  # fmt: skip
                assert shaped.status_code == 400  # refused as the owner would, unread
                unknown = await asyncio.to_thread(post, f"{'0' * 8}.{sid.partition('.')[2]}")
                assert unknown.status_code == 404  # an owner no replica knows of: gone

        run(scenario())


def test_the_hop_signature_binds_target_request_client_and_time() -> None:
    from agenthost._cluster.keys import HOP_SKEW_S, Ring

    ring, other = Ring(["k1"]), Ring(["k2"])
    header = ring.sign("r2", "10.0.0.7", "POST", "r2.abc")
    assert ring.verify(header, "r2", "POST", "r2.abc") == "10.0.0.7"
    assert Ring(["k0", "k1"]).verify(header, "r2", "POST", "r2.abc") == "10.0.0.7"  # rotation
    assert other.verify(header, "r2", "POST", "r2.abc") is None
    assert ring.verify(header, "r3", "POST", "r2.abc") is None
    assert ring.verify(header, "r2", "GET", "r2.abc") is None
    assert ring.verify(header, "r2", "POST", "r2.abd") is None
    to, when, client, mac = header.split("|")
    assert ring.verify(f"{to}|{when}|10.0.0.8|{mac}", "r2", "POST", "r2.abc") is None
    stale = float(when) - HOP_SKEW_S - 1
    assert ring.verify(f"{to}|{stale}|{client}|{mac}", "r2", "POST", "r2.abc") is None
    for junk in ["", "|||", "r2|nan|x|", "r2|inf|x|y", "r2|1e400|x|y", "\x00" * 99]:
        assert ring.verify(junk, "r2", "POST", "r2.abc") is None
    assert Ring().verify(Ring().sign("r2", "x", "POST", "s"), "r2", "POST", "s") is None


def test_the_key_ring_is_shared_and_rebuilt_after_redis_loses_it(tmp_path: Path) -> None:
    from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

    with cluster(tmp_path, [plugins(tmp_path)] * 2, nginx=False) as (_, _, redis_server):
        client = redis.Redis.from_url(redis_server.url)
        try:
            ring = json.loads(until(lambda: client.get("agenthost:statekeys"), "a ring"))
            assert len(ring) == 1
            assert len(bytes.fromhex(ring[0])) == 32
            sealed = AESGCMRequestStateCodec(ring).seal(b"round 1")
            redis_server.stop()
            redis_server.start()  # empty: the replicas put back the ring they share
            again = until(lambda: client.get("agenthost:statekeys"), "the ring back", 5)
            assert json.loads(again) == ring
            assert AESGCMRequestStateCodec(json.loads(again)).unseal(sealed) == b"round 1"
            with pytest.raises(InvalidRequestState):
                AESGCMRequestStateCodec(["00" * 32]).unseal(sealed)
        finally:
            client.close()


def test_given_state_keys_are_used_and_never_written_to_redis(tmp_path: Path) -> None:
    key = "ab" * 32
    with cluster(tmp_path, [plugins(tmp_path)], "--state-key", key, nginx=False) as (
        replicas,
        _,
        redis_server,
    ):
        client = redis.Redis.from_url(redis_server.url)
        try:
            until(lambda: client.get(f"agenthost:replica:{replicas[0].rid}"), "a record")
            assert client.get("agenthost:statekeys") is None
            assert key not in replicas[0].output()
        finally:
            client.close()


# --- the command line -----------------------------------------------------------------------
def test_cluster_flags_are_checked_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agenthost._cli.main import main

    directory = plugins(tmp_path)
    assert main(["serve", str(directory), "--redis", "redis://127.0.0.1:1/0"]) == 2
    assert "--redis applies to HTTP: add --http [HOST:]PORT" in capsys.readouterr().err
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    tokens.chmod(0o600)
    wildcard = ["--http", "0.0.0.0:0", "--tokens", str(tokens), "--redis", "redis://r:6379/0"]
    assert main(["serve", str(directory), *wildcard]) == 2
    assert "add --advertise URL" in capsys.readouterr().err
    bad = ["--http", "0", "--redis", "http://:hunter2@127.0.0.1:1/0"]
    assert main(["serve", str(directory), *bad]) == 2
    err = capsys.readouterr().err
    assert "--redis" in err
    assert "hunter2" not in err
    with pytest.raises(SystemExit):
        main(["serve", str(directory), "--http", "0", "--drain-grace", "nan"])
    assert "not a number of seconds from 0 up" in capsys.readouterr().err


def test_a_token_names_the_same_client_whatever_its_place_in_the_file() -> None:
    from agenthost._serve.tokens import Caller, TokenTable

    alice, bob = Caller("alice", frozenset()), Caller("bob", frozenset())
    one = TokenTable({"a" * 20: alice, "b" * 20: bob})
    two = TokenTable({"b" * 20: bob, "a" * 20: alice})

    async def ids(table: TokenTable) -> list[str]:
        found = [await table.verify_token(t) for t in ("a" * 20, "b" * 20)]
        return [f.client_id for f in found if f is not None]

    assert run(ids(one)) == run(ids(two))
    assert len(set(run(ids(one)))) == 2


def test_cluster_status_names_replicas_started_with_other_tokens_or_grants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agenthost._cli.main import main

    with cluster(tmp_path, [plugins(tmp_path)] * 2, nginx=False) as (replicas, _, redis_server):
        assert main(["cluster", "status", "--redis", redis_server.url]) == 0
        assert "all 2 replicas agree" in capsys.readouterr().out
        replicas[1].stop()
        replicas[1].extra = [*replicas[1].extra, "--grant", "secret.read"]
        replicas[1].launch()
        until(replicas[1].ready, "the replica restarts")

        def disagree() -> str | None:
            code = main(["cluster", "status", "--redis", redis_server.url])
            out = capsys.readouterr().out
            return out if code == 1 and "tokens and grants differ" in out else None

        out = until(disagree, "status sees the other grants")
        assert replicas[0].rid in out
        assert replicas[1].rid in out


def test_progress_streams_through_the_replica_that_relays_it(tmp_path: Path) -> None:
    directory = plugins(tmp_path)
    write(directory / "relay.py", RELAY)
    with cluster(tmp_path, [directory] * 2) as (_, balancer, _):
        assert balancer is not None

        async def scenario() -> None:
            responses: list[httpx2.Response] = []
            url = f"{balancer.url}/mcp"
            async with connect(url, "legacy", token=TOKEN[0], responses=responses) as (c, _):
                for attempt in range(6):  # round robin: some calls land on the other replica
                    mark = tmp_path / f"first-arrived-{attempt}"
                    chunks: list[str | None] = []

                    async def on_progress(
                        done: float,
                        total: float | None,
                        message: str | None,
                        mark: Path = mark,
                        chunks: list[str | None] = chunks,
                    ) -> None:
                        chunks.append(message)
                        mark.touch()  # the tool waits for this before its second chunk

                    result = await c.call_tool(
                        "relay", {"mark": str(mark)}, progress_callback=on_progress
                    )
                    assert chunks == ["first;", "second;"], chunks
                    assert text(result) == "first;second;"
            # the relay marks what it relayed: some of those calls were
            relayed = [r for r in responses if r.headers.get("x-accel-buffering") == "no"]
            assert any(r.request.method == "POST" for r in relayed)

        run(scenario())


# --- what a Redis writer or a careless caller can do -----------------------------------------
@contextmanager
def trap() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server that records every request it gets: where a hijacked relay would go."""
    import http.server
    import threading

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(f"{self.command} {self.headers.get('authorization')}")
            if "chunked" in self.headers.get("transfer-encoding", ""):  # read it all: unread,
                while size := int(self.rfile.readline().split(b";")[0], 16):  # closing would
                    self.rfile.read(size + 2)  # reset the answer
                self.rfile.readline()
            else:
                self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        do_GET = do_DELETE = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    finally:
        server.shutdown()
        server.server_close()


def forge(client: redis.Redis, key: str, record: dict[str, Any]) -> None:
    client.set(f"agenthost:replica:{key}", json.dumps(record))
    client.sadd("agenthost:replicas", key)


def record_of(replica: str, url: str) -> dict[str, Any]:
    return {"replica": replica, "url": url, "state": "ready", "started": 0.0,
            "version": "0", "plugins": {}, "tools": {}, "beat": time.time()}  # fmt: skip


@pytest.mark.parametrize("signed", [False, True], ids=["redis-ring", "state-key"])
def test_a_record_someone_else_wrote_to_redis_redirects_no_request(
    tmp_path: Path, signed: bool
) -> None:
    extra = ["--state-key", "cd" * 32] if signed else []
    directory = plugins(tmp_path)
    with (
        trap() as (url, seen),
        cluster(tmp_path, [directory] * 2, *extra, nginx=False) as (replicas, _, redis_server),
    ):
        a, b = replicas
        client = redis.Redis.from_url(redis_server.url)
        sessions: list[str] = []

        def relayed(sid: str) -> tuple[int, str]:
            headers = {"authorization": f"Bearer {TOKEN[0]}", "mcp-session-id": sid,
                       "accept": "application/json, text/event-stream",
                       "mcp-protocol-version": "2025-11-25"}  # fmt: skip
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            answer = httpx2.post(b.url, json=body, headers=headers, timeout=LIVENESS)
            return answer.status_code, answer.text[:200]

        async def scenario() -> None:
            async with connect(a.url, "legacy", token=TOKEN[0], sessions=sessions) as (c, _):
                await shout(c, "x")
                for n in range(20):  # records claiming to be A, under other names
                    forge(client, f"{n:08x}", record_of(a.rid, url))
                forge(client, "0badf00d", record_of("0badf00d", url))  # a replica of its own
                for _ in range(12):  # over several of B's reads of the members
                    status, said = await asyncio.to_thread(relayed, sessions[-1])
                    assert status == 200, said
                    await asyncio.sleep(0.2)
                status, said = await asyncio.to_thread(relayed, "0badf00d.x")
                assert status == (404 if signed else 200), said

        try:
            run(scenario())
        finally:
            client.close()
        # a record under a replica's id but another key is never believed; one under its
        # own key is, from a Redis that holds the ring itself, and signed with --state-key
        assert seen == ([] if signed else [f"POST Bearer {TOKEN[0]}"])


def test_nonsense_published_or_stored_in_redis_breaks_no_replica(tmp_path: Path) -> None:
    first, second = plugins(tmp_path, "a"), plugins(tmp_path, "b")
    with cluster(tmp_path, [first, second], nginx=False) as (replicas, _, redis_server):
        client = redis.Redis.from_url(redis_server.url)
        deep = "[" * 100_000 + "]" * 100_000
        try:
            for junk in [deep, "x" * 1_000_000, "{}", '{"topic": [], "from": 1, "kind": {}}']:
                client.publish("agenthost:events", junk)
            forge(client, "deadbeef", json.loads('{"a": 1}') | {"replica": "deadbeef"})
            client.set("agenthost:replica:feedface", deep)
            client.sadd("agenthost:replicas", "feedface", "x" * 10_000)
            client.set("agenthost:statekeys", deep)

            async def scenario() -> None:
                async with connect(replicas[1].url, MODERN, token=TOKEN[1]) as (_, changes):
                    await asyncio.sleep(BEAT_WAIT)  # a heartbeat reads all of it
                    replace_atomically(first / "shout.py", SHOUT.format(n=1, suffix="!"))
                    await changes.next()  # the bus on both still works

            run(scenario())
            assert {probe(r.url, "/readyz")[1] for r in replicas} == {'{"status": "ready"}'}
            for replica in replicas:
                assert "Traceback" not in replica.output()
        finally:
            client.close()


BEAT_WAIT = 1.5  # seconds: more than one heartbeat, so each replica has read Redis again


def test_unknown_session_ids_cost_redis_little(tmp_path: Path) -> None:
    with cluster(tmp_path, [plugins(tmp_path)], nginx=False) as (replicas, _, redis_server):
        client = redis.Redis.from_url(redis_server.url)
        client.config_resetstat()

        async def flood() -> list[int]:
            headers = {"accept": "application/json, text/event-stream"}
            async with httpx2.AsyncClient(timeout=LIVENESS) as http:

                async def one(n: int) -> int:
                    sid = {"mcp-session-id": f"{n:08x}.{n}"}
                    answer = await http.post(replicas[0].url, json={}, headers=headers | sid)
                    return answer.status_code

                return await asyncio.gather(*(one(n) for n in range(300)))

        try:
            assert set(run(flood())) == {404}
            stats = client.info("commandstats")
        finally:
            client.close()
        assert "cmdstat_scan" not in stats
        assert stats.get("cmdstat_smembers", {}).get("calls", 0) < 60, stats


def test_a_burst_of_edits_on_three_replicas_makes_no_storm(tmp_path: Path) -> None:
    directory = plugins(tmp_path)
    with cluster(tmp_path, [directory] * 3, nginx=False) as (replicas, _, _):

        async def generation(client: Any) -> str:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            return (listed["shout"].description or "").rpartition(" ")[2]

        async def heard_until(client: Any, changes: Changes, last: str) -> int:
            """How many changes the client hears until its list is ``last``."""
            count = 0
            while True:
                await changes.next()
                count += 1
                if await generation(client) == last:
                    return count

        async def scenario() -> list[int]:
            async with contextlib.AsyncExitStack() as stack:
                clients = [
                    await stack.enter_async_context(connect(r.url, mode, token=TOKEN[n]))
                    for n, (r, mode) in enumerate((r, m) for r in replicas for m in MODES)
                ]
                for n in range(1, 21):  # 20 edits in 0.4 s, each reloaded by three replicas
                    replace_atomically(directory / "shout.py", SHOUT.format(n=n, suffix=""))
                    await asyncio.sleep(0.02)
                counts = await asyncio.gather(*(heard_until(c, h, "20.") for c, h in clients))
                await asyncio.sleep(0.3)  # past the bus's window: what is still due arrives
                counts = [n + h.seen.qsize() for n, (_, h) in zip(counts, clients, strict=True)]
                for _, changes in clients:
                    changes.forget()
                replace_atomically(directory / "shout.py", SHOUT.format(n=99, suffix=""))
                # a last edit as a barrier: heard once (twice at most, when a loaded machine
                # held back the burst's last word past the wait above)
                after = await asyncio.gather(*(heard_until(c, h, "99.") for c, h in clients))
                assert all(n in (1, 2) for n in after), after
                assert after.count(1) >= len(after) // 2, after
                return counts

        counts = run(scenario())
        # each client heard of the burst, and far fewer times than there were edits
        assert all(1 <= count <= 10 for count in counts), counts


def test_a_wrong_redis_password_stops_serve_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agenthost._cli.main import main

    need_services("redis-server")
    with RedisServer(tmp_path / "redis") as redis_server:
        client = redis.Redis.from_url(redis_server.url)
        client.config_set("requirepass", "right-one")
        client.close()
        url = f"redis://:wrong-one@127.0.0.1:{redis_server.port}/0"
        assert main(["serve", str(plugins(tmp_path)), "--http", "0", "--redis", url]) == 2
    err = capsys.readouterr().err
    assert "Redis refused the credentials" in err
    assert "wrong-one" not in err


def test_cluster_status_prints_what_redis_holds_inertly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agenthost._cli.main import main

    need_services("redis-server")
    with RedisServer(tmp_path / "redis") as redis_server:
        client = redis.Redis.from_url(redis_server.url)
        fake = record_of("0badf00d", "http://x\x1b[2J/mcp\nr9  http://fake  ready")
        forge(client, "0badf00d", fake)
        client.set("agenthost:replica:feedface", "[" * 100_000)
        client.close()
        assert main(["cluster", "status", "--redis", redis_server.url]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\\x1b[2J" in out
    assert not any(line.startswith("r9") for line in out.splitlines())
    assert "feedface is unreadable" in out
