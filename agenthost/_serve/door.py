"""The front door of the HTTP server: what a request passes before the SDK sees it.

In order: the caller's request rate (see ``limits``: 429 with ``Retry-After``);
only GET, POST and DELETE, and a body on POST alone; a token the SDK will
refuse goes straight to it (401, nothing else spent on it); ``Host`` and
``Origin`` (see ``http.guard``); the body must arrive within its time and size
and fit the caller's memory quota; it is read strictly (see ``gate``: the SDK
would keep the last of repeated keys and say nothing to a bad id); then the
caller's other quotas, and an ``initialize`` must be small, because the session
it opens keeps it.

The door keeps its own registry of the sessions it let open, by caller and
address. The SDK keeps a session for 30 minutes of quiet and its dispatcher
holds on to the last request it parsed (about 25 times the body) until the
next one arrives, so the door closes a session that does not finish its
handshake in time or stays idle, and after a large request sends its session a
notification nobody handles, which makes the dispatcher let go of the request.
Both go through the SDK's own HTTP interface, as a client's would.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import ipaddress
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request

from agenthost._serve.gate import INVALID_REQUEST, Ids, Refusal, read_message, refusal
from agenthost._serve.limits import Limits, Usage
from agenthost._serve.tokens import TokenTable

__all__ = ["Door", "answer", "held", "is_loopback", "malformed"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 4 * 1024 * 1024  # bytes of a request body (the SDK's own limit)
RELEASE_OVER = 64 * 1024  # bytes of a request after which its session is told to let go of it
TOO_MANY = -32029  # JSON-RPC error code of a 429 (server-defined range)
_RELEASE = b'{"jsonrpc":"2.0","method":"notifications/agenthost/released"}'
_TICKET = "agenthost.ticket"  # where a request's place in its caller's counts sits in its scope


@dataclass(slots=True, eq=False)
class _Session:
    """A session the door let open: whose it is, and what it is doing."""

    sid: str
    caller: str
    address: str
    headers: list[tuple[bytes, bytes]]
    opened: float = field(default_factory=time.monotonic)
    last: float = field(default_factory=time.monotonic)
    initialized: bool = False
    busy: int = 0  # requests and streams of it in flight
    ids: Ids = field(default_factory=Ids)


class _Ticket:
    """A request's place in its caller's counts, given back by the last of its holders."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._holders = 1

    def hold(self) -> None:
        self._holders += 1

    def drop(self) -> None:
        self._holders -= 1
        if self._holders == 0:
            self._release()


@contextlib.contextmanager
def held(request: Any) -> Iterator[None]:
    """Keep the HTTP request behind a handler counted while the handler runs, however
    soon its client hangs up (``request`` is the handler context's ``request``)."""
    scope = getattr(request, "scope", None)
    ticket = scope.get(_TICKET) if isinstance(scope, MutableMapping) else None
    if ticket is None:
        yield
        return
    ticket.hold()
    try:
        yield
    finally:
        ticket.drop()


