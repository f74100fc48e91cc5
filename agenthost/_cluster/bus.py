"""The SDK's ``SubscriptionBus`` over Redis pub/sub, one bus per topic.

A topic is a set of grants: callers holding the same grants see the same tool
list, so they share a bus. Every replica announces each change of a topic's
list; the bus delivers a list once (it carries the list's fingerprint), so three
replicas reloading the same edit make one notification per client, not three.
While Redis is away a publish is delivered here alone: this replica's clients
still hear of its own changes.
"""

from __future__ import annotations

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


def encode(topic: str, sender: str, event: ServerEvent) -> str:
    """An event as a pub/sub message (events carry their kind and no more)."""
    message: dict[str, Any] = {"topic": topic, "from": sender, "kind": type(event).__name__}
    if isinstance(event, ToolsChanged):
        message["fingerprint"] = event.fingerprint
    if isinstance(event, ResourceUpdated):
        message["uri"] = event.uri
    return json.dumps(message)


def decode(data: str | bytes) -> tuple[str, str, ServerEvent] | None:
    """(topic, sender, event) of a message, or None for one this version cannot read."""
    try:
        message = json.loads(data)
        topic, sender, kind = message["topic"], message["from"], message["kind"]
    except (ValueError, KeyError, TypeError):
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
        """Fan ``event`` out to this replica's listeners, unless it is a list already told."""
        if isinstance(event, ToolsChanged) and event.fingerprint:
            if event.fingerprint == self._last:
                return
            self._last = event.fingerprint
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - one bad listener must not starve the others
                logger.exception("a subscription listener raised; continuing")
