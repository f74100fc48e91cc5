"""This process as one replica of a cluster (``serve --http ... --redis URL``).

Redis holds one record per replica under ``<name>:replica:<id>``: its address,
state, agenthost version, the content hash of each plugin it serves and, by a
hash of each name, the tools and their permissions. A heartbeat rewrites it every
:data:`BEAT_S` seconds with a time to live of :data:`TTL_S`, so a killed replica
drops out by itself; a clean stop deletes it. The id is new on every start, so a
session id a dead process handed out can never reach its successor. Each beat
also reads every other record: routing a session to its owner needs no Redis
round trip, and keeps working from the last read while Redis is away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
import redis.asyncio as aioredis
from loguru import logger
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import ServerEvent, SubscriptionBus
from mcp.server.transport_security import TransportSecuritySettings
from redis.exceptions import AuthenticationError, RedisError

from agenthost._cluster.bus import RedisSubscriptionBus, decode, encode
from agenthost._cluster.edge import Edge
from agenthost._cluster.keys import Ring, RingCodec, new_key, parse_ring
from agenthost._cluster.record import Member, tool_key
from agenthost._serve.server import McpServer
from agenthost._version import __version__

__all__ = ["BEAT_S", "TTL_S", "ClusterError", "Replica"]

BEAT_S = 1.0  # seconds between heartbeats
TTL_S = 5.0  # seconds a replica's record outlives its last heartbeat
TIMEOUT_S = 1.0  # seconds any one Redis command may take: Redis is never on a call's path
CONNECT_S = 3.0  # seconds a relay waits to connect: a refusal comes at once, so only a
# machine that is gone, or a replica too starved to run its loop, takes this long
REREAD_S = 0.1  # seconds between two reads of the members for an id not known yet


class ClusterError(Exception):
    """This replica cannot join its cluster, and waiting would not help."""


class Replica:
    """Membership, the shared bus and the key ring, for one :class:`McpServer`.

    It is the server's ``Peers`` (buses and where a tool is served) and the HTTP
    server's ``Replicated`` (the edge, membership while it listens, readiness).
    """

    def __init__(
        self,
        server: McpServer,
        url: str,
        *,
        name: str = "agenthost",
        advertise: str | None = None,
        state_keys: Sequence[str] = (),
        skew_s: float = 2.0,
        access: str = "",
    ) -> None:
        self.replica = secrets.token_hex(4)
        self.skew_s = skew_s
        self.name = name
        self.server = server
        self.ring = Ring(state_keys)
        self.members: dict[str, Member] = {}
        self._read: dict[str, float] = {}  # when each member's record was last read
        self._url = advertise
        self._access = access
        self._redis = aioredis.Redis.from_url(
            url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S,
            health_check_interval=10, max_connections=32,
        )  # fmt: skip
        self._buses: dict[str, RedisSubscriptionBus] = {}
        self._beating = self._hearing = False  # whether the last beat / the bus got through
        self._state = "ready"
        self._started = time.time()
        self._tasks: list[asyncio.Task[None]] = []
        self._http: httpx2.AsyncClient | None = None
        self._rereading: asyncio.Future[None] | None = None
        self._reread_at = 0.0
        server.server.middleware.append(  # a multi-round-trip request continues on any replica
            RequestStateBoundary(
                RequestStateSecurity(codec=RingCodec(self.ring)),
                default_audience=f"agenthost/{name}",
            )
        )
        server.peers = self

    # --- Peers: what the MCP server asks ----------------------------------------------------
    def bus(self, topic: str, fingerprint: str) -> SubscriptionBus:
        if topic not in self._buses:

            async def send(event: ServerEvent) -> bool:
                return await self._publish(encode(topic, self.replica, event))

            self._buses[topic] = RedisSubscriptionBus(send, fingerprint)
        return self._buses[topic]

    def elsewhere(self, name: str) -> tuple[str, frozenset[str]] | None:
        key = tool_key(name, self.ring.salt())
        for member in self.members.values():
            if member.replica != self.replica and member.state == "ready" and key in member.tools:
                return member.replica, frozenset(member.tools[key])
        return None

    # --- Replicated: what the HTTP server asks ---------------------------------------------
    def wrap(self, app: Any, security: TransportSecuritySettings) -> Any:
        return Edge(app, self, security)

    def state(self) -> str:
        return "ready" if self._beating and self._hearing else "degraded"

    async def leaving(self) -> None:
        """Say so in the record: no replica waits for a tool from this one any more."""
        self._state = "draining"
        with contextlib.suppress(Exception):  # a Redis away or stalled: the record expires
            await asyncio.wait_for(self._beat(), TIMEOUT_S)

    @contextlib.asynccontextmanager
    async def joined(self, url: str) -> AsyncIterator[None]:
        """Be a member while the server at ``url`` listens (the first beat and the bus are
        waited for, briefly: a replica that cannot reach Redis serves alone until it can)."""
        self._url = self._url or url
        try:
            await asyncio.wait_for(self._first_beat(), 2 * TIMEOUT_S)
        except AuthenticationError as exc:  # not an outage: it would never get better
            raise ClusterError(f"Redis refused the credentials in the URL: {exc}") from None
        except (RedisError, OSError, asyncio.TimeoutError):
            pass
        subscribed = asyncio.Event()
        self._tasks = [asyncio.ensure_future(self._beats()),
                       asyncio.ensure_future(self._hear(subscribed))]  # fmt: skip
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(subscribed.wait(), TIMEOUT_S)
        try:
            yield
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            with contextlib.suppress(RedisError, OSError, asyncio.TimeoutError):
                await asyncio.wait_for(self._redis.delete(self._key(self.replica)), TIMEOUT_S)
            with contextlib.suppress(RedisError, OSError):
                await self._redis.aclose()
            if self._http is not None:
                await self._http.aclose()

    def http(self) -> httpx2.AsyncClient:
        """The client requests are relayed with: no read timeout (an event stream may be
        quiet for as long as it likes; the client's own timeout bounds a call)."""
        if self._http is None:
            self._http = httpx2.AsyncClient(
                timeout=httpx2.Timeout(connect=CONNECT_S, read=None, write=30.0, pool=5.0),
                limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64),
                trust_env=False,
            )
        return self._http

    def lost(self, replica: str) -> None:
        """``replica`` refused a connection: forget it until its record says otherwise."""
        self.members.pop(replica, None)

    async def owner(self, replica: str) -> Member | None:
        """The live member ``replica``, read again from Redis when not known yet (one read
        at a time, at most every :data:`REREAD_S`: an unknown id costs Redis little)."""
        if replica not in self.members:
            if self._rereading is None or (
                self._rereading.done() and time.monotonic() - self._reread_at > REREAD_S
            ):
                self._reread_at = time.monotonic()
                self._rereading = asyncio.ensure_future(self._read_members())
            with contextlib.suppress(Exception):  # an outage, or Redis's nonsense: not known
                await asyncio.wait_for(asyncio.shield(self._rereading), TIMEOUT_S)
        return self.members.get(replica)

    # --- Redis ------------------------------------------------------------------------------
    def _key(self, replica: str) -> str:
        return f"{self.name}:replica:{replica}"

    def _record(self) -> str:
        host, salt = self.server.host, self.ring.salt()
        tools = {tool_key(i.name, salt): sorted(i.permissions) for i in host.tools()
                 if not i.definition_only}  # fmt: skip
        plugins = {p.name: p.content_hash for p in host.plugins() if p.status == "loaded"}
        member = Member(self.replica, self._url or "", self._state, self._started, __version__,
                        plugins, tools, time.time(), self._access)  # fmt: skip
        return member.dump(self.ring.seal_record)

    async def _first_beat(self) -> None:
        await self._beat()
        await self._read_members()

    async def _beat(self) -> None:
        """Make sure the ring is in Redis, and write this replica's record."""
        if not self.ring.given:
            ring_key = f"{self.name}:statekeys"
            offered = json.dumps(self.ring.keys or [new_key()])
            await self._redis.set(ring_key, offered, nx=True)  # the first one wins
            self.ring.adopt(parse_ring(await self._redis.get(ring_key)))
        await self._redis.set(self._key(self.replica), self._record(), px=int(TTL_S * 1000))
        await self._redis.sadd(self._members_key, self.replica)
        self._beating = True

    @property
    def _members_key(self) -> str:
        return f"{self.name}:replicas"

    async def _read_members(self) -> None:
        """Read every record named in the set of replicas (a set, not a scan of the whole
        Redis: an unknown session id must cost little). One missing is kept for its time
        to live since it was last read: a Redis that restarted empty has not heard every
        replica's next beat yet; it leaves the set."""
        found = await self._redis.smembers(self._members_key)
        names = sorted(n.decode(errors="replace") if isinstance(n, bytes) else n for n in found)
        texts = await self._redis.mget([self._key(n) for n in names]) if names else []
        now = time.monotonic()
        for name, text in zip(names, texts, strict=True):
            member = Member.parse(text, self.ring.signed_record) if text else None
            if text is None:
                await self._redis.srem(self._members_key, name)  # expired: rebuilt by a beat
            elif member is not None and member.replica == name:  # not another's id
                self.members[name] = member
                self._read[name] = now
        for replica, read in list(self._read.items()):
            if now - read > TTL_S:
                self.members.pop(replica, None)
                del self._read[replica]

    async def _beats(self) -> None:
        was = True
        while True:
            try:
                await asyncio.wait_for(self._first_beat(), 2 * TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - an outage, or nonsense in Redis: go on
                self._beating = False
                if was:
                    logger.warning("cluster: Redis is unreachable ({}); serving alone", exc)
            else:
                if not was:
                    logger.info("cluster: Redis is back")
            was = self._beating
            await asyncio.sleep(BEAT_S)

    async def _publish(self, message: str) -> bool:
        try:
            await asyncio.wait_for(self._redis.publish(self._channel, message), TIMEOUT_S)
        except (RedisError, OSError, asyncio.TimeoutError):
            return False
        return True

    @property
    def _channel(self) -> str:
        return f"{self.name}:events"

    async def _hear(self, subscribed: asyncio.Event) -> None:
        """Deliver what other replicas announce, over one connection, reconnecting after
        Redis went away (and then announcing this replica's lists, which others missed)."""
        pause = 0.1
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                self._hearing, pause = True, 0.1
                subscribed.set()
                self.server.announce()
                while True:
                    message = await pubsub.get_message(timeout=BEAT_S)
                    if message is not None:
                        self._heard(message["data"])
            except Exception as exc:  # noqa: BLE001 - the loop outlives whatever Redis sends
                logger.debug("cluster: the bus is down: {}", exc)
            finally:
                self._hearing = False
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(pause)
            pause = min(pause * 2, BEAT_S)

    def _heard(self, data: str | bytes) -> None:
        decoded = decode(data)
        if decoded is None:
            return
        topic, _, event = decoded
        bus = self._buses.get(topic)
        if bus is not None:
            bus.deliver(event)