class Door:
    """ASGI middleware in front of the SDK's streamable HTTP app (see the module docstring)."""

    def __init__(
        self,
        app: App,
        *,
        limits: Limits,
        security: TransportSecuritySettings,
        verifier: TokenTable | None,
        path: str = "/mcp",
    ) -> None:
        self._app = app
        self._limits = limits
        self._security = TransportSecurityMiddleware(security)
        self._verifier = verifier
        self._path = path
        self._usage: dict[str, Usage] = {}
        self._sessions: dict[str, _Session] = {}
        self._addresses: collections.Counter[str] = collections.Counter()
        self._chores: set[asyncio.Task[None]] = set()
        self._sweeping: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path:
            await self._app(scope, receive, send)
            return
        caller = await self._caller(scope)
        usage = self._usage_of(caller or f"address {_address(scope)}")
        wait = usage.take(self._limits.rate)
        if wait:
            await answer(
                send, _quota(f"made over {self._limits.rate:g} requests a second", None, wait)
            )
            return
        misshapen = malformed(scope)
        if misshapen is not None:
            await answer(send, misshapen)
            return
        if caller is None:  # the SDK answers 401: nothing else to spend on it
            await self._app(scope, receive, send)
            return
        problem = await self._security.validate_request(
            Request(scope), is_post=scope["method"] == "POST"
        )
        if problem is not None:
            await problem(scope, receive, send)
            return
        self._sweep_soon()
        if scope["method"] == "POST":
            await self._post(scope, receive, send, caller, usage)
        elif scope["method"] == "GET":
            await self._stream(scope, receive, send, usage)
        else:
            status, _ = await _forward(self._app, scope, receive, send)
            sid = _header(scope, b"mcp-session-id")
            if scope["method"] == "DELETE" and sid and status < 400:
                self._forget(sid)

    async def _caller(self, scope: Scope) -> str | None:
        """Whose quota a request spends: its token's session, or its address without tokens;
        ``None`` for a token the SDK will refuse."""
        if self._verifier is None:
            return f"address {_address(scope)}"
        kind, _, token = (_header(scope, b"authorization") or "").partition(" ")
        access = await self._verifier.verify_token(token) if kind.lower() == "bearer" else None
        return f"caller {access.subject}" if access is not None else None

    def _usage_of(self, key: str) -> Usage:
        usage = self._usage.get(key)
        if usage is None:
            usage = self._usage[key] = Usage()
        return usage

    # --- POST: one JSON-RPC message -----------------------------------------------------------
    async def _post(
        self, scope: Scope, receive: Receive, send: Send, caller: str, usage: Usage
    ) -> None:
        body = await self._body(scope, receive, usage)
        if body is None:
            return  # the client went away
        message = body if isinstance(body, Refusal) else read_message(body)
        if isinstance(message, Refusal):
            await answer(send, message)
            return
        assert isinstance(body, bytes)
        weight = _weight(body)
        problem = self._admit(scope, message, len(body), caller, usage) or self._afford(
            usage, weight, message.get("id")
        )
        if problem is not None:
            await answer(send, problem)
            return
        method, request_id = message.get("method"), message.get("id")
        is_request = isinstance(method, str) and "id" in message
        session = self._sessions.get(_header(scope, b"mcp-session-id") or "")
        used, body = self._translate(session, message, body, scope)
        opening = _opening(scope, message)
        address = _address(scope) if opening else None
        with self._holding(scope, usage, session, _kind(message), address, weight):
            alias = (used, request_id) if used is not request_id else None
            try:
                status, sid = await _forward(self._app, scope, receive, send, body, alias)
            finally:
                if session is not None and is_request:
                    session.ids.answered(used)
        if session is not None and status == 404:
            self._forget(session.sid)  # the SDK no longer knows it
        elif session is not None and len(body) > RELEASE_OVER:
            self._chore(self._release(session))
        elif opening and sid and status < 400:
            self._open(sid, caller, usage, scope)

    @contextlib.contextmanager
    def _holding(
        self,
        scope: Scope,
        usage: Usage,
        session: _Session | None,
        kind: str,
        opening: str | None,
        weight: int,
    ) -> Iterator[None]:
        """Count a request as its caller's (a call, a stream, a session being opened, or
        nothing: a notification) while it is served, and its session as busy. A client
        that hangs up does not end a call the SDK still runs: the call's handler holds
        the request (see :func:`held`), and the counts drop when both are done."""
        setattr(usage, kind, getattr(usage, kind) + 1)
        usage.weight += weight
        if opening is not None:
            self._addresses[opening] += 1
        if session is not None:
            session.busy += 1

        def release() -> None:
            setattr(usage, kind, getattr(usage, kind) - 1)
            usage.weight -= weight
            if opening is not None:
                self._addresses[opening] -= 1
                if self._addresses[opening] <= 0:
                    del self._addresses[opening]
            if session is not None:
                session.busy -= 1
                session.last = time.monotonic()

        ticket = scope[_TICKET] = _Ticket(release)
        try:
            yield
        finally:
            ticket.drop()

    def _afford(self, usage: Usage, weight: int, request_id: Any) -> Refusal | None:
        """The refusal for a request whose parsed form would take the caller past the
        memory its requests in flight may hold (see :func:`_weight`), or ``None``."""
        budget = self._limits.inflight_mb * 2**20
        if weight > budget:
            return refusal(
                INVALID_REQUEST,
                f"this request would take about {weight // 2**20} MB once parsed (objects, "
                f"arrays and text take more room than their JSON); a request may take "
                f"{self._limits.inflight_mb:g} MB",
                request_id,
                413,
            )
        if usage.weight + weight > budget:
            return _memory_quota(usage, request_id)
        return None

    async def _body(self, scope: Scope, receive: Receive, usage: Usage) -> bytes | Refusal | None:
        """The whole body, or the refusal for one too large, too slow, or past what the
        caller's requests may hold (a body on its way counts too)."""
        declared = _header(scope, b"content-length") or ""
        if declared.isdigit() and int(declared) > MAX_BODY:
            return _too_large(int(declared))
        budget = self._limits.inflight_mb * 2**20
        if declared.isdigit() and usage.weight + int(declared) > budget:
            return _memory_quota(usage, None)
        counted = int(declared) if declared.isdigit() else 0
        usage.weight += counted
        try:
            return await self._read(receive, usage, budget if not counted else math.inf)
        finally:
            usage.weight -= counted

    async def _read(self, receive: Receive, usage: Usage, budget: float) -> bytes | Refusal | None:
        """The body's chunks, against one timer (a task per ``wait_for`` costs every request)."""
        task = asyncio.current_task()
        assert task is not None
        late = False

        def cut() -> None:
            nonlocal late
            late = True
            task.cancel()

        timer = asyncio.get_running_loop().call_later(self._limits.body_s, cut)
        chunks: list[bytes] = []
        size = 0
        more = True
        try:
            while more:
                try:
                    message = await receive()
                except asyncio.CancelledError:
                    if not late:
                        raise
                    if sys.version_info >= (3, 11):
                        task.uncancel()
                    return refusal(
                        INVALID_REQUEST,
                        f"the request body did not arrive within {self._limits.body_s:g} s",
                        status=408,
                    )
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > MAX_BODY:
                    return _too_large(size)
                if usage.weight + size > budget:  # chunked: what came so far counts
                    return _memory_quota(usage, None)
                chunks.append(chunk)
                more = bool(message.get("more_body"))
        finally:
            timer.cancel()
        return b"".join(chunks)

    def _admit(
        self, scope: Scope, message: dict[str, Any], size: int, caller: str, usage: Usage
    ) -> Refusal | None:
        """The refusal for a request past a limit or a quota of its caller, or ``None``."""
        limits = self._limits
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize" and size > limits.initialize_kb * 1024:
            return refusal(
                INVALID_REQUEST,
                f"initialize is {size // 1024} kB; a request that opens a session may be "
                f"{limits.initialize_kb} kB at most",
                request_id,
                413,
            )
        if _opening(scope, message):
            address = _address(scope)
            if len(usage.sessions) + usage.opening >= limits.sessions:
                return _quota(
                    f"has {limits.sessions} sessions open", request_id, limits.handshake_s
                )
            if self._addresses[address] >= limits.sessions_per_address:
                held = f"has {limits.sessions_per_address} sessions open from {address}"
                return _quota(held, request_id, limits.handshake_s)
        kind = _kind(message)
        if kind == "calls" and usage.calls >= limits.calls:
            return _quota(f"has {limits.calls} requests in flight", request_id, 1)
        if kind == "streams" and usage.streams >= limits.streams:
            return _quota(f"has {limits.streams} event streams open", request_id, 1)
        return None

    def _translate(
        self, session: _Session | None, message: dict[str, Any], body: bytes, scope: Scope
    ) -> tuple[Any, bytes]:
        """The id the SDK gets for this request and the body it reads (see ``gate.Ids``)."""
        request_id = message.get("id")
        if session is None:
            return request_id, body
        session.headers = list(scope["headers"])
        session.last = time.monotonic()
        method = message.get("method")
        if method == "notifications/initialized":
            session.initialized = True
        params = message.get("params")
        if method == "notifications/cancelled" and isinstance(params, dict):
            cancelled = params.get("requestId")
            target = session.ids.cancelling(cancelled)
            if target is not cancelled:
                params["requestId"] = target
                return request_id, json.dumps(message).encode()
        if not isinstance(method, str) or "id" not in message:
            return request_id, body
        used = session.ids.admit(request_id)
        if used is request_id:
            return request_id, body
        return used, json.dumps({**message, "id": used}).encode()

    # --- GET: the session's event stream ------------------------------------------------------
    async def _stream(self, scope: Scope, receive: Receive, send: Send, usage: Usage) -> None:
        if usage.streams >= self._limits.streams:
            await answer(send, _quota(f"has {self._limits.streams} event streams open", None, 1))
            return
        session = self._sessions.get(_header(scope, b"mcp-session-id") or "")
        usage.streams += 1
        if session is not None:
            session.busy += 1
        try:
            await _forward(self._app, scope, receive, send)
        finally:
            usage.streams -= 1
            if session is not None:
                session.busy -= 1
                session.last = time.monotonic()

    # --- the sessions the door let open -------------------------------------------------------
    def _open(self, sid: str, caller: str, usage: Usage, scope: Scope) -> None:
        headers = [*scope["headers"], (b"mcp-session-id", sid.encode())]
        session = _Session(sid, caller, _address(scope), headers)
        self._sessions[sid] = session
        self._addresses[session.address] += 1
        usage.sessions.add(sid)

    def _forget(self, sid: str) -> _Session | None:
        session = self._sessions.pop(sid, None)
        if session is not None:
            self._addresses[session.address] -= 1
            if self._addresses[session.address] <= 0:
                del self._addresses[session.address]
            self._usage_of(session.caller).sessions.discard(sid)
        return session

    def _sweep_soon(self) -> None:
        if self._sweeping is None:
            self._sweeping = asyncio.get_running_loop().call_later(1.0, self._sweep)

    def _sweep(self) -> None:
        """Close sessions past their handshake or idle time; forget callers holding nothing."""
        self._sweeping = None
        now = time.monotonic()
        limits = self._limits
        for session in list(self._sessions.values()):
            if not session.initialized and now - session.opened > limits.handshake_s:
                why = f"did not finish its handshake within {limits.handshake_s:g} s"
            elif session.busy <= 0 and now - session.last > limits.idle_s:
                why = f"was idle for {limits.idle_s:g} s"
            else:
                continue
            logger.info("closing MCP session {} of {}: it {}", session.sid[:8], session.caller, why)
            self._forget(session.sid)
            self._chore(self._inside(session, "DELETE"))
        for key, usage in list(self._usage.items()):
            if usage.idle and now - usage.stamp > 2 / limits.rate + 1:
                del self._usage[key]
        if self._sessions or self._usage:
            self._sweep_soon()

    async def _release(self, session: _Session) -> None:
        await self._inside(session, "POST", _RELEASE)

    async def _inside(self, session: _Session, method: str, body: bytes = b"") -> None:
        """A request of the door's own to the SDK for ``session``, with the session's headers."""
        skip = {b"content-length", b"content-type", b"accept", b"last-event-id"}
        headers = [(k, v) for k, v in session.headers if k.lower() not in skip]
        headers += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ]
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": self._path,
            "raw_path": self._path.encode(), "query_string": b"", "root_path": "",
            "headers": headers, "client": None, "server": None, "state": {},
        }  # fmt: skip
        await _forward(self._app, scope, _once(body), _discard)

    def _chore(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)


