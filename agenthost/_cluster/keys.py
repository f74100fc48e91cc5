"""The cluster's key ring: what seals ``requestState`` and signs a relayed request.

The SDK seals a multi-round-trip request's state with a key that is random per
process unless told otherwise, so the next round on another replica would be
refused. Every replica uses one ring instead: the keys given with ``--state-key``
(the first seals, all open: rotate by putting the new key first), or else one
that the first replica to join stores in Redis and every other adopts. A Redis
that lost it gets it back from the next heartbeat, so it is never the only copy.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Sequence

from loguru import logger
from mcp.server.request_state import AESGCMRequestStateCodec

__all__ = ["HOP_SKEW_S", "Ring", "RingCodec", "new_key", "parse_ring"]

HOP_SKEW_S = 30.0  # how old a relayed request's signature may be (clocks of two machines)
_KEPT = 4  # keys a ring keeps: the cluster's, then those it replaced


def new_key() -> str:
    return secrets.token_hex(32)


def parse_ring(text: str | bytes | None) -> list[str]:
    """The ring as stored in Redis (a JSON list of hex keys); empty when unreadable."""
    if not text or len(text) > 4096:
        return []
    try:
        keys = json.loads(text)
    except (ValueError, RecursionError):
        return []
    return [k for k in keys if isinstance(k, str) and k] if isinstance(keys, list) else []


class Ring:
    """The keys, replaceable while the server runs (the ring arrives from Redis late)."""

    def __init__(self, keys: Sequence[str] = ()) -> None:
        self.given = bool(keys)  # from the operator: never replaced by Redis's
        self.keys: list[str] = list(keys)

    def adopt(self, keys: Sequence[str]) -> None:
        """Take the cluster's ring from Redis; keys this one held still open what they sealed
        (a Redis that restarted empty may get a new ring from a replica that just started)."""
        if not keys or self.given or list(keys) == self.keys[: len(keys)]:
            return
        if self.keys:
            logger.warning("cluster: the key ring in Redis changed; the old keys still open")
        self.keys = list(dict.fromkeys([*keys, *self.keys]))[:_KEPT]

    def _mac(self, key: str, text: str, purpose: bytes = b"hop") -> str:
        digest = hmac.new(hashlib.sha256(purpose + key.encode()).digest(), text.encode(), "sha256")
        return digest.hexdigest()[:32]

    def seal_record(self, text: str) -> str:
        """A signature of a replica's record, when the ring is the operator's (``--state-key``):
        then a record in Redis that no replica signed is ignored, so whoever can write to
        Redis cannot point relayed requests, with their callers' tokens, elsewhere."""
        return self._mac(self.keys[0], text, b"record") if self.given else ""

    def signed_record(self, text: str, signature: str) -> bool:
        if not self.given:
            return True  # the ring is in Redis itself: Redis is trusted
        return any(hmac.compare_digest(self._mac(k, text, b"record"), signature)
                   for k in self.keys)  # fmt: skip

    def salt(self) -> bytes:
        """What tool names are hashed with in Redis: the operator's key, when there is one."""
        return self.keys[0].encode() if self.given else b""

    def sign(self, to: str, client: str, method: str, sid: str) -> str:
        """The hop header of a request relayed to replica ``to``: who the client is, signed."""
        when = f"{time.time():.3f}"
        text = "|".join((to, when, client, method, sid))
        mac = self._mac(self.keys[0], text) if self.keys else ""
        return f"{to}|{when}|{client}|{mac}"

    def verify(self, header: str, me: str, method: str, sid: str) -> str | None:
        """The client address a hop header vouches for, if a key of the ring signed it for
        this replica, this request, in the last :data:`HOP_SKEW_S` seconds."""
        to, _, rest = header.partition("|")
        when, _, rest = rest.partition("|")
        client, _, mac = rest.rpartition("|")
        try:
            fresh = abs(time.time() - float(when)) <= HOP_SKEW_S
        except ValueError:
            return None
        if to != me or not fresh or not mac:
            return None
        text = "|".join((to, when, client, method, sid))
        good = any(hmac.compare_digest(self._mac(key, text), mac) for key in self.keys)
        return client if good else None


class RingCodec:
    """The SDK's AES-GCM ``requestState`` codec over whatever keys the ring holds now."""

    def __init__(self, ring: Ring) -> None:
        self._ring = ring
        self._local = new_key()  # until the ring arrives: this process alone can open it
        self._codec: tuple[tuple[str, ...], AESGCMRequestStateCodec] | None = None

    def _current(self) -> AESGCMRequestStateCodec:
        keys = tuple(self._ring.keys) or (self._local,)
        if self._codec is None or self._codec[0] != keys:
            self._codec = (keys, AESGCMRequestStateCodec(list(keys)))
        return self._codec[1]

    def seal(self, payload: bytes) -> str:
        return self._current().seal(payload)

    def unseal(self, token: str) -> bytes:
        return self._current().unseal(token)
