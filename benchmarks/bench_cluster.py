"""agenthost as a cluster: replicas sharing one Redis, behind nginx running deploy/nginx.conf.

- ``tools/call`` throughput and per-call latency of concurrent clients of each
  protocol, through nginx in front of 1, 2 and 3 replicas, and to one replica
  direct: nginx's cost per call, and what more replicas bring;
- the CPU time the replicas and nginx spend per call in those runs;
- a session-based call sent to a replica that does not own its session (relayed
  to the owner) next to the same call sent to the owner;
- a plugin file saved in one replica's directory until a client of another
  replica (each has its own copy of the directory) hears the tool list changed,
  next to a client of the replica that reloaded.

Every process is real: redis-server, nginx, ``agenthost serve --http --redis``
replicas, and the official ``mcp`` client, session-based ("legacy") and
2026-07-28, with a token each so each client has its own quotas. The request
rate quota is lifted: one client calling in a loop sends more than its 200
requests a second. Without redis-server or nginx it says what to install and
exits 1 (0 in a smoke run). A smoke run starts two replicas and measures one
direct and nginx in front of both, with a few calls each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import secrets
import signal
import statistics
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2  # the official MCP client's HTTP library

from benchmarks._cluster_procs import (
    INSTALL,
    Balancer,
    RedisServer,
    Replica,
    free_port,
    missing_services,
    replicas,
)
from benchmarks._harness import Stats, cpu_seconds, format_time, machine, scaled, smoke, table

MODERN = "2026-07-28"
MODES = {"legacy": "session-based", MODERN: "2026-07-28"}
LIVENESS = 10.0  # seconds: the bound on a start, a notification, a round's readiness

CALC = '''from agenthost import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

PROBE = '''from agenthost import tool


@tool
def probe() -> int:
    """Probe, generation {n}."""
    return {n}
'''

LIMITS = ["--limit", "rate=1000000"]  # one client alone calls more than 200 times a second
TOKENS = 16  # the throughput clients' first, then the relay's two, then the listeners' four


@dataclass(frozen=True)
class Load:
    """``processes`` x ``per`` clients, each making ``calls`` calls, in every round.

    One client process saturates before a replica does, so the clients are spread
    over processes; on a small machine they share its cores with the servers, so
    the CPU time per call of each side is shown too.
    """

    processes: int = 2
    per: int = 4
    calls: int = 150
    rounds: int = 3

    @property
    def clients(self) -> int:
        return self.processes * self.per


@dataclass
class Cluster:
    replicas: list[Replica]
    balancers: dict[int, Balancer]  # by how many replicas it sends to (the first ones)
    redis_pid: int
    tokens: list[str]


@contextlib.contextmanager
def _cluster(scratch: Path, count: int) -> Iterator[Cluster]:
    """Redis, ``count`` replicas (each with its own copy of the plugins) and an nginx in
    front of the first 1, 2, ... of them; all stopped after, whatever happened."""
    tokens = {
        f"bench-{n:02d}-{secrets.token_hex(12)}": {"session": f"client{n}"} for n in range(TOKENS)
    }
    token_file = scratch / "tokens.json"
    token_file.write_text(json.dumps(tokens))
    token_file.chmod(0o600)
    directories = []
    for n in range(count):
        directory = scratch / f"plugins{n}"
        directory.mkdir()
        (directory / "calc.py").write_text(CALC)
        (directory / "probe.py").write_text(PROBE.format(n=0))
        directories.append(directory)
    ports = {behind: free_port() for behind in range(1, count + 1)}
    allow = [arg for port in ports.values() for arg in ("--allow-host", f"127.0.0.1:{port}")]
    with contextlib.ExitStack() as stack:
        redis = stack.enter_context(RedisServer(scratch / "redis"))
        assert redis.process is not None
        started = stack.enter_context(
            replicas(directories, redis.url, "--tokens", str(token_file), *LIMITS, *allow)
        )
        balancers = {
            behind: stack.enter_context(
                Balancer([r.address for r in started[:behind]], scratch / f"nginx{behind}", port)
            )
            for behind, port in ports.items()
        }
        yield Cluster(started, balancers, redis.process.pid, list(tokens))


# --- clients -------------------------------------------------------------------------------


class _Steer(httpx2.AsyncBaseTransport):
    """An HTTP transport sending each POST to the replica ``port`` names (when set), so a
    session opened on one replica can be called through another."""

    def __init__(self) -> None:
        self.port: int | None = None
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: Any) -> Any:
        if self.port is not None and request.method == "POST":
            request.url = request.url.copy_with(port=self.port)
            request.headers["Host"] = f"127.0.0.1:{self.port}"
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def _connect(
    url: str,
    mode: str,
    token: str,
    *,
    on_change: Callable[[], None] | None = None,
    statuses: dict[int, int] | None = None,
    steer: _Steer | None = None,
) -> AsyncIterator[Any]:
    """An official client with a bearer token; ``on_change`` is called when it hears the
    tool list changed (a notification, or its listen stream's event at 2026-07-28)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.client.subscriptions import ToolsListChanged

    listening = asyncio.Event()

    async def record(response: Any) -> None:
        if statuses is not None:
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.request.method == "GET" and response.status_code == 200:
            listening.set()  # a session's event stream: the server registers it before this

    async def on_message(message: Any) -> None:
        if (
            on_change
            and mode == "legacy"
            and type(message).__name__ == "ToolListChangedNotification"
        ):
            on_change()

    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx2.Timeout(30, read=300),  # event streams stay open
                event_hooks={"response": [record]},
                transport=steer,
                trust_env=False,
            )
        )
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(url, http_client=http),
                mode=mode,
                cache=None,
                message_handler=on_message,
            )
        )
        if mode == "legacy":
            # the stream it opens after its handshake (its notifications come there) is
            # part of a session-based client's steady state: wait for it
            await asyncio.wait_for(listening.wait(), LIVENESS)
        elif on_change is not None:
            subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))

            async def follow() -> None:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        on_change()

            task = asyncio.ensure_future(follow())
            stack.callback(task.cancel)
        yield client