async def _forward(
    app: App,
    scope: Scope,
    receive: Receive,
    send: Send,
    body: bytes | None = None,
    alias: tuple[Any, Any] | None = None,
) -> tuple[int, str | None]:
    """Run the SDK's app; its status and session id. ``body`` replaces the one already read;
    ``alias`` (the id the SDK knew, the client's) is turned back in the answer."""
    answered: dict[str, Any] = {"status": 0, "sid": None}
    swap = (json.dumps(alias[0]).encode(), json.dumps(alias[1]).encode()) if alias else None

    async def watch(message: Message) -> None:
        if message["type"] == "http.response.start":
            answered["status"] = message["status"]
            headers = list(message.get("headers", []))
            answered["sid"] = next(
                (v.decode("latin-1") for k, v in headers if k.lower() == b"mcp-session-id"), None
            )
            if swap is not None:  # the body changes length
                message = {**message, "headers": [(k, v) for k, v in headers
                                                  if k.lower() != b"content-length"]}  # fmt: skip
        elif message["type"] == "http.response.body" and swap is not None:
            message = {**message, "body": message.get("body", b"").replace(*swap)}
        await send(message)

    await app(scope, receive if body is None else _once(body, receive), watch)
    return answered["status"], answered["sid"]


def _once(body: bytes, then: Receive | None = None) -> Receive:
    """A ``receive`` that gives ``body`` first, then what ``then`` gives (a disconnect without)."""
    given = False

    async def receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive


