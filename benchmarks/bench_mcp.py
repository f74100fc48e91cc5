"""MCP serving, side by side with FastMCP and the MCP SDK's own server, in one run.

- ``tools/call`` round trip for a trivial tool over stdio and over HTTP;
- a plugin file saved to the client holding the new tool list (agenthost), next
  to what FastMCP's ``FileSystemProvider(reload=True)`` pays on every ``tools/list``
  with 10, 100 and 1,000 plugin files (and what agenthost's ``tools/list`` costs);
- calls per second over HTTP with 16 concurrent clients, on the server the HTTP
  round trips were just measured on.

Every server is a subprocess; the client is the official ``mcp`` client in the
session-based mode all three servers speak, with its response cache off. A
smoke run starts agenthost's servers only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._harness import (
    Stats,
    ameasure,
    cpu_seconds,
    format_time,
    installed,
    scaled,
    smoke,
    table,
)

ADD = '''
{decorator}
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

PEERS = {
    "FastMCP": """
import sys
from fastmcp import FastMCP

mcp = FastMCP("bench")
mcp.tool(add)
if sys.argv[1] == "stdio":
    mcp.run(show_banner=False)
else:
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False,
            log_level="warning")
""",
    "MCP SDK MCPServer": """
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")
server.tool()(add)
if sys.argv[1] == "stdio":
    server.run()
else:
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
""",
}

FILESYSTEM = """
import sys
from fastmcp import FastMCP
from fastmcp.server.providers import FileSystemProvider

FastMCP("bench", providers=[FileSystemProvider(sys.argv[1], reload=True)]).run(show_banner=False)
"""

PROBE = 'from agenthost import tool\n\n@tool\ndef probe_{n}() -> int:\n    """Probe."""\n    return {n}\n'
FAST_PROBE = (
    'from fastmcp.tools import tool\n\n@tool\ndef probe_{n}() -> int:\n    """Probe."""\n'
    "    return {n}\n"
)


_DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - the servers' event lines, for the whole run
AGENTHOST = [sys.executable, "-m", "agenthost", "serve"]


def _python(script: Path, *args: str) -> list[str]:
    return [sys.executable, str(script), *args]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


NEEDS = {"agenthost": "agenthost", "FastMCP": "fastmcp", "MCP SDK MCPServer": "mcp"}


# Without tokens every client on this machine is one caller, and the peers have no
# per-caller quotas: lift ours so the 16 clients measure the server, not the quota.
_ONE_CALLER = ["--limit", "calls=64", "--limit", "rate=1000000"]


def _servers(scratch: Path) -> dict[str, Any]:
    """How to start each installed server: a function of (transport, port) to a command line."""
    plugins = scratch / "plugins"
    plugins.mkdir()
    (plugins / "calc.py").write_text("from agenthost import tool\n" + ADD.format(decorator="@tool"))
    commands: dict[str, Any] = {
        "agenthost": lambda transport, port: [
            *AGENTHOST,
            str(plugins),
            *(["--http", f"127.0.0.1:{port}", *_ONE_CALLER] if transport == "http" else []),
        ]
    }
    for name, body in PEERS.items():
        if not _peer_runs(name, NEEDS[name]):
            continue
        script = scratch / f"{name.split()[0].lower()}_server.py"
        script.write_text(ADD.format(decorator="") + body)
        commands[name] = lambda transport, port, script=script: _python(
            script, transport, str(port)
        )
    return commands


def _peer_runs(peer: str, package: str) -> bool:
    """Whether to start a peer's servers: if it is installed, and not in a smoke run (which
    checks agenthost's side, and where each server start would cost a second or two)."""
    if not installed(package):
        print(f"{peer} is not installed (pip install -e '.[bench]'): left out")
        return False
    if smoke():
        print(f"{peer}: left out of a smoke run")
        return False
    return True


def _client(target: Any, **options: Any) -> Any:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if isinstance(target, list):  # a server command line, run over stdio; its stderr is dropped
        params = StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
        target = stdio_client(params, errlog=_DEVNULL)
    return Client(target, mode="legacy", cache=None, **options)