async def _add(client: Any) -> None:
    result = await client.call_tool("add", {"a": 1, "b": 2})
    if result.is_error or result.structured_content != {"result": 3}:
        raise RuntimeError(f"a call failed: {result}")


# --- 1 and 4: throughput, latency, CPU per call ----------------------------------------------


@dataclass
class Outcome:
    """What one client process measured between the common start and its last answer."""

    started: float
    ended: float
    latencies: list[float]
    cpu: float
    errors: list[str]
    statuses: dict[int, int]


def _client_process(
    url: str,
    mode: str,
    tokens: list[str],
    calls: int,
    ready: Any,
    go: Any,
    release: Any,
    results: Any,
) -> None:
    """In a client process: connect, say so, wait for the start, call, report, wait, close."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the main process's handler: just stop

    async def run() -> None:
        statuses: dict[int, int] = {}
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(_connect(url, mode, token, statuses=statuses))
                for token in tokens
            ]
            for client in clients:
                await _add(client)  # warm: the first call imports what validating a result needs
            ready.put("ready")
            await asyncio.to_thread(go.wait)
            cpu, started = _own_cpu(), time.time()
            latencies: list[float] = []
            errors: list[str] = []

            async def loop(client: Any) -> None:
                for _ in range(calls):
                    begun = time.perf_counter()
                    try:
                        await _add(client)
                    except Exception as exc:  # noqa: BLE001 - counted and shown; the run goes on
                        errors.append(f"{type(exc).__name__}: {exc}"[:300])
                    latencies.append(time.perf_counter() - begun)

            await asyncio.gather(*(loop(client) for client in clients))
            ended = time.time()
            results.put(
                Outcome(started, ended, latencies, _own_cpu() - cpu, errors, dict(statuses))
            )
            await asyncio.to_thread(release.wait)  # the servers' CPU is read before clients close

    try:
        asyncio.run(run())
    except BaseException:  # told to the main process, which waits on one of these
        ready.put(traceback.format_exc())
        results.put(traceback.format_exc())
        raise


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


@dataclass
class Round:
    calls: int
    seconds: float
    latencies: list[float]
    cpu: dict[str, float]  # seconds per call, by side
    errors: list[str]
    statuses: dict[int, int]


def _round(url: str, mode: str, tokens: list[str], load: Load, pids: dict[str, list[int]]) -> Round:
    """One round: every client connected and warm, then all calling from one start."""
    context = multiprocessing.get_context()
    ready, results = context.Queue(), context.Queue()
    go, release = context.Event(), context.Event()
    groups = [tokens[i * load.per : (i + 1) * load.per] for i in range(load.processes)]
    processes = [
        context.Process(
            target=_client_process,
            args=(url, mode, group, load.calls, ready, go, release, results),
            daemon=True,
        )
        for group in groups
    ]
    for process in processes:
        process.start()
    finished = False
    try:
        for _ in processes:
            _expect(ready.get(timeout=LIVENESS * 3), "ready")
        before = {side: sum(cpu_seconds(pid) for pid in group) for side, group in pids.items()}
        started = time.time()
        go.set()
        outcomes = [_expect(results.get(timeout=600), "results") for _ in processes]
        after = {side: sum(cpu_seconds(pid) for pid in group) for side, group in pids.items()}
        finished = True
    finally:
        release.set()
        for process in processes:
            process.join(LIVENESS if finished else 0)  # interrupted: no waiting on them
            if process.is_alive():
                process.terminate()
                process.join()
    calls = sum(len(o.latencies) for o in outcomes)
    cpu = {side: (after[side] - before[side]) / calls for side in pids}
    cpu["clients"] = sum(o.cpu for o in outcomes) / calls
    statuses: dict[int, int] = {}
    for outcome in outcomes:
        for status, count in outcome.statuses.items():
            statuses[status] = statuses.get(status, 0) + count
    return Round(
        calls=calls,
        seconds=max(o.ended for o in outcomes) - started,
        latencies=[latency for o in outcomes for latency in o.latencies],
        cpu=cpu,
        errors=[error for o in outcomes for error in o.errors],
        statuses=statuses,
    )


def _expect(message: Any, what: str) -> Any:
    if isinstance(message, str) and message != "ready":
        raise RuntimeError(f"a client process failed before its {what}:\n{message}")
    return message


@dataclass
class Series:
    rounds: list[Round] = field(default_factory=list)

    def rates(self) -> list[float]:
        return [r.calls / r.seconds for r in self.rounds]

    def latency(self) -> Stats:
        return Stats([latency for r in self.rounds for latency in r.latencies])

    def cpu(self, side: str) -> float:
        return statistics.median(r.cpu[side] for r in self.rounds)


def throughput(cluster: Cluster, load: Load) -> None:
    """Every configuration and protocol once per round, interleaved so drift spreads evenly."""
    configurations: list[tuple[str, str, Balancer | None]] = [
        ("1 replica direct", cluster.replicas[0].url, None)
    ]
    balancers = cluster.balancers
    if smoke():  # through the code, not every configuration: a smoke run is a test's
        balancers = {max(balancers): balancers[max(balancers)]}
    for count, balancer in balancers.items():
        label = f"nginx -> {count} replica{'s' * (count > 1)}"
        configurations.append((label, f"{balancer.url}/mcp", balancer))
    tokens = cluster.tokens[: load.clients]
    series: dict[str, Series] = {}
    for _ in range(load.rounds):
        for label, url, balancer in configurations:
            pids = {
                "replicas": [r.pid for r in cluster.replicas],
                "nginx": balancer.pids() if balancer else [],
                "redis": [cluster.redis_pid],
            }
            for mode, name in MODES.items():
                run = _round(url, mode, tokens, load, pids)
                series.setdefault(f"{label}, {name}", Series()).rounds.append(run)
    _report_throughput(series, load, len(cluster.replicas))


def _report_throughput(series: dict[str, Series], load: Load, replicas: int) -> None:
    print(
        f"\n## tools/call, trivial tool: {load.clients} concurrent clients in {load.processes} "
        f"processes, {load.calls} calls each, {load.rounds} round{'s' * (load.rounds > 1)}"
    )
    print("   calls/s: median and min..max of the rounds; latency: every call, as its client")
    print("   timed it; server CPU: the replicas' and nginx's CPU time per call")
    print(
        f"{'':40} {'calls/s':>14} {'min..max':>13} {'latency':>9} {'p25..p75':>19} "
        f"{'server CPU':>11}"
    )
    for name, s in series.items():
        rates, latency = s.rates(), s.latency()
        spread = f"{min(rates):,.0f}..{max(rates):,.0f}"
        iqr = f"{format_time(latency.p25)}..{format_time(latency.p75)}"
        server = s.cpu("replicas") + s.cpu("nginx")
        print(
            f"{name:40} {statistics.median(rates):>6,.0f} calls/s {spread:>13} "
            f"{format_time(latency.median):>9} {iqr:>19} {format_time(server):>11}"
        )
    cores = os.cpu_count() or 1
    print("\n## CPU time per call in those runs, by process (median of the rounds)")
    print(
        f"   replicas: all {replicas}, idle ones too; nginx: master and workers; clients: theirs;"
    )
    print(f"   ceiling: the calls/s {cores} cores give at this CPU per call, everything counted")
    print(
        f"{'':40} {'replicas':>9} {'nginx':>9} {'server':>9} {'redis':>9} {'clients':>9} "
        f"{'ceiling':>14}"
    )
    for name, s in series.items():
        sides = [s.cpu("replicas"), s.cpu("nginx")]
        figures = [*sides, sum(sides), s.cpu("redis"), s.cpu("clients")]
        everything = sum(figures) - figures[2]
        ceiling = f"{cores / everything:>6,.0f} calls/s" if everything > 0 else "-"
        print(f"{name:40}" + "".join(f" {_cpu_time(f):>9}" for f in figures) + f" {ceiling:>14}")
    errors = [(name, e) for name, s in series.items() for r in s.rounds for e in r.errors]
    bad: dict[str, dict[int, int]] = {}
    for name, s in series.items():
        for r in s.rounds:
            for status, count in r.statuses.items():
                if status >= 400:
                    bad.setdefault(name, {})[status] = bad.get(name, {}).get(status, 0) + count
    print(f"   failed calls: {len(errors)}; HTTP answers >= 400 the clients saw: {bad or 'none'}")
    for name, error in errors[:5]:
        print(f"   {name}: {error}")


def _cpu_time(seconds: float) -> str:
    return format_time(seconds) if seconds > 0 else "0"


# --- 2: a relayed session-based call ---------------------------------------------------------

LOCAL = "session-based, through its owner A (local)"
RELAYED = "session-based, through B, relayed to A"
STATELESS = "2026-07-28, through B (no session)"


def relay(cluster: Cluster, calls: int) -> None:
    """One session opened on A, its calls sent to A or to B in turn; a 2026-07-28 client's
    calls to B in between, for reference."""
    a, b = cluster.replicas[0], cluster.replicas[1]
    first = cluster.tokens[8]

    async def run() -> dict[str, list[float]]:
        steer = _Steer()
        async with (
            _connect(a.url, "legacy", first, steer=steer) as legacy,
            _connect(b.url, MODERN, cluster.tokens[9]) as modern,
        ):

            async def local() -> None:
                steer.port = None
                await _add(legacy)

            async def relayed() -> None:
                steer.port = b.port
                await _add(legacy)

            async def stateless() -> None:
                await _add(modern)

            kinds = [(LOCAL, local), (RELAYED, relayed), (STATELESS, stateless)]
            for _ in range(scaled(20, 1)):  # warm: connections, the relay's client to A
                for _, call in kinds:
                    await call()
            samples: dict[str, list[float]] = {name: [] for name, _ in kinds}
            for i in range(calls):
                for name, call in kinds[i % 3 :] + kinds[: i % 3]:  # each goes first in turn
                    begun = time.perf_counter()
                    await call()
                    samples[name].append(time.perf_counter() - begun)
            return samples

    samples = asyncio.run(run())
    table(
        f"a session-based call sent to a replica that does not own its session, {calls} calls "
        "each, interleaved (direct, no nginx)",
        [(name, Stats(times)) for name, times in samples.items()],
        baseline=LOCAL,
    )
    _paired("   the relay's cost, paired call by call", samples[RELAYED], samples[LOCAL])


def _paired(label: str, slower: list[float], faster: list[float]) -> None:
    differences = Stats([s - f for s, f in zip(slower, faster, strict=True)])
    print(
        f"{label}: median {_signed(differences.median)} "
        f"(p25..p75 {_signed(differences.p25)}..{_signed(differences.p75)})"
    )


def _signed(seconds: float) -> str:
    return f"{seconds * 1e3:+.2f} ms"


# --- 3: a save heard on another replica ------------------------------------------------------


def hearing(cluster: Cluster, edits: int) -> None:
    """A's copy of probe.py replaced (its docstring changes) until each client hears it."""
    a, b = cluster.replicas[0], cluster.replicas[1]
    target = a.directory / "probe.py"
    listeners = [
        ("client of A (saved there), 2026-07-28", a, MODERN),
        ("client of A (saved there), session-based", a, "legacy"),
        ("client of B (other replica), 2026-07-28", b, MODERN),
        ("client of B (other replica), session-based", b, "legacy"),
    ]
    settle = scaled(0.2, 0.05)  # after all heard: a duplicate would land before the next edit

    async def run() -> tuple[dict[str, list[float]], int]:
        heard: dict[str, list[float]] = {name: [] for name, _, _ in listeners}
        woken = {name: asyncio.Event() for name, _, _ in listeners}

        def ear(name: str) -> Callable[[], None]:
            def on_change() -> None:
                heard[name].append(time.perf_counter())
                woken[name].set()

            return on_change

        samples: dict[str, list[float]] = {name: [] for name, _, _ in listeners}
        extra = 0
        async with contextlib.AsyncExitStack() as stack:
            for (name, replica, mode), token in zip(listeners, cluster.tokens[10:], strict=False):
                await stack.enter_async_context(
                    _connect(replica.url, mode, token, on_change=ear(name))
                )
            for n in range(1, edits + 1):
                for name in heard:
                    heard[name].clear()
                    woken[name].clear()
                temp = target.with_name(".probe.py.tmp")
                temp.write_text(PROBE.format(n=n))
                saved = time.perf_counter()
                os.replace(temp, target)
                waits = [asyncio.wait_for(event.wait(), LIVENESS) for event in woken.values()]
                try:
                    await asyncio.gather(*waits)
                except asyncio.TimeoutError:
                    deaf = [name for name, event in woken.items() if not event.is_set()]
                    raise RuntimeError(
                        f"edit {n}: not heard within {LIVENESS} s by {deaf}"
                    ) from None
                for name, times in heard.items():
                    samples[name].append(times[0] - saved)
                await asyncio.sleep(settle)
                extra += sum(len(times) - 1 for times in heard.values())
        return samples, extra

    samples, extra = asyncio.run(run())
    table(
        f"a plugin saved in replica A's directory (os.replace) -> the client hears its tool list "
        f"changed, {edits} edits (direct, no nginx)",
        [(name, Stats(times)) for name, times in samples.items()],
    )
    names = list(samples)
    _paired("   the cross-replica part, 2026-07-28, paired edit by edit", samples[names[2]], samples[names[0]])  # fmt: skip
    _paired("   the cross-replica part, session-based, paired edit by edit", samples[names[3]], samples[names[1]])  # fmt: skip
    worst = max(statistics.median(samples[names[2]]), statistics.median(samples[names[3]]))
    print(
        f"   goal, B's clients within 100 ms (median): {'met' if worst < 0.1 else 'MISSED'} "
        f"({format_time(worst)}); a change heard twice: {extra} time{'s' * (extra != 1)}"
    )


