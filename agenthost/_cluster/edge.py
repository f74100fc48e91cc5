"""The outermost layer of a replica's HTTP app: each session answered by its owner.

A session lives in the memory of the replica that opened it, so its id says
which one that is: the edge prefixes the SDK's id with the replica's
(``<replica>.<id>``) on the way out and takes the prefix off on the way in. A
request for a session another replica owns is relayed there (the answer streams
back as it comes, event streams included); one for a session whose owner is gone
answers 404, so the client opens a new session, as the protocol asks. Requests
without a session (``initialize``, every 2026-07-28 request) are answered here.

A relayed request carries the client's token, checked again by the owner, so no
trust moves between replicas; the edge checks ``Host`` and ``Origin`` before it
relays (the owner sees its own name), and a signed hop header tells the owner who
the client is, for its per-address quotas. A relayed request is never relayed
again: a session id naming a replica that does not live here is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Protocol

import httpx2
from loguru import logger
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from agenthost._cluster.keys import Ring
from agenthost._cluster.record import Member
from agenthost._serve.door import answer, malformed

__all__ = ["Edge"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SID = b"mcp-session-id"
HOP = b"x-agenthost-hop"
_NOT_RELAYED = {b"host", b"origin", b"connection", b"keep-alive", b"proxy-connection", b"te",
                b"trailer", b"transfer-encoding", b"upgrade", b"content-length"}  # fmt: skip
_NOT_RETURNED = {b"connection", b"keep-alive", b"transfer-encoding", b"x-accel-buffering"}
_GONE = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'
_BUSY = (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"the replica that owns '
         b'this session did not answer in time; try again"}}')  # fmt: skip
_REPLICA = re.compile(r"[0-9a-f]{8}")  # a replica's id: anything else names none


class Members(Protocol):
    """What the edge asks of this replica (see ``replica.Replica``)."""

    replica: str
    ring: Ring

    async def owner(self, replica: str) -> Member | None: ...
    def http(self) -> httpx2.AsyncClient: ...
    def lost(self, replica: str) -> None: ...


class Edge:
    """ASGI middleware routing each session to the replica that owns it."""

    def __init__(self, app: Any, replica: Members, security: TransportSecuritySettings) -> None:
        self._app = app
        self._replica = replica
        self._security = TransportSecurityMiddleware(security)
        self._prefix = f"{replica.replica}.".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/mcp":
            await self._app(scope, receive, send)
            return
        hop = _header(scope, HOP)
        sid = _header(scope, SID)
        headers = [(k, v) for k, v in scope["headers"] if not k.lower().startswith(b"x-agenthost-")]
        scope = {**scope, "headers": headers}
        if hop is not None:  # relayed by a peer: the client it vouches for, if it signed
            client = self._replica.ring.verify(
                hop, self._replica.replica, scope["method"], sid or ""
            )
            if client:
                scope["client"] = (client, 0)
        if sid is None:
            await self._here(scope, receive, send)
            return
        owner, dot, own = sid.partition(".")
        if dot and owner == self._replica.replica:
            scope["headers"] = [(k, own.encode() if k.lower() == SID else v) for k, v in headers]
            await self._here(scope, receive, send)
            return
        named = dot and hop is None and _REPLICA.fullmatch(owner) is not None
        member = await self._replica.owner(owner) if named else None
        if member is None:
            await _gone(send)
            return
        await self._relay(member, sid, scope, receive, send)

    async def _here(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer here, naming this replica in the session id the SDK hands out."""

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, self._prefix + v if k.lower() == SID else v)
                           for k, v in message.get("headers", [])]  # fmt: skip
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, named)

    async def _relay(
        self, member: Member, sid: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        misshapen = malformed(scope)  # what the owner's door would refuse unread
        if misshapen is not None:
            await answer(send, misshapen)
            return
        problem = await self._security.validate_request(
            Request(scope), is_post=scope["method"] == "POST"
        )
        if problem is not None:
            await problem(scope, receive, send)
            return
        target = httpx2.URL(member.url)
        client = scope.get("client")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _NOT_RELAYED]
        headers += [
            (b"host", target.netloc),
            (HOP, self._replica.ring.sign(
                member.replica, str(client[0]) if client else "", scope["method"], sid
            ).encode()),
        ]  # fmt: skip
        body = _Body(receive) if scope["method"] == "POST" else None
        http = self._replica.http()
        request = http.build_request(
            scope["method"],
            target.copy_with(query=scope.get("query_string") or None),
            headers=headers,
            content=body,
        )
        try:
            response = await http.send(request, stream=True)
        except httpx2.ConnectError:
            self._replica.lost(member.replica)
            await _gone(send)  # refused: nothing reached the owner, the client opens a new session
            return
        except httpx2.ConnectTimeout:  # alive, maybe, but slow: the session may well be there
            await _json(send, 503, _BUSY, [(b"retry-after", b"1")])
            return
        except httpx2.HTTPError as exc:
            logger.warning("cluster: replica {} failed a relayed request: {}", member.replica, exc)
            await _failed(send, member.replica)
            return
        try:
            await _stream(response, send, body, receive, member.replica)
        finally:
            await response.aclose()


async def _stream(
    response: httpx2.Response, send: Send, body: _Body | None, receive: Receive, owner: str
) -> None:
    """The owner's answer, each chunk passed on as it arrives; a client that hangs up
    closes the relayed request (which cancels a call on the owner)."""
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _NOT_RETURNED]
    headers.append((b"x-accel-buffering", b"no"))  # a proxy in front must not hold events
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})

    async def pump() -> None:
        try:
            async for data in response.aiter_raw():
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except httpx2.HTTPError as exc:
            logger.warning("cluster: replica {} broke off a relayed answer: {}", owner, exc)
            return  # incomplete on purpose: the client sees the connection fail
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    if body is not None and not body.done:  # the client is still sending: it is there
        await pump()
        return
    relay, gone = asyncio.ensure_future(pump()), asyncio.ensure_future(_hung_up(receive))
    try:
        await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        relay.cancel()
        gone.cancel()
        await asyncio.gather(relay, gone, return_exceptions=True)  # a client gone mid-send


async def _hung_up(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _Body:
    """The request body as it arrives, for httpx2 to send on."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self.done:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise httpx2.ReadError("the client hung up while sending its request")
            self.done = not message.get("more_body", False)
            yield bytes(message.get("body", b""))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _gone(send: Send) -> None:
    await _json(send, 404, _GONE)


async def _failed(send: Send, owner: str) -> None:
    message = f"the replica that owns this session ({owner}) failed while answering"
    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"%s"}}' % message.encode()
    await _json(send, 502, body)


async def _json(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    with contextlib.suppress(Exception):
        await send({"type": "http.response.body", "body": body})
