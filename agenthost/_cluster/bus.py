"""The SDK's ``SubscriptionBus`` over Redis pub/sub, one bus per topic.

A topic is a set of grants: callers holding the same grants see the same tool
list, so they share a bus. Every replica announces each change of a topic's
list; the bus delivers a list once (it carries the list's fingerprint), so three
replicas reloading the same edit make one notification per client, not three.
While Redis is away a publish is delivered here alone: this replica's clients
still hear of its own changes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
)

from agenthost._serve.server import ToolsChanged

__all__ = ["RedisSubscriptionBus", "decode", "encode"]

MAX_MESSAGE = 4096  # bytes of an event: ours take about 150
WINDOW_S = 0.1  # seconds after telling a list change in which the next waits for its end


def encode(topic: str, sender: str, event: ServerEvent) -> str:
    """An event as a pub/sub message (events carry their kind and no more)."""
    message: dict[str, Any] = {"topic": topic, "from": sender, "kind": type(event).__name__}
    if isinstance(event, ToolsChanged):
        message["fingerprint"] = event.fingerprint
    if isinstance(event, ResourceUpdated):
        message["uri"] = event.uri
    return json.dumps(message)


def decode(data: str | bytes) -> tuple[str, str, ServerEvent] | None:
    """(topic, sender, event) of a message, or None for one this version cannot read (or
    that anyone with access to Redis published: nested a million deep, a gigabyte)."""
    if len(data) > MAX_MESSAGE:
        return None
    try:
        message = json.loads(data)
        topic, sender, kind = message["topic"], message["from"], message["kind"]
    except Exception:  # noqa: BLE001 - RecursionError included
        return None
    if not isinstance(topic, str) or not isinstance(sender, str):
        return None
    event: ServerEvent
    if kind in ("ToolsChanged", "ToolsListChanged"):
        event = ToolsChanged(fingerprint=str(message.get("fingerprint", "")))
    elif kind == "PromptsListChanged":
        event = PromptsListChanged()
    elif kind == "ResourcesListChanged":
        event = ResourcesListChanged()
    elif kind == "ResourceUpdated" and isinstance(message.get("uri"), str):
        event = ResourceUpdated(uri=message["uri"])
    else:
        return None
    return topic, sender, event


class RedisSubscriptionBus:
    """A :class:`mcp.server.subscriptions.SubscriptionBus` shared by every replica.

    ``send(event)`` puts an event on Redis and says whether it got there; the
    replica's one pub/sub connection hands what arrives to :meth:`deliver`.
    """

    def __init__(
        self, send: Callable[[ServerEvent], Awaitable[bool]], fingerprint: str = ""
    ) -> None:
        self._send = send
        self._listeners: dict[object, Callable[[ServerEvent], None]] = {}
        self._last = fingerprint  # the fingerprint of the tool list last delivered
        self._pending: ToolsChanged | None = None  # the latest, told at the window's end
        self._quiet_until = 0.0  # loop time before which a list waits for the window's end

    async def publish(self, event: ServerEvent) -> None:
        if not await self._send(event):
            self.deliver(event)  # Redis is away: this replica's clients still hear of it

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def deliver(self, event: ServerEvent) -> None:
        """Fan ``event`` out to this replica's listeners, unless it is a list already told;
        within :data:`WINDOW_S` of the last one only the latest list is told, at its end
        (replicas reloading a burst of edits at different moments make no storm)."""
        if not (isinstance(event, ToolsChanged) and event.fingerprint):
            self._fan_out(event)
            return
        loop = asyncio.get_running_loop()
        wait = self._quiet_until - loop.time()
        if self._pending is None and wait > 0:
            loop.call_later(wait, self._flush)
        if self._pending is not None or wait > 0:
            self._pending = event
            return
        self._pending = event
        self._flush()

    def _flush(self) -> None:
        event, self._pending = self._pending, None
        if event is None or event.fingerprint == self._last:
            return  # the list came back to what was told: nothing to tell
        self._last = event.fingerprint
        self._quiet_until = asyncio.get_running_loop().time() + WINDOW_S
        self._fan_out(event)

    def _fan_out(self, event: ServerEvent) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - one bad listener must not starve the others
                logger.exception("a subscription listener raised; continuing")
