"""Bearer tokens: a token file maps each token to the session its calls run as and its grants.

The file is refused whole, with the reason and the fix, when anything in it is
wrong: not JSON, a token listed twice, a token too short to be secret, an entry
without a session. Tokens are looked up by their SHA-256 digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import AccessToken
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["Caller", "TokenError", "TokenTable", "load_tokens", "readable_by_others"]

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


class TokenTable:
    """The SDK's token verifier over a token file.

    Tokens are looked up by their SHA-256 digest, so lookups take the same time
    whatever the token shares with a real one. The access token's subject is the
    session; its client id is unique per token, so one caller cannot use the
    HTTP session another token opened, even under the same session name. The id
    comes from the token's digest, not its place in the file: every replica of a
    cluster names a token alike.
    """

    def __init__(self, callers: Mapping[str, Caller]) -> None:
        digests = {
            hashlib.sha256(token.encode()).digest(): caller for token, caller in callers.items()
        }
        self._by_digest = {
            digest: (f"token-{hashlib.sha256(digest).hexdigest()[:16]}", caller)
            for digest, caller in digests.items()
        }

    async def verify_token(self, token: str) -> AccessToken | None:
        found = self._by_digest.get(hashlib.sha256(token.encode(errors="replace")).digest())
        if found is None:
            return None
        client_id, caller = found
        return AccessToken(
            token=token, client_id=client_id, scopes=sorted(caller.grants), subject=caller.session
        )
