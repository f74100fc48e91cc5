"""Interceptors: chain order, both forms, short-circuit, retry, reject, and the built-in ones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from agenthost import (
    CachingInterceptor,
    Interceptor,
    LoggingInterceptor,
    PluginHost,
    RetryInterceptor,
    ToolContext,
    ToolResult,
    mask_secrets,
    tool,
)

Host = Callable[..., PluginHost]


@pytest.fixture
def host(make_host: Host) -> PluginHost:
    host = make_host(None).start()

    @tool(timeout=False)
    def echo(text: str) -> str:
        """Echo."""
        return text

    host.register(echo)
    return host


def recorder(name: str, log: list[str]) -> Callable[[ToolContext, Any], ToolResult]:
    def intercept(ctx: ToolContext, proceed: Any) -> ToolResult:
        log.append(f"{name} before")
        result: ToolResult = proceed(ctx)
        log.append(f"{name} after")
        return result

    return intercept


def test_host_wide_interceptors_run_before_per_call_ones_in_order(host: PluginHost) -> None:
    log: list[str] = []
    host.add_interceptor(recorder("host1", log))
    undo = host.add_interceptor(recorder("host2", log))
    host.execute("echo", {"text": "x"}, interceptors=[recorder("call", log)])
    assert log == [
        "host1 before",
        "host2 before",
        "call before",
        "call after",
        "host2 after",
        "host1 after",
    ]
    log.clear()
    undo()
    host.execute("echo", {"text": "x"})
    assert log == ["host1 before", "host1 after"]


def test_sync_and_async_interceptors_work_in_both_kinds_of_call(host: PluginHost) -> None:
    log: list[str] = []

    async def async_interceptor(ctx: ToolContext, proceed: Any) -> ToolResult:
        log.append("async")
        return await proceed(ctx)

    host.add_interceptor(recorder("sync", log))
    host.add_interceptor(async_interceptor)
    assert host.execute("echo", {"text": "a"}).output == "a"
    assert asyncio.run(host.aexecute("echo", {"text": "b"})).output == "b"
    assert log == ["sync before", "async", "sync after"] * 2


def test_an_interceptor_can_short_circuit_reject_and_add_attributes(host: PluginHost) -> None:
    def answer_directly(ctx: ToolContext, proceed: Any) -> ToolResult:
        return ToolResult.ok("from the interceptor")

    def reject(ctx: ToolContext, proceed: Any) -> ToolResult:
        return ToolResult.fail("permission_denied", "blocked by policy", rule="no-echo")

    seen: list[Any] = []

    class Tagger(Interceptor):
        def intercept(self, ctx: ToolContext, proceed: Any) -> ToolResult:
            ctx.attributes["trace_id"] = "t-1"
            return proceed(ctx)

    @tool(timeout=False)
    def traced(ctx: ToolContext) -> str:
        """Traced."""
        seen.append(ctx.attributes.get("trace_id"))
        return "ok"

    host.register(traced)
    assert (
        host.execute("echo", {"text": "x"}, interceptors=[answer_directly]).output
        == "from the interceptor"
    )
    rejected = host.execute("echo", {"text": "x"}, interceptors=[reject])
    assert rejected.error is not None
    assert (rejected.error.code, rejected.error.message, rejected.error.details) == (
        "permission_denied",
        "blocked by policy",
        {"rule": "no-echo"},
    )
    assert rejected.tool == "echo"
    assert rejected.call_id
    host.execute("traced", {}, interceptors=[Tagger()])
    assert seen == ["t-1"]


def test_an_interceptor_may_proceed_again(host: PluginHost) -> None:
    runs: list[int] = []

    @tool(timeout=False)
    def flaky() -> str:
        """Fails the first time."""
        runs.append(1)
        if len(runs) == 1:
            raise ConnectionError("reset")
        return "second time lucky"

    def retry_once(ctx: ToolContext, proceed: Any) -> ToolResult:
        result: ToolResult = proceed(ctx)
        return proceed(ctx) if not result.success else result

    host.register(flaky)
    assert host.execute("flaky", {}, interceptors=[retry_once]).output == "second time lucky"


def test_a_broken_interceptor_becomes_a_result_not_an_exception(host: PluginHost) -> None:
    def broken(ctx: ToolContext, proceed: Any) -> ToolResult:
        raise RuntimeError("bug in interceptor")

    def wrong_type(ctx: ToolContext, proceed: Any) -> Any:
        return "not a result"

    result = host.execute("echo", {"text": "x"}, interceptors=[broken])
    assert result.error is not None
    assert result.error.code == "tool_error"
    assert "bug in interceptor" in result.error.message
    assert (
        "not a ToolResult"
        in host.execute("echo", {"text": "x"}, interceptors=[wrong_type]).error.message
    )  # type: ignore[union-attr]


# --- built-in interceptors -------------------------------------------------------------------


def test_secret_masking_covers_nested_keys_and_spellings() -> None:
    value = {"user": "ada", "password": "p", "auth": {"Authorization": "Bearer x", "X-Api-Key": "k"},
             "items": [{"access_token": "t", "name": "n"}], "client_secret": "s"}  # fmt: skip
    assert mask_secrets(value) == {
        "user": "ada", "password": "***", "auth": {"Authorization": "***", "X-Api-Key": "***"},
        "items": [{"access_token": "***", "name": "n"}], "client_secret": "***"}  # fmt: skip
    assert mask_secrets({"pin": 1, "user": "x"}, keys=["pin"]) == {"pin": "***", "user": "x"}


def test_logging_interceptor_logs_calls_with_secrets_masked(make_host: Host) -> None:
    from loguru import logger

    @tool(timeout=False)
    def login(user: str, password: str, options: dict[str, str]) -> str:
        """Log in."""
        return "welcome"

    host = make_host(None, interceptors=[LoggingInterceptor()]).start()
    host.register(login)
    lines: list[str] = []
    logger.enable("agenthost")
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    try:
        host.execute(
            "login",
            {"user": "ada", "password": "hunter2", "options": {"api_token": "abc", "mode": "x"}},
            call_id="L1",
        )
    finally:
        logger.remove(sink)
        logger.disable("agenthost")
    assert (
        lines[0]
        == 'tool call login L1 session=None arguments={"user": "ada", "password": "***", "options": {"api_token": "***", "mode": "x"}}'
    )
    assert lines[1].startswith("tool call login L1 -> ok in ")
    assert "hunter2" not in " ".join(lines)
    assert "abc" not in " ".join(lines)


def test_metrics_count_calls_errors_by_code_and_latency(host: PluginHost) -> None:
    for _ in range(3):
        host.execute("echo", {"text": "x"})
    host.execute("echo", {"nope": 1})
    host.execute("missing", {})
    metrics = host.metrics()
    echo = metrics["tools"]["echo"]
    assert (echo["count"], echo["errors"]) == (4, {"invalid_arguments": 1})
    assert 0 < echo["latency_ms"]["p50"] <= echo["latency_ms"]["p95"] <= echo["latency_ms"]["p99"]
    assert metrics["tools"]["(unknown)"]["errors"] == {"unknown_tool": 1}
    assert host.metrics()["tools"]["echo"]["count"] == 4  # reading does not change the count


def test_metrics_count_every_call_from_many_threads(host: PluginHost) -> None:
    import threading

    def hammer() -> None:
        for _ in range(500):
            host.execute("echo", {"text": "x"})

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert host.metrics()["tools"]["echo"]["count"] == 4000


def test_caching_is_opt_in_per_tool_with_a_ttl_and_canonical_keys(make_host: Host) -> None:
    now = [0.0]
    runs: list[dict[str, Any]] = []

    @tool(cache_ttl=10, timeout=False)
    def lookup(city: str, units: dict[str, str]) -> str:
        """Cached lookup."""
        runs.append(units)
        return f"{city} #{len(runs)}"

    @tool(timeout=False)
    def uncached() -> str:
        """Not cached."""
        runs.append({})
        return str(len(runs))

    cache = CachingInterceptor(clock=lambda: now[0])
    host = make_host(None, interceptors=[cache]).start()
    host.register(lookup)
    host.register(uncached)
    first = host.execute("lookup", '{"city": "Oslo", "units": {"a": "1", "b": "2"}}')
    again = host.execute("lookup", '{"units": {"b": "2", "a": "1"},   "city": "Oslo"}')
    assert (first.output, again.output) == ("Oslo #1", "Oslo #1")
    assert again.call_id != first.call_id
    assert (
        host.execute(
            "lookup", {"city": "Oslo", "units": {"a": "1", "b": "2"}}, session="other"
        ).output
        == "Oslo #2"
    )
    now[0] = 11
    assert (
        host.execute("lookup", {"city": "Oslo", "units": {"a": "1", "b": "2"}}).output == "Oslo #3"
    )
    host.execute("uncached", {})
    assert host.execute("uncached", {}).output == "5"


def test_retry_only_for_idempotent_tools_with_backoff(make_host: Host) -> None:
    sleeps: list[float] = []
    runs = {"idem": 0, "plain": 0}

    @tool(idempotent=True, retries=3, timeout=False)
    def idem() -> str:
        """Idempotent and flaky."""
        runs["idem"] += 1
        if runs["idem"] < 3:
            raise TimeoutError("try again")
        return "ok"

    @tool(timeout=False)
    def plain() -> str:
        """Not idempotent."""
        runs["plain"] += 1
        raise TimeoutError("no retry for me")

    retry = RetryInterceptor(backoff=0.1, factor=2, jitter=0, sleep=sleeps.append)
    host = make_host(None, interceptors=[retry]).start()
    host.register(idem)
    host.register(plain)
    assert host.execute("idem", {}).output == "ok"
    assert sleeps == [0.1, 0.2]
    assert host.execute("plain", {}).error.code == "tool_error"  # type: ignore[union-attr]
    assert runs["plain"] == 1

    async def async_retry() -> ToolResult:
        slept: list[float] = []

        async def fake_sleep(seconds: float) -> None:
            slept.append(seconds)

        runs["idem"] = 0
        return await host.aexecute(
            "idem", {}, interceptors=[RetryInterceptor(jitter=0, async_sleep=fake_sleep)]
        )

    assert asyncio.run(async_retry()).output == "ok"