async def _discard(message: Message) -> None:
    return None


async def answer(send: Send, refused: Refusal) -> None:
    """Send a refusal: its status, its JSON-RPC error, ``Retry-After`` on a 429."""
    body = refused.body
    error = refused.answer.get("error") or {}
    wait = (error.get("data") or {}).get("retryAfter") if refused.status == 429 else None
    headers = [(b"retry-after", str(wait).encode())] if wait else []
    await send(
        {
            "type": "http.response.start",
            "status": refused.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _quota(held: str, request_id: Any, wait: float) -> Refusal:
    seconds = max(1, math.ceil(wait))
    return Refusal(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {
                "code": TOO_MANY,
                "message": f"Too many requests: this caller {held}; retry in {seconds} s",
                "data": {"retryAfter": seconds},
            },
        },
        429,
    )


def _memory_quota(usage: Usage, request_id: Any) -> Refusal:
    return _quota(f"has {usage.weight // 2**20} MB of requests in flight", request_id, 1)


def _too_large(size: int) -> Refusal:
    return refusal(
        INVALID_REQUEST,
        f"the request body is {size // 1024} kB or more; the limit is {MAX_BODY // 1024} kB",
        status=413,
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _address(scope: Scope) -> str:
    """The client's address; every loopback address is this machine's (a local process
    may send from any of 127.0.0.0/8, and must not get a quota for each)."""
    client = scope.get("client")
    if not client:
        return "unknown"
    address = str(client[0])
    return "this machine" if is_loopback(address) else address


@functools.lru_cache(maxsize=4096)
def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _weight(body: bytes) -> int:
    """About what ``body`` takes once parsed: a Python object or list costs far more
    than its two bytes of JSON (the SDK's models of 3.9 MB of ``{}`` take 200 MB)."""
    containers = body.count(b"{") + body.count(b"[")
    text = (3 if body.isascii() else 12) * len(body)  # kept about three times, 4 bytes a char
    return text + 128 * containers + 64 * body.count(b",")


def malformed(scope: Scope) -> Refusal | None:
    """Why a request to /mcp is refused before anything is read: only GET, POST and DELETE,
    and a body on POST alone."""
    if scope["method"] not in ("GET", "POST", "DELETE"):
        return refusal(INVALID_REQUEST, "/mcp answers GET, POST and DELETE", status=405)
    if scope["method"] != "POST" and _has_body(scope):
        return refusal(INVALID_REQUEST, f"{scope['method']} /mcp takes no body")
    return None


def _has_body(scope: Scope) -> bool:
    length = _header(scope, b"content-length")
    return (length is not None and length.strip() not in ("", "0")) or bool(
        _header(scope, b"transfer-encoding")
    )


def _opening(scope: Scope, message: dict[str, Any]) -> bool:
    """Whether ``message`` opens a session: a handshake-era initialize without one."""
    return (
        message.get("method") == "initialize"
        and not _header(scope, b"mcp-session-id")
        and not _modern(scope)
    )


def _kind(message: dict[str, Any]) -> str:
    """What a message holds while it is served, as a :class:`Usage` field."""
    if not isinstance(message.get("method"), str) or "id" not in message:
        return "notes"  # a notification or a client's answer: held by no quota
    if message["method"] == "initialize":
        return "opening"
    return "streams" if message["method"] == "subscriptions/listen" else "calls"


def _modern(scope: Scope) -> bool:
    """Whether the SDK serves this request at a protocol version without sessions."""
    version = _header(scope, b"mcp-protocol-version")
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
