"""Many replicas behind a round-robin nginx, Redis as their bus: real processes only.

Every replica is an ``agenthost serve --http ... --redis URL`` subprocess; Redis and
nginx (running the shipped ``deploy/nginx.conf``) are started by ``services``. The
clients are the official MCP client of both protocol generations, over a fresh
connection per request where it matters, so nothing sticks to one replica.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import replace_atomically, write
from mcp_clients import (
    LIVENESS,
    MODERN,
    SHOUT,
    Changes,
    command,
    connect,
    environment,
    names,
)
from services import Nginx, RedisServer, free_port, need_services

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

EXTRA = '''
from agenthost import tool


@tool
def extra(text: str) -> str:
    """Only in some copies of the directory."""
    return text + "+"
'''


@pytest.fixture(autouse=True)
def _services() -> None:
    need_services()


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
        return "serving MCP at" in self.output()

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


def run(scenario: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(scenario, 120))


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

        async def client(n: int, mode: str, statuses: list[int]) -> Changes:
            async with connect(url, mode, token=TOKEN[n], statuses=statuses) as (c, changes):
                assert "shout" in await names(c)
                for i in range(200):
                    result = await c.call_tool("shout", {"text": f"c{n} {i}"})
                    if result.is_error or result.structured_content != {"result": f"C{n} {i}"}:
                        failures.append(f"{mode} {n} {i}: {result}")
                return changes

        async def scenario() -> None:
            statuses: list[list[int]] = [[] for _ in range(4)]
            await asyncio.gather(*(client(n, MODES[n % 2], statuses[n]) for n in range(4)))
            assert failures == []
            assert all(s and set(s) <= {200, 202} for s in statuses), statuses

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


async def _all_reloaded(replicas: Sequence[Replica], plugin: str) -> None:
    """Every replica logged the reload (so each has announced it on the bus)."""

    async def done() -> bool:
        return all(r.output().count(f"reloaded {plugin}") >= 1 for r in replicas)

    deadline = time.monotonic() + LIVENESS
    while not await done():
        assert time.monotonic() < deadline, [r.output() for r in replicas]
        await asyncio.sleep(0.02)
