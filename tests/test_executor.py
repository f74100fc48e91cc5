"""Calls: the order of checks, where each kind of tool runs, results, errors, timeouts, versions."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for, write

from agenthost import PluginHost, ToolContext, ToolResult, current_context, tool

Host = Callable[..., PluginHost]


@pytest.fixture
def host(make_host: Host) -> PluginHost:
    return make_host(None).start()


def test_a_call_returns_a_structured_result(host: PluginHost) -> None:
    @tool(timeout=False)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    host.register(add)
    result = host.execute("add", '{"a": 1, "b": 2}', call_id="c-1")
    assert isinstance(result, ToolResult)
    assert (result.success, result.output, result.data, result.error) == (True, "3", 3, None)
    assert (result.tool, result.plugin, result.version, result.call_id) == (
        "add",
        "(host)",
        None,
        "c-1",
    )
    assert result.duration_ms > 0
    assert host.execute("add", {"a": 2, "b": 2}).output == "4"
    assert host.execute("add", b'{"a": 3, "b": 2}').output == "5"
    assert (
        host.execute("add", {"a": 1, "b": 1}).call_id
        != host.execute("add", {"a": 1, "b": 1}).call_id
    )


def test_unknown_tools_get_close_name_suggestions(host: PluginHost) -> None:
    for name in ("search_docs", "search_web", "send_mail"):
        host.register(lambda: "x", name=name, description="A tool.")
    result = host.execute("search_doc", {})
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    assert (
        result.error.message
        == "unknown tool 'search_doc'; did you mean 'search_docs', 'search_web'?"
    )
    assert result.error.details == {"suggestions": ["search_docs", "search_web"]}
    assert host.execute("zzz", {}).error.message == "unknown tool 'zzz'"  # type: ignore[union-attr]


def test_permissions_are_checked_before_the_arguments_are_parsed(host: PluginHost) -> None:
    calls: list[str] = []

    @tool(permissions={"fs.write"})
    def write_file(path: str) -> str:
        """Write."""
        calls.append(path)
        return path

    host.register(write_file)
    assert host.execute("write_file", "{not json").error.code == "permission_denied"  # type: ignore[union-attr]
    assert calls == []


@pytest.mark.parametrize(
    ("arguments", "paths"),
    [
        ("{not json", ["$"]),
        ("[1, 2]", ["$"]),
        ('{"a": 1, "b": 2, "c": 3}', ["$.c"]),
        ('{"a": "1", "b": 2}', ["$.a"]),
        ('{"a": 1}', ["$.b"]),
    ],
)
def test_invalid_arguments_never_reach_the_tool(
    host: PluginHost, arguments: str, paths: list[str]
) -> None:
    calls: list[tuple[int, int]] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        calls.append((a, b))
        return a + b

    host.register(add)
    result = host.execute("add", arguments)
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert [e["path"] for e in result.error.details["errors"]] == paths
    assert calls == []


class Shape:
    def __str__(self) -> str:
        return "a shape"


@pytest.mark.parametrize(
    ("value", "output", "data"),
    [
        ("text", "text", None),
        (None, "", None),
        (3, "3", 3),
        (2.5, "2.5", 2.5),
        (True, "true", True),
        ({"b": [1, 2]}, '{"b":[1,2]}', {"b": [1, 2]}),
        ([1, "x"], '[1,"x"]', [1, "x"]),
        ((1, 2), "[1,2]", [1, 2]),
        (b"caf\xc3\xa9", "café", None),
        (
            b"\xff\x00",
            "[2 bytes of binary data, base64 in data]",
            {"type": "bytes", "base64": "/wA=", "size": 2},
        ),
        (Shape(), "a shape", None),
        (float("nan"), "nan", None),
    ],
)
def test_return_values_are_normalised(host: PluginHost, value: Any, output: str, data: Any) -> None:
    host.register(lambda: value, name="give", description="Give.")
    result = host.execute("give", {})
    assert (result.success, result.output, result.data) == (True, output, data)


def test_models_and_dataclasses_become_json_data(host: PluginHost) -> None:
    from typezoo import Address, Point

    host.register(lambda: Address(street="s", city="c"), name="model", description="Model.")
    host.register(lambda: Point(1, 2), name="dataclass", description="Dataclass.")
    assert host.execute("model", {}).data == {"street": "s", "city": "c"}
    assert host.execute("dataclass", {}).output == '{"x":1,"y":2}'


def test_long_output_is_truncated_visibly(make_host: Host) -> None:
    host = make_host(None, max_output=100).start()
    host.register(lambda: "x" * 1000, name="long", description="Long.")
    host.register(lambda: list(range(1000)), name="long_data", description="Long data.")
    result = host.execute("long", {})
    assert result.output == "x" * 100 + "\n[truncated: 1,000 characters, the first 100 shown]"
    assert result.truncated
    data_result = host.execute("long_data", {})
    assert data_result.truncated
    assert data_result.data is None
    assert data_result.output.endswith("[truncated: 3,891 characters, the first 100 shown]")


def test_an_exception_becomes_tool_error_and_the_traceback_goes_to_the_log(
    host: PluginHost,
) -> None:
    from loguru import logger

    def explode() -> str:
        """Explode."""
        raise KeyError("missing")

    host.register(explode)
    logged: list[str] = []
    logger.enable("agenthost")
    sink = logger.add(lambda m: logged.append(str(m)), level="WARNING")
    try:
        result = host.execute("explode", {})
    finally:
        logger.remove(sink)
        logger.disable("agenthost")
    assert result.error is not None
    assert (result.error.code, result.error.message) == ("tool_error", "KeyError: 'missing'")
    assert result.error.details == {"type": "KeyError"}
    assert "Traceback" not in result.output
    assert any("Traceback" in line and "explode" in line for line in logged)


def test_definition_only_tools_hand_the_call_back(host: PluginHost) -> None:
    @tool(definition_only=True)
    def confirm(question: str) -> bool:
        """Ask the user."""
        raise AssertionError("never run by the host")

    host.register(confirm)
    result = host.execute("confirm", {"question": "ok?"}, call_id="c9")
    assert result.error is not None
    assert result.error.code == "requires_action"
    assert result.error.details == {
        "call": {"id": "c9", "name": "confirm", "arguments": {"question": "ok?"}}
    }


def test_calls_after_stop_are_unavailable(make_host: Host) -> None:
    host = make_host(None).start()
    host.register(lambda: 1, name="one", description="One.")
    host.stop()
    result = host.execute("one", {})
    assert result.error is not None
    assert result.error.code == "unavailable"


# --- where tools run --------------------------------------------------------------------------


def test_sync_tools_without_timeout_run_inline_and_with_timeout_in_a_worker(
    host: PluginHost,
) -> None:
    @tool(timeout=False)
    def inline() -> str:
        """Where."""
        return threading.current_thread().name

    @tool(timeout=5)
    def worker() -> str:
        """Where."""
        return threading.current_thread().name

    host.register(inline)
    host.register(worker)
    assert host.execute("inline", {}).output == threading.current_thread().name
    assert host.execute("worker", {}).output == "agenthost-worker"


def test_from_aexecute_sync_tools_never_run_on_the_loop(host: PluginHost) -> None:
    @tool(timeout=False)
    def where() -> str:
        """Where."""
        return threading.current_thread().name

    @tool
    async def where_async() -> str:
        """Where."""
        return threading.current_thread().name

    host.register(where)
    host.register(where_async)

    async def main() -> tuple[str, str]:
        return (await host.aexecute("where", {})).output, (
            await host.aexecute("where_async", {})
        ).output

    sync_thread, async_thread = asyncio.run(main())
    assert sync_thread == "agenthost-worker"
    assert async_thread == threading.current_thread().name  # the caller's loop
    assert host.execute("where_async", {}).output == "agenthost-loop"


def test_sync_and_async_tools_do_not_block_each_other(host: PluginHost) -> None:
    release = threading.Event()

    @tool(timeout=10)
    def blocking() -> str:
        """Blocks a worker until released."""
        release.wait(10)
        return "released"

    @tool
    async def quick() -> str:
        """Async."""
        await asyncio.sleep(0)
        return "quick"

    host.register(blocking)
    host.register(quick)

    async def main() -> list[str]:
        slow = asyncio.ensure_future(host.aexecute("blocking", {}))
        fast = (await host.aexecute("quick", {})).output
        release.set()
        return [fast, (await slow).output]

    assert asyncio.run(main()) == ["quick", "released"]


def test_execute_many_runs_concurrently_and_keeps_input_order(host: PluginHost) -> None:
    barrier = threading.Barrier(3, timeout=5)

    @tool(timeout=5)
    def meet(n: int) -> int:
        """All three must run at the same time to pass the barrier."""
        barrier.wait()
        return n

    host.register(meet)
    calls = [("meet", {"n": 1}), {"name": "meet", "arguments": '{"n": 2}', "id": "b"},
             {"id": "c", "type": "function", "function": {"name": "meet", "arguments": '{"n": 3}'}}]  # fmt: skip
    results = host.execute_many(calls)
    assert [r.output for r in results] == ["1", "2", "3"]
    assert [r.call_id for r in results][1:] == ["b", "c"]
    bad = host.execute_many([("meet",)])  # type: ignore[list-item]
    assert bad[0].error is not None
    assert bad[0].error.code == "invalid_arguments"


def test_aexecute_many_accepts_anthropic_and_gemini_call_shapes(host: PluginHost) -> None:
    host.register(lambda x: x * 2, name="double", description="Double.", input_schema={
        "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})  # fmt: skip
    calls = [{"type": "tool_use", "id": "toolu_1", "name": "double", "input": {"x": 2}},
             {"name": "double", "args": {"x": 5}}]  # fmt: skip
    results = asyncio.run(host.aexecute_many(calls))
    assert next((r.output, r.call_id) for r in results) == ("4", "toolu_1")
    assert results[1].output == "10"


# --- context ----------------------------------------------------------------------------------


def test_tool_context_is_injected_and_reachable_everywhere(host: PluginHost) -> None:
    seen: dict[str, Any] = {}

    @tool(timeout=5)
    def sync_tool(x: int, ctx: ToolContext) -> str:
        """Sync."""
        seen["sync"] = (ctx, current_context())
        box: list[Any] = []
        thread = threading.Thread(target=lambda: box.append(current_context()))
        thread.start()
        thread.join()
        seen["plain thread"] = box[0]
        return "ok"

    @tool
    async def async_tool(x: int, ctx: ToolContext | None = None) -> str:
        """Async."""
        seen["async"] = (ctx, current_context())
        seen["task"] = await asyncio.ensure_future(_context_in_task())
        return "ok"

    host.register(sync_tool)
    host.register(async_tool)
    host.permissions.grant("s1", "x")
    host.execute("sync_tool", '{"x": 1}', session="s1", call_id="k1")
    ctx, current = seen["sync"]
    assert current is ctx
    assert (ctx.name, ctx.call_id, ctx.session, ctx.raw_arguments, ctx.arguments) == (
        "sync_tool", "k1", "s1", '{"x": 1}', {"x": 1})  # fmt: skip
    assert ctx.plugin == "(host)"
    assert seen["plain thread"] is None  # threads the tool starts itself do not inherit it
    asyncio.run(host.aexecute("async_tool", {"x": 2}))
    ctx, current = seen["async"]
    assert current is ctx
    assert seen["task"] is ctx
    assert current_context() is None


async def _context_in_task() -> Any:
    return current_context()


def test_current_context_works_on_the_inline_fast_path(host: PluginHost) -> None:
    @tool(timeout=False)
    def plain(x: int) -> str:
        """Plain."""
        ctx = current_context()
        assert ctx is not None
        assert current_context() is ctx
        ctx.attributes["seen"] = True
        return f"{ctx.name}:{ctx.call_id}:{ctx.arguments}"

    host.register(plain)
    assert host.execute("plain", {"x": 1}, call_id="id7").output == "plain:id7:{'x': 1}"


# --- timeouts ---------------------------------------------------------------------------------


def test_a_timeout_beyond_what_clocks_can_wait_for_means_none(make_host: Host) -> None:
    host = make_host(None).start()

    @tool(timeout=1e20)
    def patient() -> str:
        """Wait as long as it takes."""
        return "done"

    host.register(patient)
    assert host.execute("patient").output == "done"
    assert host.execute("patient", timeout=1e300).output == "done"
    assert asyncio.run(host.aexecute("patient", timeout=1e20)).output == "done"


def test_timeouts_come_from_the_call_then_the_tool_then_the_host(make_host: Host) -> None:
    host = make_host(None, default_timeout=0.2).start()

    @tool
    def host_default(seconds: float) -> str:
        """Sleep."""
        time.sleep(seconds)
        return "done"

    @tool(timeout=0.1)
    def own_timeout(seconds: float) -> str:
        """Sleep."""
        time.sleep(seconds)
        return "done"

    host.register(host_default)
    host.register(own_timeout)
    result = host.execute("host_default", {"seconds": 1})
    assert result.error is not None
    assert result.error.details["timeout"] == 0.2
    assert host.execute("host_default", {"seconds": 0.3}, timeout=2).output == "done"
    assert host.execute("own_timeout", {"seconds": 1}).error.details["timeout"] == 0.1  # type: ignore[union-attr]
    assert (
        host.execute("own_timeout", {"seconds": 1}, timeout=0.05).error.details["timeout"] == 0.05
    )  # type: ignore[union-attr]


def test_a_hung_sync_tool_times_out_on_time_and_its_thread_is_counted(make_host: Host) -> None:
    host = make_host(None, max_workers=1).start()
    release = threading.Event()

    @tool(timeout=0.1)
    def hang() -> str:
        """Hang."""
        release.wait(10)
        return "late"

    @tool(timeout=2)
    def fine() -> str:
        """Fine."""
        return "fine"

    host.register(hang)
    host.register(fine)
    started = time.monotonic()
    result = host.execute("hang", {})
    assert time.monotonic() - started < 1.0
    assert result.error is not None
    assert (
        result.error.message
        == "tool 'hang' did not finish within 0.1 s; its thread keeps running (only process isolation can stop it)"
    )
    assert host.metrics()["abandoned_threads"] == 1
    assert host.execute("fine", {}).output == "fine"  # the only worker is replaced
    release.set()


def test_a_hung_async_tool_is_cancelled(host: PluginHost) -> None:
    cancelled = threading.Event()

    @tool(timeout=0.1)
    async def stuck() -> str:
        """Stuck."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    host.register(stuck)
    assert host.execute("stuck", {}).error.code == "timeout"  # type: ignore[union-attr]
    wait_for(cancelled.is_set, what="the async tool to be cancelled")
    cancelled.clear()
    result = asyncio.run(host.aexecute("stuck", {}))
    assert result.error is not None
    assert result.error.code == "timeout"
    assert cancelled.is_set()


