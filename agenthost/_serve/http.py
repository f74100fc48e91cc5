"""``agenthost serve --http``: the MCP server over streamable HTTP at ``/mcp``.

Who may call is decided by a token file mapping bearer tokens to a session name
and its grants; the SDK's bearer middleware answers 401 to a missing or unknown
token and ties each HTTP session to the token that opened it. Without tokens the
server only binds a loopback address, where the SDK also checks ``Host`` and
``Origin`` against DNS rebinding.

uvicorn re-raises the signal it caught once it has stopped, and waits for open
event streams before it stops: here the first SIGINT/SIGTERM drains the calls in
flight (each still answers), ends the streams, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import json
import os
import signal
import socket
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agenthost._serve.server import McpServer

__all__ = ["Caller", "TokenError", "is_loopback", "load_tokens", "parse_address", "serve_http"]

GRACE = 3.0  # seconds the calls in flight get to finish once a stop is asked for
_MIN_TOKEN = 16  # characters: shorter tokens are guessable


class TokenError(ValueError):
    """The token file cannot be used; the message names the file and the fix."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Whom a bearer token speaks for: the session its calls run as, and its grants."""

    session: str
    grants: frozenset[str]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    session: str = Field(min_length=1, max_length=200)
    grants: list[str] = Field(default_factory=list)


def load_tokens(path: Path) -> dict[str, Caller]:
    """Read a token file: ``{"<token>": {"session": "alice", "grants": ["fs.read"]}}``."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_unique)
    except OSError as exc:
        raise TokenError(f"cannot read token file {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenError(f"token file {path} is not JSON: {exc}") from None
    except _Repeated as exc:
        raise TokenError(
            f"token file {path} lists {exc.args[0]!r} twice; which entry should count is "
            "anyone's guess: keep one"
        ) from None
    if not isinstance(raw, dict) or not raw:
        raise TokenError(
            f'token file {path} must be a JSON object of tokens, e.g. {{"<token>": {{"session": '
            '"alice", "grants": ["fs.read"]}}'
        )
    callers: dict[str, Caller] = {}
    for token, entry in raw.items():
        where = f"token file {path}, entry for session {_session_hint(entry)}"
        if len(token) < _MIN_TOKEN or not token.isprintable() or token != token.strip():
            raise TokenError(
                f"{where}: a token must be at least {_MIN_TOKEN} printable characters without "
                "surrounding spaces; make one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'"
            )
        try:
            parsed = _Entry.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors()
            )
            raise TokenError(f"{where}: {problems}") from None
        if not all(parsed.grants):
            raise TokenError(f"{where}: grants must be non-empty permission names")
        callers[token] = Caller(parsed.session, frozenset(parsed.grants))
    return callers


class _Repeated(Exception):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (a repeated token is refused)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            shown = key if len(key) < _MIN_TOKEN else key[:4] + "..."  # never a whole token
            raise _Repeated(shown)
        seen[key] = value
    return seen


def _session_hint(entry: Any) -> str:
    session = entry.get("session") if isinstance(entry, dict) else None
    return repr(session) if isinstance(session, str) else "(none)"


def readable_by_others(path: Path) -> bool:
    """Whether a token file's mode lets other users read it (POSIX only)."""
    if os.name != "posix":
        return False
    return bool(path.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH))


class _TokenTable:
    """The SDK's token verifier over a token file.

    Tokens are looked up by their SHA-256 digest, so lookups take the same time
    whatever the token shares with a real one. The access token's subject is the
    session; its client id is unique per token, so one caller cannot use the
    HTTP session another token opened, even under the same session name.
    """

    def __init__(self, callers: Mapping[str, Caller]) -> None:
        self._by_digest = {
            hashlib.sha256(token.encode()).digest(): (f"token-{index}", caller)
            for index, (token, caller) in enumerate(callers.items())
        }

    async def verify_token(self, token: str) -> AccessToken | None:
        found = self._by_digest.get(hashlib.sha256(token.encode(errors="replace")).digest())
        if found is None:
            return None
        client_id, caller = found
        return AccessToken(
            token=token, client_id=client_id, scopes=sorted(caller.grants), subject=caller.session
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_stop = on_stop
        self._stopping = False

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
        self._on_stop()


async def serve_http(
    server: McpServer,
    host: str,
    port: int,
    *,
    tokens: Mapping[str, Caller] | None = None,
    ready: Callable[[str], None] = lambda url: None,
    stop: asyncio.Event | None = None,
    grace: float = GRACE,
) -> None:
    """Serve ``server`` at ``http://host:port/mcp`` until SIGINT/SIGTERM or ``stop`` is set.

    ``ready`` gets the URL once the port is bound (port 0 picks a free one).
    Stopping drains first: calls in flight get ``grace`` seconds, then an error result.
    """
    if not tokens and not is_loopback(host):
        raise ValueError(f"refusing to serve {host} without tokens")
    verifier = _TokenTable(tokens) if tokens else None
    auth = (
        AuthSettings(issuer_url="http://localhost", resource_server_url=None)  # type: ignore[arg-type]
        if verifier
        else None
    )
    app = server.server.streamable_http_app(
        streamable_http_path="/mcp", host=host, auth=auth, token_verifier=verifier
    )
    loop = asyncio.get_running_loop()
    stopping = stop if stop is not None else asyncio.Event()
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1, access_log=False
    )

    def on_signal() -> None:
        loop.call_soon_threadsafe(stopping.set)

    web = _Uvicorn(config, on_signal)

    async def stop_when_asked() -> None:
        await stopping.wait()
        await server.drain(grace)
        web.should_exit = True

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
        bound_host, bound_port = listener.getsockname()[:2]
        shown = f"[{bound_host}]" if family == socket.AF_INET6 else bound_host
        async with server.running():
            watcher = asyncio.ensure_future(stop_when_asked())
            ready(f"http://{shown}:{bound_port}/mcp")
            try:
                await web.serve(sockets=[listener])
            finally:
                watcher.cancel()
