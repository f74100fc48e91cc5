"""One JSON-RPC message read strictly, before the SDK parses it, on every transport.

The SDK parses the raw text itself, keeping the last of repeated keys, and says
nothing to a request it cannot use: an id of the wrong type gets ``202`` over
HTTP and silence over stdio, a request nested too deep gets no reply. Here the
raw text is read as the in-process path reads arguments (unique keys, no NaN,
jiter's nesting limit) and the envelope is checked, so every request the SDK
would drop gets a JSON-RPC error instead: with its id where the id is usable,
with a null id where it is not.

The SDK also treats ``8`` and ``"8"`` as one id (a second request in flight
overwrites the first, which then never answers). :class:`Ids` keeps the ids in
flight on one connection and gives a colliding request an alias the SDK cannot
confuse, mapped back in the answer, so ids stay distinct by type.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

import jiter
from mcp.shared.dispatcher import coerce_request_id

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "Ids", "Refusal", "read_message", "refusal"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_DUPLICATE = re.compile(r'duplicate key "((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a message cannot be served: the JSON-RPC error to answer with, and its HTTP status."""

    answer: dict[str, Any]
    status: int = 400

    @property
    def body(self) -> bytes:
        """The answer as it goes on the wire."""
        return json.dumps(self.answer, separators=(",", ":")).encode()


def refusal(code: int, message: str, request_id: Any = None, status: int = 400) -> Refusal:
    """A JSON-RPC error for ``request_id`` (``None`` when the request's id is unusable)."""
    error = {"code": code, "message": message}
    return Refusal({"jsonrpc": "2.0", "id": request_id, "error": error}, status)


def read_message(raw: bytes | str) -> dict[str, Any] | Refusal:
    """The message in ``raw``, or the answer that refuses it.

    Refused: text that is not strict JSON (repeated keys, NaN, nesting past jiter's
    limit), a batch, anything but an object, a ``jsonrpc`` other than ``"2.0"``, a
    method that is not a string, an id that is not a string or an integer.
    """
    try:
        message = jiter.from_json(
            raw.encode() if isinstance(raw, str) else raw,
            catch_duplicate_keys=True,
            allow_inf_nan=False,
        )
    except ValueError as exc:
        return _unreadable(raw, str(exc))
    if not isinstance(message, dict):
        what = "a batch (an array)" if isinstance(message, list) else type(message).__name__
        return refusal(
            INVALID_REQUEST, f"Invalid Request: a message is one JSON object, not {what}"
        )
    problem = _envelope_problem(message)
    if problem is None:
        return message
    usable = message.get("id") if _usable_id(message.get("id")) else None
    return refusal(INVALID_REQUEST, f"Invalid Request: {problem}", usable)


def _unreadable(raw: bytes | str, reason: str) -> Refusal:
    """Not strict JSON. A repeated key still leaves the id readable, unless the id repeats."""
    repeated = _DUPLICATE.search(reason)
    if repeated is None:
        return refusal(PARSE_ERROR, f"Parse error: {reason}")
    return refusal(
        INVALID_REQUEST,
        f"Invalid Request: {reason}; a key may appear once in an object (which one "
        "counts would be anyone's guess)",
        _outer_id(raw),
    )


def _outer_id(raw: bytes | str) -> Any:
    """The message's id when it is usable and given once, read leniently; else ``None``."""
    outer: list[list[tuple[str, Any]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        outer[:] = [items]  # objects close inside out: the outermost is the last
        return dict(items)

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    ids = [value for key, value in outer[0] if key == "id"] if outer else []
    return ids[0] if len(ids) == 1 and _usable_id(ids[0]) else None


def _envelope_problem(message: dict[str, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "method" in message and not isinstance(message["method"], str):
        return "method must be a string"
    if "method" not in message and "result" not in message and "error" not in message:
        return "a message has a method (a request or notification), a result or an error"
    if "id" in message and not _usable_id(message["id"]):
        return f"id must be a string or an integer, not {_json_type(message['id'])}"
    if message.get("params") is not None and not isinstance(message["params"], dict):
        return f"params must be an object, not {_json_type(message['params'])}"
    if "method" not in message and "id" not in message:
        return "a response needs the id of the request it answers"
    return None


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a fraction"
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else type(value).__name__


class Ids:
    """The request ids in flight on one connection, kept distinct by type.

    The SDK files requests under ``str(id)`` (HTTP streams) and under ``int(id)``
    when a string id reads as a number (its dispatcher), so ``8``, ``"8"`` and
    ``"08"`` are one id to it. A request whose id collides with one in flight is
    given an alias only this connection could have made; the answer carries the
    alias, and :meth:`original` turns it back.
    """

    def __init__(self) -> None:
        self._prefix = f"agenthost-{secrets.token_hex(8)}-"
        self._count = 0
        self._flight: dict[tuple[str, Any], Any] = {}  # each key of an id in flight -> the id used
        self._aliases: dict[str, Any] = {}  # alias -> the client's id

    def admit(self, request_id: Any) -> Any:
        """The id to hand the SDK for a request with ``request_id``, now in flight."""
        keys = _keys(request_id)
        if not any(key in self._flight for key in keys):
            for key in keys:
                self._flight[key] = request_id
            return request_id
        self._count += 1
        alias = f"{self._prefix}{self._count}"
        self._aliases[alias] = request_id
        return alias

    def answered(self, used: Any) -> Any:
        """The request the SDK knows as ``used`` is answered: the client's own id for it."""
        if isinstance(used, str) and used in self._aliases:
            return self._aliases.pop(used)
        for key in _keys(used):
            if self._flight.get(key) == used and type(self._flight[key]) is type(used):
                del self._flight[key]
        return used

    def cancelling(self, request_id: Any) -> Any:
        """The id the SDK knows for the request the client cancels by ``request_id``, which
        is forgotten (a cancelled request is not answered); one matching no request in
        flight, by value and type, when none is (the SDK would cancel ``8`` for ``"8"``)."""
        for alias, original in self._aliases.items():
            if original == request_id and type(original) is type(request_id):
                del self._aliases[alias]
                return alias
        if _usable_id(request_id) and self._flight.get(("s", str(request_id))) is not None:
            used = self._flight[("s", str(request_id))]
            if type(used) is type(request_id) and used == request_id:
                self.answered(used)
                return used
        return f"{self._prefix}none"


def _keys(request_id: Any) -> tuple[tuple[str, Any], ...]:
    return (("s", str(request_id)), ("c", coerce_request_id(request_id)))