# --- the run ---------------------------------------------------------------------------------


def _checks(cluster: Cluster) -> None:
    """What the processes logged that a reader should know of: nginx's 5xx, tracebacks."""
    print("\n## checks")
    for count, balancer in cluster.balancers.items():
        statuses = balancer.statuses()
        failed = {status: n for status, n in statuses.items() if status.startswith("5")}
        errors = balancer.errors()
        print(
            f"   nginx -> {count}: {sum(statuses.values()):,} answers, 5xx {failed or 'none'}; "
            f"error.log {len(errors)} line{'s' * (len(errors) != 1)}"
        )
        for line in errors[:3]:
            print(f"      {line[:200]}")
    for n, replica in enumerate(cluster.replicas):
        output = replica.output()
        tracebacks = output.count("Traceback")
        warnings = [line for line in output.splitlines() if "WARNING" in line or "ERROR" in line]
        print(
            f"   replica {n + 1} ({replica.address}): {tracebacks} tracebacks, "
            f"{len(warnings)} warning or error lines"
        )
        for line in warnings[:3]:
            print(f"      {line[:200]}")


def _warm_imports() -> None:
    """Import what the clients need before the client processes fork off this one."""
    import jsonschema  # noqa: F401 - what a client's first call imports (validating results)
    import mcp  # noqa: F401
    from mcp.client.streamable_http import streamable_http_client  # noqa: F401


