"""Permissions: declared on tools, granted per session, host-wide defaults, revoked, wildcards."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agenthost import Permissions, PluginHost, tool

Host = Callable[..., PluginHost]


@tool(permissions={"http.get", "fs.read"})
def fetch(url: str) -> str:
    """Fetch a URL."""
    return f"fetched {url}"


@tool
def free() -> str:
    """Needs nothing."""
    return "free"


def code(host: PluginHost, session: str | None = None) -> str | None:
    result = host.execute("fetch", {"url": "u"}, session=session)
    return result.error.code if result.error else None


@pytest.fixture
def host(make_host: Host) -> PluginHost:
    host = make_host(None).start()
    host.register(fetch)
    host.register(free)
    return host


def test_a_tool_without_permissions_runs_for_anyone(host: PluginHost) -> None:
    assert host.execute("free", {}).output == "free"


def test_a_denial_names_the_missing_permissions_and_how_to_grant_them(host: PluginHost) -> None:
    host.permissions.grant("alice", "fs.read")
    result = host.execute("fetch", {"url": "u"}, session="alice")
    assert result.error is not None
    assert result.error.code == "permission_denied"
    assert result.error.message == (
        "tool 'fetch' needs 'http.get', not granted to session 'alice'; grant with "
        "host.permissions.grant('alice', 'http.get') or PluginHost(default_permissions=...)"
    )
    assert result.error.details == {"missing": ["http.get"], "session": "alice"}


def test_grants_are_per_session(host: PluginHost) -> None:
    host.permissions.grant("alice", "http.get", "fs.read")
    assert code(host, "alice") is None
    assert code(host, "bob") == "permission_denied"
    assert code(host) == "permission_denied"


def test_host_wide_defaults_apply_to_every_session(make_host: Host) -> None:
    host = make_host(None, default_permissions={"http.get", "fs.read"}).start()
    host.register(fetch)
    assert code(host) is None
    assert code(host, "anyone") is None
    host.permissions.set_defaults("http.get")
    assert code(host, "anyone") == "permission_denied"


def test_revoke_takes_grants_back(host: PluginHost) -> None:
    host.permissions.grant("alice", "http.get", "fs.read")
    host.permissions.revoke("alice", "fs.read")
    assert code(host, "alice") == "permission_denied"
    host.permissions.grant("alice", "fs.read")
    host.permissions.revoke("alice")
    assert host.permissions.granted("alice") == frozenset()


def test_wildcards_grant_families_and_everything(host: PluginHost) -> None:
    host.permissions.grant("alice", "http.*", "fs.*")
    host.permissions.grant("root", "*")
    host.permissions.grant("half", "http.*")
    assert code(host, "alice") is None
    assert code(host, "root") is None
    assert host.execute("fetch", {"url": "u"}, session="half").error.details["missing"] == [
        "fs.read"
    ]  # type: ignore[union-attr]


def test_grants_must_be_strings() -> None:
    with pytest.raises(ValueError, match="permissions must be non-empty strings"):
        Permissions(["ok", ""])
