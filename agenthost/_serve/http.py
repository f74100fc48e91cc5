"""``agenthost serve --http``: the MCP server over streamable HTTP at ``/mcp``.

Who may call is decided by a token file mapping bearer tokens to a session name
and its grants; the SDK's bearer middleware answers 401 to a missing or unknown
token and ties each HTTP session to the token that opened it. Without tokens the
server only binds a loopback address. Whatever the address, ``Host`` and
``Origin`` are checked against DNS rebinding (see :func:`guard`).

uvicorn re-raises the signal it caught once it has stopped, and waits for open
event streams before it stops: here the first SIGINT/SIGTERM drains the calls in
flight (each still answers), ends the streams, and the process exits 0. SIGTERM
is how orchestrators stop a replica behind a balancer, so it stops in the order
that loses no request: ``/readyz`` answers 503 at once while requests are still
served normally, for ``drain_grace`` seconds that a balancer polling it needs to
notice; then the listener closes (a balancer re-sends a refused connection
elsewhere) and idle connections with it; then the drain. Ctrl-C skips the grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from types import FrameType
from typing import Any, Protocol

import uvicorn
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from uvicorn.protocols.http.h11_impl import H11Protocol

from agenthost._serve.door import Door, is_loopback
from agenthost._serve.health import Health
from agenthost._serve.limits import Limits
from agenthost._serve.server import McpServer
from agenthost._serve.tokens import Caller, TokenTable

__all__ = ["Replicated", "guard", "is_loopback", "parse_address", "serve_http"]

GRACE = 3.0  # seconds the calls in flight get to finish once a stop is asked for
DRAIN_GRACE = 1.0  # seconds between /readyz turning 503 on SIGTERM and the listener closing
SETTLE = 0.5  # seconds requests on connections accepted before the listener closed get


class Replicated(Protocol):
    """What a cluster adds to the HTTP server (see ``agenthost._cluster``)."""

    def wrap(self, app: Any, security: TransportSecuritySettings) -> Any:
        """The ASGI app in front of ``app``: it routes each session to its replica (and
        checks ``Host`` and ``Origin`` of what it relays)."""
        ...

    def joined(self, url: str) -> AbstractAsyncContextManager[None]:
        """Membership while the server at ``url`` listens; entered once plugins are loaded."""
        ...

    def state(self) -> str:
        """``ready``, or why not (``degraded``: the cluster's bus is unreachable)."""
        ...

    async def leaving(self) -> None:
        """This replica stops taking new work: peers should stop sending it any."""
        ...


def parse_address(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` as (host, port); host defaults to 127.0.0.1."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--http wants [HOST:]PORT with a port from 0 to 65535, got {text!r}")
    return host, int(port)


class _Uvicorn(uvicorn.Server):
    """uvicorn whose signals ask for a drain and are not re-raised afterwards."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], object]) -> None:
        super().__init__(config)
        self._on_stop = on_stop
        self._stopping = False
        self.interactive = False  # stopped with Ctrl-C: nobody's balancer to wait for

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self._signalled) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _signalled(self, sig: int, frame: FrameType | None) -> None:
        if self._stopping:  # a second signal: stop waiting
            self.force_exit = self.should_exit = True
            return
        self._stopping = True
        self.interactive = sig == signal.SIGINT
        self._on_stop()

    def refuse(self) -> None:
        """Close the listener: a new connection is refused."""
        for listening in getattr(self, "servers", ()):
            listening.close()

    def hang_up(self) -> None:
        """Close the idle connections; a busy one closes after its answer."""
        for connection in list(self.server_state.connections):
            connection.shutdown()


async def serve_http(
    server: McpServer,
    host: str,
    port: int,
    *,
    tokens: Mapping[str, Caller] | None = None,
    hosts: Iterable[str] = (),
    origins: Iterable[str] = (),
    limits: Limits | None = None,
    ready: Callable[[str], None] = lambda url: None,
    stop: asyncio.Event | None = None,
    grace: float = GRACE,
    drain_grace: float = DRAIN_GRACE,
    cluster: Replicated | None = None,
) -> None:
    """Serve ``server`` at ``http://host:port/mcp`` until SIGINT/SIGTERM or ``stop`` is set.

    ``ready`` gets the URL once the plugins are loaded and the port listens (port 0
    picks a free one). ``Host`` and ``Origin`` are checked (see :func:`guard`;
    ``hosts`` and ``origins`` add a proxy's or a page's); ``limits`` are each caller's
    quotas. Stopping drains: calls in flight get ``grace`` seconds, then an error result;
    after SIGTERM or ``stop``, ``drain_grace`` seconds first pass with ``/readyz`` at 503.
    ``cluster`` makes this server one replica of many.
    """
    if not tokens and not is_loopback(host):
        raise ValueError(f"refusing to serve {host} without tokens")
    loop = asyncio.get_running_loop()
    stopping = stop if stop is not None else asyncio.Event()
    state = "loading"
    readiness = lambda: cluster.state() if state == "ready" and cluster else state  # noqa: E731
    with _bound(host, port) as (listener, url):
        security = guard(host, listener.getsockname()[1], hosts, origins)
        config = _config(server, host, tokens, security, limits or Limits(), readiness, cluster)
        web = _Uvicorn(config, functools.partial(loop.call_soon_threadsafe, stopping.set))

        async def stop_when_asked() -> None:
            nonlocal state
            await stopping.wait()
            state = "draining"  # /readyz: 503 from now on; requests are still served
            await _stop(web, server, cluster, 0.0 if web.interactive else drain_grace, grace)

        async with server.running(), _member(cluster, url):
            listener.listen(2048)  # only now: until then a balancer's connection is refused
            state = "ready"
            watcher = asyncio.ensure_future(stop_when_asked())
            ready(url)
            try:
                await web.serve(sockets=[listener])
            finally:
                watcher.cancel()


async def _stop(
    web: _Uvicorn, server: McpServer, cluster: Replicated | None, pause: float, grace: float
) -> None:
    """Stop in the order that loses no request (see the module docstring)."""
    if cluster is not None:
        await cluster.leaving()
    await asyncio.sleep(pause)
    web.refuse()
    if pause:  # a connection accepted just before holds a request on its way: answer it
        await asyncio.sleep(SETTLE)
    web.hang_up()
    await server.drain(grace)
    web.should_exit = True


def _member(cluster: Replicated | None, url: str) -> AbstractAsyncContextManager[None]:
    return cluster.joined(url) if cluster is not None else contextlib.nullcontext()


def guard(
    host: str, port: int, hosts: Iterable[str] = (), origins: Iterable[str] = ()
) -> TransportSecuritySettings:
    """What ``Host`` and ``Origin`` a request may carry, for any bind address: the bound
    name and port (on loopback its other spellings too, on a wildcard address this
    machine's names and addresses), plus ``hosts``, and pages from those or ``origins``.
    A page elsewhere (or a sandboxed one, ``Origin: null``) that rebinds a name to this
    server is refused, token or not: the SDK does this by itself only for ``127.0.0.1``,
    ``localhost`` and ``::1``."""
    names = {host}
    if is_loopback(host):
        names |= {"localhost", "127.0.0.1", "::1"}
    if host in ("0.0.0.0", "::", ""):
        names |= _machine_names()
    spelled = {f"[{n}]" if ":" in n else n for n in names if n}
    allowed = {f"{n}:{port}" for n in spelled}
    for name in hosts:  # a proxy's: as given with its port, else on ours or the default one
        given = _with_port(name)
        bare = f"[{name}]" if ":" in name and not given else name  # an IPv6 address
        allowed |= {given} if given else {bare, f"{bare}:{port}"}
    pages = [f"{scheme}://{h}" for h in sorted(allowed) for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(allowed),
        allowed_origins=[*pages, *origins],
    )


def _with_port(name: str) -> str | None:
    """``name`` if it already names a port (``lb:8080``, ``[::1]:8080``), else None."""
    head, colon, tail = name.rpartition(":")
    if colon and tail.isdigit() and (not head.count(":") or head.endswith("]")):
        return name
    return None


def _machine_names() -> set[str]:
    """This machine's names and addresses, as a client that reaches a wildcard bind uses."""
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):
        for *_, address in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(address[0]))
    return names


def _config(
    server: McpServer,
    host: str,
    tokens: Mapping[str, Caller] | None,
    security: TransportSecuritySettings,
    limits: Limits,
    state: Callable[[], str] = lambda: "ready",
    cluster: Replicated | None = None,
) -> uvicorn.Config:
    app = _app(server, host, tokens, security, limits)
    return uvicorn.Config(
        Health(cluster.wrap(app, security) if cluster is not None else app, state),
        http=_head_limited(limits.head_s),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,
        access_log=False,
    )


def _app(
    server: McpServer,
    host: str,
    tokens: Mapping[str, Caller] | None,
    security: TransportSecuritySettings,
    limits: Limits,
) -> Any:
    """The SDK's streamable HTTP app at ``/mcp`` behind our :class:`Door`; with tokens,
    behind its bearer middleware too. The door closes idle sessions; the SDK's own
    idle timeout stays as a backstop."""
    verifier = TokenTable(tokens) if tokens else None
    auth = (
        AuthSettings(issuer_url="http://localhost", resource_server_url=None)  # type: ignore[arg-type]
        if verifier
        else None
    )
    app = server.server.streamable_http_app(
        streamable_http_path="/mcp",
        host=host,
        auth=auth,
        token_verifier=verifier,
        transport_security=security,
        session_idle_timeout=limits.idle_s + 60,
    )
    return Door(app, limits=limits, security=security, verifier=verifier)


def _head_limited(seconds: float) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with a time limit on each request head.

    uvicorn closes a connection idle between requests, but one that sends a head
    a byte at a time (slowloris) it keeps forever. The clock runs from the
    connection (or the end of the last answer) until a head is complete.
    """

    class HeadLimited(H11Protocol):
        _head: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a head arrived
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._head = self.loop.call_later(seconds, self._late)

        def _disarm(self) -> None:
            if self._head is not None:
                self._head.cancel()
                self._head = None

        def _late(self) -> None:
            self._head = None
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being answered
            if not self.transport.is_closing():
                self.transport.write(_TOO_SLOW)
                self.transport.close()

    return HeadLimited


_TOO_SLOW = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: 41\r\n\r\nthe request head did not arrive in time\r\n"
)


@contextlib.contextmanager
def _bound(host: str, port: int) -> Iterator[tuple[socket.socket, str]]:
    """A bound socket, not yet listening, and the URL it serves (port 0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off only on sockets that say
    # TCP, and an answer written in two parts would otherwise wait ~40 ms for an ACK
    with socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        bound_host, bound_port = listener.getsockname()[:2]
        shown = f"[{bound_host}]" if family == socket.AF_INET6 else bound_host
        yield listener, f"http://{shown}:{bound_port}/mcp"
