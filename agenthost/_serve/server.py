"""``agenthost serve``: the live plugin directory as an MCP server, on the official SDK.

Every change to a client's tool list reaches it without a reconnect, from
outside any request: session-based clients (2025-06-18, 2025-11-25) get
``notifications/tools/list_changed`` on their connection, 2026-07-28 clients
get a ``ToolsListChanged`` event on the ``subscriptions/listen`` streams they
opened (at that protocol version the SDK drops bare change notifications). A
change to tools a caller cannot see is not announced to it: each caller has its
own listen bus, and a session hears of a change only when its list moved.
Callers with the same grants see the same list, so they share one bus (a
*topic*); with :class:`Peers` (``serve --redis``) each topic's bus is shared by
every replica, and a change announced by one reaches the clients of all.
The SDK keeps no public list of connections, so the server keeps its own: a
connection joins when its handshake completes and leaves when it closes.

Calls go through :meth:`PluginHost.aexecute` as the session :data:`SESSION`
(``--grant`` grants it permissions), so permissions, validation, interceptors,
timeouts and version pinning all apply; every failure is a result with
``isError: true``, never a protocol error. Tools whose permissions are not
granted, and ``definition_only`` tools, are not listed, and a call to one answers
as a call to a tool that does not exist (close names come from the caller's own
list), so no caller learns another's tools; the operator's log says why. Over
HTTP a bearer token names the caller (see ``tokens``), so each caller gets its
own list.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import hashlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import mcp.types as types
from loguru import logger
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ServerEvent,
    SubscriptionBus,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agenthost._calls.results import ToolResult
from agenthost._directory.records import RegistryChange, ToolInfo
from agenthost._host import PluginHost
from agenthost._providers.exporters import to_mcp
from agenthost._serve.door import held
from agenthost._serve.results import Answers, error
from agenthost._serve.stdio import gated_stdio
from agenthost._version import __version__

__all__ = ["SESSION", "McpServer", "Peers", "ToolsChanged"]

SESSION = "mcp"  # the session MCP calls run as without a token: `--grant` grants it permissions


@dataclass(frozen=True)
class ToolsChanged(ToolsListChanged):
    """A tool list change, with the fingerprint of the list it leads to: a bus shared by
    replicas delivers each list once, however many replicas announce it."""

    fingerprint: str = ""


class Peers(Protocol):
    """The other replicas of a cluster, as the server needs them."""

    replica: str  # this replica's name, for messages
    skew_s: float  # how long a call waits for a tool the cluster has and this replica not yet

    def bus(self, topic: str, fingerprint: str) -> SubscriptionBus:
        """The bus shared by every replica for callers whose grants hash to ``topic``
        (``fingerprint``: their list here now, not news when another replica announces it)."""
        ...

    def elsewhere(self, name: str) -> tuple[str, frozenset[str]] | None:
        """A live replica serving tool ``name`` and its permissions, or None."""
        ...


class _Server(Server[Any]):
    """The SDK server, advertising ``tools.listChanged`` on every transport.

    The HTTP session manager builds the handshake's options itself, with the
    defaults (``listChanged: false``); this makes the default say what we do.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class McpServer:
    """An MCP server over a :class:`PluginHost` whose tool list follows the registry."""

    def __init__(
        self,
        host: PluginHost,
        *,
        grants: Iterable[str] = (),
        callers: Iterable[str] = (),
        peers: Peers | None = None,
    ) -> None:
        """``callers`` are the sessions tokens name (``SESSION`` is always one): their lists
        are announced to ``peers`` even while none of them is connected here."""
        self.host = host
        grants = tuple(grants)
        if grants:
            host.permissions.grant(SESSION, *grants)
        self.peers = peers
        self._known = {SESSION, *callers}
        self._topics: dict[str, tuple[SubscriptionBus, ListenHandler, str]] = {}  # and a caller
        self._told: dict[str, str] = {}  # each topic's list as last announced, as a fingerprint
        self._heard: dict[str, tuple[str, float]] = {}  # and as last delivered, and when
        self._tick = asyncio.Event()  # set and replaced on every registry change
        self.server: Server[Any] = _Server(
            "agenthost",
            version=__version__,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._joined
        )
        self._sessions: dict[int, ServerSession] = {}  # session-based connections, by id
        self._callers: dict[int, str] = {}  # whose each session is
        self._listings: dict[tuple[int, frozenset[str]], types.ListToolsResult] = {}
        self._prints: dict[tuple[int, frozenset[str]], str] = {}  # each listing's fingerprint
        self._calls: set[asyncio.Task[Any]] = set()  # handlers inside a tool call
        self._drained: set[asyncio.Task[Any]] = set()  # cancelled by drain(), not by a client
        self._closing = False
        self._answers = Answers()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notifying: asyncio.Task[None] | None = None
        self._senders: dict[int, asyncio.Task[None]] = {}  # one per session being told
        self._behind: set[int] = set()  # sessions with a change they have not been sent yet
        self._again = False
        self._undo = host.on_change(self._changed)

    def initialization_options(self) -> InitializationOptions:
        """What the handshake advertises: tools, with ``listChanged``."""
        return self.server.create_initialization_options()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Start the host on this loop (its events and changes reach us here), then stop it."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.host.start)
        for caller in self._known:  # the lists as loaded: a change from here on is news
            self._topic(caller)
        try:
            yield
        finally:
            self.close()
            await asyncio.to_thread(self.host.stop)

    async def serve_stdio(self) -> None:
        """Serve one client over stdin/stdout until stdin closes.

        The host starts inside ``gated_stdio``, which points fd 1 at stderr while
        it serves: whatever a plugin prints, at import or later, never reaches the
        protocol stream. Every line is read strictly first (see ``gate``).
        """
        sys.stdout.flush()
        # Python-level prints are buffered: send them to stderr too, or they would be
        # flushed onto the restored fd 1 at exit, after the last protocol frame.
        async with gated_stdio() as (read, write):
            with contextlib.redirect_stdout(sys.stderr):
                async with self.running():
                    await self.server.run(read, write, self.initialization_options())

    def close(self) -> None:
        """Stop following the registry and end the listen streams."""
        self._closing = True
        self._undo()
        for _, handler, _ in self._topics.values():
            handler.close()
        for sender in list(self._senders.values()):
            sender.cancel()

    async def drain(self, grace: float) -> None:
        """Refuse new calls, give those in flight ``grace`` seconds, cancel the rest.

        A cancelled call still answers its client, with an error result saying why. The
        listen streams end last: a client re-listens at once, and the listener may be
        closed by then, which some clients take as a reason to fail their calls too.
        """
        self._closing = True
        try:
            if self._calls:
                await asyncio.wait(set(self._calls), timeout=grace)
            late = set(self._calls)  # still inside the tool: the rest are writing their answer
            for task in late:
                self._drained.add(task)
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=grace)
        finally:
            self.close()

    # --- connections and change notifications ------------------------------------------------
    @property
    def sessions(self) -> int:
        """How many session-based connections are open (2026-07-28 clients hold none)."""
        return len(self._sessions)

    async def _joined(self, ctx: ServerRequestContext[Any], params: Any) -> None:
        """A session-based client finished its handshake: notify it until it leaves.

        The SDK hands handlers a per-request session object; the connection behind
        it is the identity (a repeated ``initialized`` must not mean two entries),
        and its exit stack is the one place that hears of a disconnect. A send to a
        closed HTTP session does not fail, so without it the entries would pile up.
        """
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connection = getattr(ctx.session, "_connection", None)  # no public way in mcp 2.3
        key = id(connection if connection is not None else ctx.session)
        if key in self._sessions:
            return
        caller = _caller()
        self._topic(caller)
        self._sessions[key] = ctx.session
        self._callers[key] = caller
        if connection is not None:
            connection.exit_stack.callback(self._forget, key)

    def _forget(self, key: int) -> None:
        self._sessions.pop(key, None)
        self._callers.pop(key, None)

    async def _listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026-07-28 listen stream, on its caller's topic: a change is announced only
        to the callers whose list it changes."""
        return await self._topics[self._topic(_caller())][1](ctx, params)

    def _topic(self, caller: str) -> str:
        """The topic of ``caller``'s grants, its bus made (and the list noted) on first use."""
        granted = self.host.permissions.granted(caller)
        topic = hashlib.sha256("\n".join(sorted(granted)).encode()).hexdigest()[:16]
        if topic not in self._topics:
            now = self._told.setdefault(topic, self._fingerprint(caller))
            bus = self.peers.bus(topic, now) if self.peers else InMemorySubscriptionBus()
            bus.subscribe(functools.partial(self._delivered, topic))
            self._topics[topic] = (bus, ListenHandler(bus), caller)
        return topic

    def _fingerprint(self, caller: str) -> str:
        """The same on every replica serving the same tools (``hash()`` is salted)."""
        key = self._key(caller)
        if key not in self._prints:
            text = self._listing(caller).model_dump_json()
            self._prints[key] = hashlib.sha256(text.encode()).hexdigest()[:32]
        return self._prints[key]

    def _changed(self, change: RegistryChange) -> None:
        """Called by the registry, in whatever thread applied the change."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        """Coalesce changes: one notification in flight, one more if changes arrive meanwhile."""
        self._tick.set()
        self._tick = asyncio.Event()
        if self._notifying is not None and not self._notifying.done():
            self._again = True
            return
        self._notifying = asyncio.ensure_future(self._notify())

    async def _notify(self) -> None:
        """Announce each topic whose list moved on its bus; what the bus delivers is told
        (see :meth:`_delivered`). A change to tools a caller cannot see moves no list of its."""
        while True:
            self._again = False
            for topic, (bus, _, caller) in list(self._topics.items()):
                now = self._fingerprint(caller)
                if self._told.get(topic) != now:
                    self._told[topic] = now
                    await bus.publish(ToolsChanged(fingerprint=now))
            if not self._again:
                return

    def announce(self) -> None:
        """Announce every list again: the bus was away, and other replicas may have missed
        a change (a bus delivers a list it already delivered to nobody)."""
        self._told.clear()
        self._schedule()

    def _delivered(self, topic: str, event: ServerEvent) -> None:
        """A bus delivered a change of ``topic``'s list: tell its sessions (listen streams
        hear it from the bus themselves). Called on this loop; must not raise."""
        fingerprint = event.fingerprint if isinstance(event, ToolsChanged) else ""
        self._heard[topic] = (fingerprint, time.monotonic())
        for key, session in list(self._sessions.items()):
            caller = self._callers.get(key)
            if caller is not None and self._topic(caller) == topic:
                self._tell(key, session)

    def _tell(self, key: int, session: ServerSession) -> None:
        """Tell one session, from a sender of its own: a session that stops reading holds
        up only its own sender, and hears only the latest change once it catches up."""
        self._behind.add(key)
        if key not in self._senders:
            sender = asyncio.ensure_future(self._send(key, session))
            self._senders[key] = sender
            sender.add_done_callback(lambda _: self._senders.pop(key, None))

    async def _send(self, key: int, session: ServerSession) -> None:
        while key in self._behind and key in self._sessions:
            self._behind.discard(key)
            try:
                await asyncio.wait_for(session.send_tool_list_changed(), _SEND_LIMIT)
            except asyncio.TimeoutError:
                self._behind.add(key)  # still stalled: try again, with the latest change
            except Exception:  # noqa: BLE001 - the client went away: forget it
                self._forget(key)
        self._behind.discard(key)

    # --- tools/list and tools/call -----------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = _caller()
        if self.peers is not None:
            await self._caught_up(caller)
        return self._listing(caller)

    async def _caught_up(self, caller: str) -> None:
        """Wait, bounded, until this replica lists what another announced for ``caller``:
        a client that heard of a change from the bus would otherwise list the old tools
        and never hear of them again."""
        assert self.peers is not None
        topic = self._topic(caller)
        heard = self._heard.get(topic)
        if heard is None:
            return
        deadline = heard[1] + self.peers.skew_s
        await self._until(lambda: self._fingerprint(caller) == heard[0], deadline)

    async def _until(self, done: Callable[[], bool], deadline: float) -> bool:
        """Whether ``done()`` became true, checked after each registry change, by ``deadline``."""
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._tick.wait(), left)
        return True

    def _key(self, session: str) -> tuple[int, frozenset[str]]:
        """What a listing depends on: callers with the same grants share one."""
        return (self.host.version, self.host.permissions.granted(session))

    def _listing(self, session: str) -> types.ListToolsResult:
        """The tools ``session`` may see, kept per registry version and grants."""
        key = self._key(session)
        listing = self._listings.get(key)
        if listing is None:
            if len(self._listings) > 64:  # old versions: drop them all
                self._listings.clear()
                self._prints.clear()
            tools = [
                types.Tool.model_validate(dict(to_mcp(info.definition)))
                for info in sorted(self.host.tools(), key=lambda info: info.name)
                if self._served(info, session)
            ]
            listing = self._listings[key] = types.ListToolsResult(tools=tools)
        return listing

    def _served(self, info: ToolInfo, session: str) -> bool:
        if info.definition_only:
            return False
        return not self.host.permissions.missing(session, info.permissions)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        if self._closing:
            return error(f"tool {name!r} was not run: the server is shutting down")
        info = self.host.tool(name)
        session = _caller()
        if info is None and self.peers is not None:
            info, lagging = await self._arrival(name, session)
            if info is None and lagging:
                return self._answers.answer(ToolResult.fail("unknown_tool", lagging), None)
        if info is None or not self._served(info, session):
            return self._unknown(name, info, session)
        arguments = params.arguments or {}
        # The handler's own task is what a drain cancels: no extra task on every call.
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            with held(getattr(ctx, "request", None)):  # counted until done, client or not
                if info.definition.kind in _STREAMING and _wants_progress(ctx):
                    result = await self._streamed(ctx, name, arguments, session)
                else:
                    result = await self.host.aexecute(name, arguments, session=session)
        except asyncio.CancelledError:
            if task not in self._drained:
                raise  # the client cancelled the call
            if sys.version_info >= (3, 11):
                task.uncancel()
            return error(f"tool {name!r} was cancelled: the server is shutting down")
        finally:
            self._calls.discard(task)
        answer = self._answers.answer(result, info)
        if result.success and (info is None or answer.is_error):
            latest = self.host.tool(name)  # a reload during the call: describe the new version
            if latest is not None and latest is not info:
                answer = self._answers.answer(result, latest)
        return answer

    async def _arrival(self, name: str, session: str) -> tuple[ToolInfo | None, str]:
        """A tool another replica serves and this one has not loaded yet (their plugin
        directories are synced one after the other): wait for it, bounded. Returns the
        tool, or why it never came (empty when no replica this caller may use has it)."""
        assert self.peers is not None
        where = self.peers.elsewhere(name)
        if where is None or self.host.permissions.missing(session, where[1]):
            return None, ""
        deadline = time.monotonic() + self.peers.skew_s
        await self._until(lambda: self.host.tool(name) is not None, deadline)
        info = self.host.tool(name)
        if info is not None:
            return info, ""
        return None, (
            f"unknown tool {name[:200]!r} on replica {self.peers.replica}: replica {where[0]} "
            f"serves it, but this replica has not loaded it within {self.peers.skew_s:g} s "
            "(its plugin directory lags behind; sync it, or check its log for a failed load)"
        )

    def _unknown(self, name: str, info: ToolInfo | None, session: str) -> types.CallToolResult:
        """A tool this caller may not see answers as one that does not exist, with close
        names from the tools it may see only; why it is hidden goes to the operator's log."""
        if info is not None and info.definition_only:
            logger.info("MCP caller {!r} called {!r}, which in-process clients run", session, name)
        elif info is not None:
            missing = self.host.permissions.missing(session, info.permissions)
            grants = " ".join(f"--grant {p}" for p in missing)
            logger.warning(
                "MCP caller {!r} called {!r}, which needs {}; it was told the tool does not "
                "exist (add {} or grant them to its token to let it)",
                session, name, ", ".join(missing), grants,
            )  # fmt: skip
        visible = [i.name for i in self.host.tools() if self._served(i, session)]
        close = difflib.get_close_matches(name, visible, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        result = ToolResult.fail("unknown_tool", f"unknown tool {name[:200]!r}{hint}")
        return self._answers.answer(result, None)

    async def _streamed(
        self, ctx: ServerRequestContext[Any], name: str, arguments: Any, session: str
    ) -> ToolResult:
        """Run a generator tool, each chunk a progress notification carrying its text."""
        result: ToolResult | None = None
        chunks = 0
        async for event in self.host.astream(name, arguments, session=session):
            if event.kind == "delta":
                chunks += 1
                with contextlib.suppress(Exception):  # a client gone mid-call still gets a result
                    await ctx.session.report_progress(chunks, message=event.text)
            elif event.kind == "completed":
                result = event.result
        assert result is not None  # astream always ends with `completed`
        return result


_STREAMING = frozenset({"generator", "async_generator"})
_SEND_LIMIT = 5.0  # seconds a change notification may take to reach one session


def _caller() -> str:
    """The session a request runs as: the bearer token's, or :data:`SESSION`."""
    access = get_access_token()
    return access.subject if access is not None and access.subject else SESSION


def _wants_progress(ctx: ServerRequestContext[Any]) -> bool:
    meta = ctx.meta
    return bool(meta) and meta.get("progress_token") is not None  # type: ignore[union-attr]
