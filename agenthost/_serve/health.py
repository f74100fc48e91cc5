"""``GET /healthz`` and ``GET /readyz``: what a load balancer or an orchestrator asks.

``/healthz`` answers while the process serves at all; ``/readyz`` only while it
should get traffic: plugins loaded and not stopping (503 with the reason
otherwise). Neither needs a token nor names a tool, so both come before every
other check.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Health"]


class Health:
    """ASGI middleware answering the two probes; ``state()`` is ``"ready"`` or why not."""

    def __init__(self, app: ASGIApp, state: Callable[[], str]) -> None:
        self._app, self._state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in ("/healthz", "/readyz") or scope["method"] not in ("GET", "HEAD"):
            await self._app(scope, receive, send)
            return
        state = "alive" if path == "/healthz" else self._state()
        status = 200 if state in ("alive", "ready") else 503
        body = json.dumps({"status": state}).encode()
        headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store"),
                   (b"content-length", str(len(body)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body}
        )