# --- streaming --------------------------------------------------------------------------------


def test_streams_are_ordered_started_deltas_completed(host: PluginHost) -> None:
    @tool
    def count(n: int) -> Iterator[str]:
        """Count."""
        for i in range(n):
            yield f"{i},"

    @tool
    async def acount(n: int) -> Any:
        """Count asynchronously."""
        for i in range(n):
            await asyncio.sleep(0)
            yield {"i": i}

    host.register(count)
    host.register(acount)
    events = list(host.stream("count", {"n": 3}))
    assert [(e.kind, e.text) for e in events] == [
        ("started", ""), ("delta", "0,"), ("delta", "1,"), ("delta", "2,"), ("completed", "")]  # fmt: skip
    assert events[-1].result is not None
    assert events[-1].result.output == "0,1,2,"

    async def collect() -> list[Any]:
        return [e async for e in host.astream("acount", {"n": 2})]

    events = asyncio.run(collect())
    assert [e.text for e in events if e.kind == "delta"] == ['{"i":0}\n', '{"i":1}\n']
    assert host.execute("count", {"n": 2}).output == "0,1,"


def test_a_generator_whose_reader_stops_is_paused_or_stopped_never_buffered(
    host: PluginHost,
) -> None:
    """A thread's generator waits for its reader; one on an event loop, which cannot
    wait, is stopped once it runs a megabyte ahead (both used to run to the end)."""
    made: list[int] = []
    made_async: list[int] = []

    @tool(timeout=30)
    def flood(n: int) -> Iterator[str]:
        """A hundred kilobytes at a time."""
        for i in range(n):
            made.append(i)
            yield "x" * 100_000

    @tool(timeout=30)
    async def aflood(n: int) -> Any:
        """A hundred kilobytes at a time, on the host's loop."""
        for i in range(n):
            made_async.append(i)
            yield "y" * 100_000

    host.register(flood)
    host.register(aflood)

    async def stall_then_read(name: str, produced: list[int]) -> tuple[int, list[Any]]:
        stream = host.astream(name, {"n": 100})
        assert (await anext(stream)).kind == "started"
        deadline = time.monotonic() + 10
        while len(produced) < 11 and time.monotonic() < deadline:  # past the megabyte
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # a generator that does not wait would be at 100 by now
        ahead = len(produced)
        return ahead, [event async for event in stream]

    ahead, events = asyncio.run(stall_then_read("flood", made))
    assert 11 <= ahead < 20
    assert len([e for e in events if e.kind == "delta"]) == 100  # paused, nothing lost
    assert events[-1].result is not None
    assert events[-1].result.success
    _, events = asyncio.run(stall_then_read("aflood", made_async))
    stopped = events[-1].result
    assert stopped is not None
    assert stopped.error is not None
    assert stopped.error.code == "cancelled"
    assert "1024 kB of output ahead of its reader" in stopped.error.message