@contextlib.contextmanager
def _http(command: list[str], port: int) -> Iterator[tuple[str, int]]:
    """Start an HTTP server; yield its URL and process id."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process.pid
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _round_trip(target: Any) -> Stats:
    async def run() -> Stats:
        async with _client(target) as client:

            async def call() -> None:
                result = await client.call_tool("add", {"a": 1, "b": 2})
                assert not result.is_error, result

            return await ameasure(call, repeat=9, budget=1.5)

    return asyncio.run(run())


def over_stdio(servers: dict[str, Any]) -> None:
    rows: list[tuple[str, Stats | None]] = [
        (name, _round_trip(command("stdio", 0))) for name, command in servers.items()
    ]
    table("tools/call round trip, trivial tool, stdio", rows, baseline="agenthost")


def over_http(servers: dict[str, Any], load: Load) -> list[str]:
    """Round trips, then calls per second, on one HTTP server of each kind; the second's lines."""
    rows: list[tuple[str, Stats | None]] = []
    rates = []
    with ProcessPoolExecutor(load.processes) as pool:
        list(pool.map(_warm, range(load.processes)))  # the clients' imports are done
        for name, command in servers.items():
            port = _free_port()
            with _http(command("http", port), port) as (url, pid):
                rows.append((name, _round_trip(url)))
                rates.append(_throughput(name, url, pid, load, pool))
    table("tools/call round trip, trivial tool, http", rows, baseline="agenthost")
    return rates


def notification_latency(scratch: Path, edits: int = 30) -> None:
    """os.replace of a plugin file until the client's tools/list shows the new tool."""
    directory = scratch / "latency"
    directory.mkdir()
    (directory / "probe.py").write_text(PROBE.format(n=0))
    command = [*AGENTHOST, str(directory)]

    async def run() -> Stats:
        changed = asyncio.Event()

        async def on_message(message: Any) -> None:
            if type(message).__name__ == "ToolListChangedNotification":
                changed.set()

        samples = []
        async with _client(command, message_handler=on_message) as client:
            await client.list_tools()
            for n in range(1, edits + 1):
                temp = directory / ".probe.py.tmp"
                temp.write_text(PROBE.format(n=n))
                changed.clear()
                started = time.perf_counter()
                os.replace(temp, directory / "probe.py")
                while True:
                    await asyncio.wait_for(changed.wait(), 10)
                    changed.clear()
                    names = [t.name for t in (await client.list_tools()).tools]
                    if f"probe_{n}" in names:
                        break
                samples.append(time.perf_counter() - started)
        return Stats(samples)

    table(
        "plugin file saved -> client holds the new tool list (notification + tools/list)",
        [("agenthost serve, stdio, session-based client", asyncio.run(run()))],
    )


def listing_cost(scratch: Path, counts: tuple[int, ...] = (10, 100, 1000)) -> None:
    rows: list[tuple[str, Stats | None]] = []
    fastmcp_script = scratch / "filesystem_server.py"
    fastmcp_script.write_text(FILESYSTEM)
    fastmcp = _peer_runs("FastMCP FileSystemProvider", "fastmcp")
    for count in counts:
        ours, theirs = scratch / f"ours{count}", scratch / f"theirs{count}"
        ours.mkdir()
        theirs.mkdir()
        for n in range(count):
            (ours / f"probe_{n}.py").write_text(PROBE.format(n=n))
            (theirs / f"probe_{n}.py").write_text(FAST_PROBE.format(n=n))
        rows.append(
            (f"agenthost, {count} files", _listing([*AGENTHOST, str(ours)], count, repeat=9))
        )
        rows.append((f"  of which agenthost's own handler, {count} files", _handler(ours, count)))
        if fastmcp:
            theirs_stats = _listing(_python(fastmcp_script, str(theirs)), count, repeat=5)
            rows.append((f"FastMCP FileSystemProvider(reload=True), {count} files", theirs_stats))
    table("tools/list round trip by number of plugin files (one tool each), stdio", rows)


