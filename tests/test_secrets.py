"""Secrets never reach the log: not in interceptor lines, not in tracebacks, not in messages."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from loguru import logger

from agenthost import LoggingInterceptor, PluginHost, ToolContext, tool

Host = Callable[..., PluginHost]
SECRET = "hunter2-sk-live-0042"
TOKEN = "tok-9f8e7d6c"


@pytest.fixture
def logged() -> Iterator[list[str]]:
    """Everything the library logs, with loguru's defaults (tracebacks show local variables)."""
    lines: list[str] = []
    logger.enable("agenthost")
    sink = logger.add(lines.append, level="DEBUG", backtrace=True, diagnose=True)
    yield lines
    logger.remove(sink)
    logger.disable("agenthost")


@pytest.fixture
def host(make_host: Host) -> PluginHost:
    host = make_host(None, interceptors=[LoggingInterceptor()]).start()

    @tool(timeout=False)
    def login(user: str, password: str, options: dict[str, Any] | None = None) -> str:
        """Fails, quoting what it was given."""
        connection = {"user": user, "password": password}  # a local variable holding it too
        raise PermissionError(f"login refused for {connection} with {password}")

    @tool(timeout=5)
    def login_in_worker(user: str, password: str) -> str:
        """The same, in the worker pool."""
        raise PermissionError(f"refused: {password}")

    @tool
    async def login_async(user: str, api_key: str) -> str:
        """The same, on an event loop."""
        raise PermissionError(f"refused: {api_key}")

    for fn in (login, login_in_worker, login_async):
        host.register(fn)
    return host


def assert_no_secret(lines: list[str], *secrets: str) -> None:
    assert lines, "something was logged"
    for line in lines:
        for secret in secrets:
            assert secret not in line, line


def test_a_failing_tools_traceback_never_shows_secret_arguments(
    host: PluginHost, logged: list[str]
) -> None:
    result = host.execute("login", {"user": "ann", "password": SECRET})
    assert result.error is not None
    assert result.error.code == "tool_error"
    assert any("Traceback" in line and "login" in line for line in logged)
    assert_no_secret(logged, SECRET)
    assert result.error.message == (
        "PermissionError: login refused for {'user': 'ann', 'password': '***'} with ***"
    )


def test_nested_secret_values_are_masked_as_well(host: PluginHost, logged: list[str]) -> None:
    options = {"auth": {"token": TOKEN}, "retries": 3}
    host.execute("login", {"user": "ann", "password": SECRET, "options": options})
    assert_no_secret(logged, SECRET, TOKEN)


@pytest.mark.parametrize("name", ["login_in_worker", "login_async"])
def test_every_path_masks_them(host: PluginHost, logged: list[str], name: str) -> None:
    key = "password" if name == "login_in_worker" else "api_key"
    result = host.execute(name, {"user": "ann", key: SECRET})
    assert result.error is not None
    assert result.error.message == "PermissionError: refused: ***"
    asyncio.run(host.aexecute(name, {"user": "ann", key: SECRET}))
    host.execute_many([(name, {"user": "ann", key: SECRET})])
    assert_no_secret(logged, SECRET)


def test_a_failing_interceptor_never_logs_them_either(host: PluginHost, logged: list[str]) -> None:
    def broken(ctx: ToolContext, proceed: Any) -> Any:
        secret = ctx.arguments["password"]
        raise RuntimeError(f"interceptor saw {secret}")

    result = host.execute("login", {"user": "ann", "password": SECRET}, interceptors=[broken])
    assert result.error is not None
    assert SECRET not in result.error.message
    assert_no_secret(logged, SECRET)


def test_the_context_never_shows_secret_values_in_its_repr(host: PluginHost) -> None:
    seen: list[str] = []

    def remember(ctx: ToolContext, proceed: Any) -> Any:
        seen.append(repr(ctx))
        return proceed(ctx)

    host.execute("login", f'{{"user": "ann", "password": "{SECRET}"}}', interceptors=[remember])
    [text] = seen
    assert "ann" in text
    assert SECRET not in text


def test_short_values_are_not_masked_inside_text(host: PluginHost, logged: list[str]) -> None:
    # A one-character "secret" would turn every message into asterisks: values shorter
    # than four characters are masked under their key, not searched for in text.
    result = host.execute("login", {"user": "ann", "password": "a"})
    assert result.error is not None
    assert result.error.message == (
        "PermissionError: login refused for {'user': 'ann', 'password': 'a'} with a"
    )