def test_a_non_streaming_tool_streams_its_whole_output_once(host: PluginHost) -> None:
    host.register(lambda: "all at once", name="whole", description="Whole.")
    events = list(host.stream("whole", {}))
    assert [(e.kind, e.text) for e in events] == [
        ("started", ""),
        ("delta", "all at once"),
        ("completed", ""),
    ]
    failed = list(host.stream("nope", {}))
    assert [e.kind for e in failed] == ["started", "completed"]
    assert failed[-1].result.error.code == "unknown_tool"  # type: ignore[union-attr]


def test_concurrent_streams_deliver_each_call_whole_never_interleaved(host: PluginHost) -> None:
    @tool
    async def talk(who: str, n: int) -> Any:
        """Talk slowly."""
        for i in range(n):
            await asyncio.sleep(0.005)
            yield f"{who}{i} "

    host.register(talk)
    started = time.monotonic()
    events = list(
        host.stream_many([("talk", {"who": "a", "n": 10}), ("talk", {"who": "b", "n": 10})])
    )
    elapsed = time.monotonic() - started
    order = [e.index for e in events]
    assert order == sorted(order)  # all of call 0, then all of call 1
    assert next(e.kind for e in events if e.index == 1) == "started"
    assert "".join(e.text for e in events if e.index == 0) == "a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 "
    assert elapsed < 0.5  # they ran at the same time (each alone takes >= 50 ms)