def main() -> None:
    stop = signal.signal(signal.SIGTERM, _terminated)  # a SIGTERM stops every process too
    try:
        _main()
    finally:
        signal.signal(signal.SIGTERM, stop)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _main() -> None:
    print(f"# agenthost cluster benchmark on {machine()}", flush=True)
    lacking = missing_services()
    if lacking:
        print(f"needs {' and '.join(lacking)} ({INSTALL}): the cluster benchmark is left out")
        if smoke():
            return
        raise SystemExit(1)
    _warm_imports()
    load = scaled(Load(), Load(processes=1, per=2, calls=3, rounds=1))
    count = scaled(3, 2)
    begun = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="agenthost-bench-cluster-") as scratch,
        _cluster(Path(scratch), count) as cluster,
    ):
        workers = len(cluster.balancers[1].pids()) - 1
        print(
            f"# {count} replicas (agenthost serve --http --redis), one redis-server, an nginx "
            f"({workers} workers) in front of the first 1..{count}; all on 127.0.0.1",
            flush=True,
        )
        throughput(cluster, load)
        relay(cluster, calls=scaled(300, 3))
        hearing(cluster, edits=scaled(20, 3))
        _checks(cluster)
    print(f"\n# {time.monotonic() - begun:.1f} s, processes started and stopped included")


if __name__ == "__main__":
    main()