def _handler(directory: Path, count: int) -> Stats:
    """The server's tools/list handler alone, in-process: the rest is the SDK's and the pipe's."""
    from agenthost import PluginHost
    from agenthost._serve.server import McpServer

    server = McpServer(PluginHost(directory))

    async def run() -> Stats:
        async with server.running():

            async def listing() -> None:
                assert len((await server._list_tools(None, None)).tools) == count  # type: ignore[arg-type]

            return await ameasure(listing, repeat=9, budget=0.3)

    return asyncio.run(run())


def _listing(command: list[str], count: int, repeat: int) -> Stats:
    async def run() -> Stats:
        async with _client(command) as client:

            async def listing() -> None:
                assert len((await client.list_tools()).tools) == count

            return await ameasure(listing, repeat=repeat, budget=1.0)

    return asyncio.run(run())


@dataclass(frozen=True)
class Load:
    """Calls per second over HTTP: ``processes`` x ``per`` clients calling in a loop at once.

    One client process saturates long before a server does, so the clients are
    spread over processes; on a small machine they still share its cores with the
    server, so the server's own CPU time per call is shown too. Each of the
    ``rounds`` starts ``lead`` seconds after it is set, every client connected.
    """

    processes: int = 4
    per: int = 4
    rounds: int = 3
    seconds: float = 3.0
    lead: float = 2.0

    def report(self, lines: list[str]) -> None:
        print(
            f"\n## calls per second over HTTP, {self.processes * self.per} concurrent clients ",
            end="",
        )
        print(f"in {self.processes} processes, {self.seconds:g} s x {self.rounds}")
        print(f"{'':44} {'median':>14} {'min..max':>17} {'server CPU per call':>20}")
        for line in lines:
            print(line)


def _throughput(name: str, url: str, pid: int, load: Load, pool: ProcessPoolExecutor) -> str:
    """The line for one server: calls per second, their spread, its CPU time per call."""
    rates, costs = [], []
    for _ in range(load.rounds):
        start_at = time.time() + load.lead  # every process connected before the clock starts
        before = cpu_seconds(pid)
        jobs = [
            pool.submit(_hammer_process, url, load.per, start_at, load.seconds)
            for _ in range(load.processes)
        ]
        calls = sum(job.result() for job in jobs)
        costs.append((cpu_seconds(pid) - before) / calls)
        rates.append(calls / load.seconds)
    return (
        f"{name:44} {statistics.median(rates):>8,.0f} calls/s {min(rates):>8,.0f}..{max(rates):,.0f}"
        f" {format_time(statistics.median(costs)):>14}"
    )


def _warm(_: int) -> None:
    import jsonschema  # noqa: F401 - what a client's first call imports (validating results)
    import mcp  # noqa: F401


def _hammer_process(url: str, clients: int, start_at: float, seconds: float) -> int:
    """In a client process: connect, wait for the common start, call until the end; the count."""

    async def run() -> int:
        async with contextlib.AsyncExitStack() as stack:
            connected = [await stack.enter_async_context(_client(url)) for _ in range(clients)]
            await asyncio.sleep(max(0.0, start_at - time.time()))
            stop = start_at + seconds
            done = 0

            async def loop(client: Any) -> None:
                nonlocal done
                calls = 0
                while not calls or time.time() < stop:  # one at least, had it connected late
                    result = await client.call_tool("add", {"a": 1, "b": 2})
                    if result.is_error:
                        raise RuntimeError(f"a call failed: {result}")
                    calls += 1
                done += calls

            await asyncio.gather(*(loop(c) for c in connected))
            return done

    return asyncio.run(run())


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        servers = _servers(Path(scratch))
        load = scaled(Load(), Load(processes=1, per=2, rounds=1, seconds=0.2, lead=0.3))
        over_stdio(servers)
        rates = over_http(servers, load)
        notification_latency(Path(scratch), edits=scaled(30, 3))
        listing_cost(Path(scratch), counts=scaled((10, 100, 1000), (10,)))
        load.report(rates)


if __name__ == "__main__":
    main()