# --- versions ---------------------------------------------------------------------------------


def test_a_call_runs_entirely_on_the_version_it_started_on(
    plugin_dir: Path, make_host: Host
) -> None:
    source = """
        import threading
        from agenthost import tool
        VERSION = {v}
        GATE = threading.Event()
        STARTED = threading.Event()

        @tool(timeout=10)
        def pinned() -> str:
            "Pinned."
            STARTED.set()
            GATE.wait(10)
            from pkg import helper  # a lazy import after the reload
            return f"{{VERSION}}:{{helper.VERSION}}"
        """
    write(plugin_dir / "pkg" / "__init__.py", source.format(v=1))
    write(plugin_dir / "pkg" / "helper.py", "VERSION = 1\n")
    host = make_host(plugin_dir).start()
    old_module = host._snapshot.tools["pinned"].owner.namespace.import_module("pkg")  # type: ignore[union-attr]
    box: list[ToolResult] = []
    thread = threading.Thread(target=lambda: box.append(host.execute("pinned", {})))
    thread.start()
    wait_for(old_module.STARTED.is_set, what="the call to start")
    write(plugin_dir / "pkg" / "__init__.py", source.format(v=2))
    write(plugin_dir / "pkg" / "helper.py", "VERSION = 2\n")
    host.rescan()
    old_module.GATE.set()
    thread.join(10)
    assert box[0].output == "1:1"
    new_module = host._snapshot.tools["pinned"].owner.namespace.import_module("pkg")  # type: ignore[union-attr]
    new_module.GATE.set()
    assert host.execute("pinned", {}).output == "2:2"


def test_on_unload_waits_for_the_calls_of_its_version(plugin_dir: Path, make_host: Host) -> None:
    source = """
        import threading
        from agenthost import tool
        GATE, STARTED, UNLOADED = threading.Event(), threading.Event(), threading.Event()

        @tool(timeout=10)
        def slow() -> str:
            "Slow."
            STARTED.set()
            GATE.wait(10)
            return "{v}"

        def on_unload():
            UNLOADED.set()
        """
    write(plugin_dir / "gated.py", source.format(v="v1"))
    host = make_host(plugin_dir).start()
    module = host._snapshot.tools["slow"].owner.namespace.import_module("gated")  # type: ignore[union-attr]
    box: list[ToolResult] = []
    thread = threading.Thread(target=lambda: box.append(host.execute("slow", {})))
    thread.start()
    wait_for(module.STARTED.is_set, what="the call to start")
    write(plugin_dir / "gated.py", source.format(v="v2"))
    host.rescan()
    assert not module.UNLOADED.is_set()  # its call is still running
    module.GATE.set()
    thread.join(10)
    assert box[0].output == "v1"
    wait_for(module.UNLOADED.is_set, what="on_unload after the last call")
