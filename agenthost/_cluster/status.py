"""What ``agenthost cluster status`` reads: every replica's record, and whether they agree.

A balancer sends each call to any replica, so every replica must serve the same
plugins: a rollout half done, a directory sync that lags or a plugin that failed
to load on one machine answers the same call differently depending on where it
lands. This compares the records the replicas keep in Redis (see ``replica``) and
names each difference by plugin and replica. Only ``<name>:replica:<id>`` keys are
read, never the key ring stored beside them; nothing here writes to Redis.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from agenthost._cluster.record import Member, members_pattern

__all__ = [
    "STALE_S",
    "Seen",
    "Status",
    "Unreachable",
    "compare",
    "masked",
    "read_members",
    "short",
    "status",
]

STALE_S = 3.0  # a replica beats every second: three missed beats and it is likely gone
TIMEOUT_S = 2.0  # seconds to connect, and for each command: an answer now, or why not
SHORT = 12  # characters of a content hash that tell two versions apart


class Unreachable(Exception):
    """Redis could not be read; the message is the cause, without the URL's password."""


@dataclass(frozen=True)
class Seen:
    """One record as seen now: how long ago its replica last beat."""

    member: Member
    age_s: float

    @property
    def healthy(self) -> bool:
        """Beating: a record outlives its last beat by seconds, so being listed is not enough."""
        return self.age_s <= STALE_S


@dataclass(frozen=True)
class Status:
    """The cluster as its records say, and what the replicas disagree on."""

    cluster: str
    replicas: tuple[Seen, ...]
    differences: tuple[str, ...]

    @property
    def agree(self) -> bool:
        """At least one replica, and nothing that differs (no replica agrees on nothing)."""
        return bool(self.replicas) and not self.differences


def short(content_hash: str) -> str:
    return content_hash[:SHORT] or "-"


def status(
    cluster: str,
    members: Sequence[Member],
    unreadable: Sequence[str] = (),
    now: float | None = None,
) -> Status:
    """The status of ``members`` at ``now`` (default: this machine's clock; a replica's beat
    is its own clock's, so clocks apart by seconds show as stale or as a negative age)."""
    now = time.time() if now is None else now
    ordered = sorted(members, key=lambda m: (m.url, m.replica))
    seen = tuple(Seen(m, round(now - m.beat, 1)) for m in ordered)
    bad = [f"record of replica {r} is unreadable (another agenthost version?)" for r in unreadable]
    return Status(cluster, seen, (*bad, *compare(ordered)))


def compare(members: Sequence[Member]) -> list[str]:
    """What the replicas disagree on, one sentence each: agenthost version, each plugin's
    content (or presence), and the tools they route calls by."""
    found: list[str] = []
    versions = {m.version for m in members}
    if len(versions) > 1:
        found.append(
            f"agenthost version differs ({_each((m.replica, m.version) for m in members)})"
        )
    for plugin in sorted({name for m in members for name in m.plugins}):
        having = [m for m in members if plugin in m.plugins]
        if len({m.plugins[plugin] for m in having}) > 1:
            hashes = _each((m.replica, short(m.plugins[plugin])) for m in having)
            found.append(f"plugin {plugin} differs ({hashes})")
        missing = [m.replica for m in members if plugin not in m.plugins]
        if missing:
            found.append(f"plugin {plugin} missing on {', '.join(missing)}")
    if len({m.access for m in members}) > 1:  # another token file, other --grant flags
        found.append(
            "tokens and grants differ: give every replica the same --tokens file and "
            f"--grant flags ({_each((m.replica, m.access[:12] or '-') for m in members)})"
        )
    tools = {tuple(sorted((k, tuple(sorted(v))) for k, v in m.tools.items())) for m in members}
    if len(tools) > 1 and not found:  # same plugins, other tools: other installed packages?
        counts = ", ".join(f"{m.replica}: {len(m.tools)}" for m in members)
        found.append(f"tools differ by name or permissions ({counts})")
    return found


def _each(pairs: Iterable[tuple[str, str]]) -> str:
    return ", ".join(f"{replica}: {value}" for replica, value in pairs)


def read_members(url: str, cluster: str) -> tuple[list[Member], list[str]]:
    """Every replica record of ``cluster`` in the Redis at ``url``, and the ids of those
    that do not read as a record. Raises :class:`Unreachable`."""
    try:
        client = redis.Redis.from_url(
            url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),  # one try, whatever the default: the timeouts bound it
        )  # fmt: skip
    except ValueError as exc:  # redis-py's word on a malformed URL
        raise Unreachable(f"not a Redis URL ({_scrubbed(str(exc), url)})") from None
    prefix = f"{cluster}:replica:"
    try:
        with client:
            keys = [k for k in client.scan_iter(match=members_pattern(cluster), count=200)
                    if b":" not in k[len(prefix.encode()):]]  # fmt: skip  # not a deeper name's
            values = client.mget(keys) if keys else []
    except (RedisError, OSError) as exc:
        raise Unreachable(_scrubbed(str(exc) or type(exc).__name__, url)) from None
    members: list[Member] = []
    unreadable: list[str] = []
    for key, value in zip(keys, values, strict=True):
        replica = key[len(prefix.encode()) :].decode(errors="replace")
        member = Member.parse(value) if value is not None else None
        if member is not None and member.replica == replica:  # a record under its own name
            members.append(member)
        elif value is not None:  # None: expired between the scan and the read
            unreadable.append(replica)
    return members, unreadable


def masked(url: str) -> str:
    """``url`` as it may be printed: no password, neither before the host nor as a
    ``?password=`` parameter (redis-py reads both)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a malformed URL)"
    _, at, host = parts.netloc.rpartition("@")
    netloc = f"***@{host}" if at else host  # a user name alone may be a password misplaced
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, "***" if k.lower() == "password" else v) for k, v in pairs], safe="*"
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _scrubbed(text: str, url: str) -> str:
    """``text`` without the URL's password, should an error message quote it."""
    try:
        parts = urlsplit(url)
        secrets = [parts.password or "", unquote(parts.password or "")]
        secrets += [v for k, v in parse_qsl(parts.query) if k.lower() == "password"]
    except ValueError:
        return text
    for secret in filter(None, secrets):
        text = text.replace(secret, "***")
    return text
