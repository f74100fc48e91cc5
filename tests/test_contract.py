"""The call contract: whatever the input or the tool does, every call API returns a result.

Each test drives every public call path (``execute`` inline, in the worker pool
and on the host loop, ``aexecute``, the batch and streaming forms) with hostile
input or a misbehaving tool, and checks the result, never an exception.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenthost import (
    InvalidArgumentsError,
    PluginHost,
    ToolDefinition,
    ToolDefinitionError,
    ToolResult,
    tool,
)

Host = Callable[..., PluginHost]
NESTING_LIMIT = 200  # documented in the README: levels of objects and arrays below the arguments


# --- every call path ---------------------------------------------------------------------------


def _last_result(events: Any) -> ToolResult:
    results = [event.result for event in events if event.kind == "completed"]
    assert len(results) == 1
    assert isinstance(results[0], ToolResult)
    return results[0]


async def _astream(host: PluginHost, name: str, arguments: Any) -> ToolResult:
    return _last_result([event async for event in host.astream(name, arguments)])


CALLS: dict[str, Callable[[PluginHost, str, Any], ToolResult]] = {
    "execute": lambda host, name, args: host.execute(name, args),
    "aexecute": lambda host, name, args: asyncio.run(host.aexecute(name, args)),
    "execute_many": lambda host, name, args: host.execute_many([(name, args)])[0],
    "aexecute_many": lambda host, name, args: asyncio.run(host.aexecute_many([(name, args)]))[0],
    "stream": lambda host, name, args: _last_result(host.stream(name, args)),
    "astream": lambda host, name, args: asyncio.run(_astream(host, name, args)),
    "stream_many": lambda host, name, args: _last_result(host.stream_many([(name, args)])),
}


def encodes(result: ToolResult) -> None:
    """What the application sends on: the content as UTF-8, the record as JSON."""
    result.content.encode("utf-8")
    json.loads(result.to_json(), parse_constant=refuse)  # strict JSON: no NaN or Infinity


def refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


# --- tools of every kind, told by their arguments how to misbehave ---------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken too")


class Unrepresentable:
    def __str__(self) -> str:
        raise ValueError("no str")

    def __repr__(self) -> str:
        raise ValueError("no repr")


def deep_list(depth: int) -> list[Any]:
    """``[]`` nested ``depth`` levels (``deep_list(1) == []``), built without recursion."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


RAISED: dict[str, Callable[[], BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "SystemExit": lambda: SystemExit(3),
    "Unprintable": Unprintable,
    "ValueError": lambda: ValueError("bad \ud800 surrogate"),
}
RETURNED: dict[str, Callable[[], Any]] = {
    "bigint": lambda: 10**5000,
    "bigint_in_dict": lambda: {"x": 10**5000, "y": [1, 10**5000]},
    "surrogate": lambda: "lone \ud800 surrogate",
    "surrogate_in_dict": lambda: {"s": "\udfff"},
    "unrepresentable": Unrepresentable,
    "deep": lambda: deep_list(100_000),
    "nan": lambda: float("nan"),
    "nan_in_dict": lambda: {"ratio": [float("nan"), float("-inf")]},
    "ok": lambda: "fine",
}


def behave(mode: str) -> Any:
    if mode in RAISED:
        raise RAISED[mode]()
    return RETURNED[mode]()


def make_tools(host: PluginHost) -> None:
    @tool(timeout=False)
    def inline(mode: str = "ok", payload: Any = None) -> Any:
        """Runs in the caller's thread."""
        return behave(mode)

    @tool(timeout=5)
    def worker(mode: str = "ok", payload: Any = None) -> Any:
        """Runs in the worker pool."""
        return behave(mode)

    @tool(timeout=5)
    async def coroutine(mode: str = "ok", payload: Any = None) -> Any:
        """Runs on an event loop."""
        await asyncio.sleep(0)
        return behave(mode)

    @tool(timeout=False)
    async def coroutine_inline(mode: str = "ok", payload: Any = None) -> Any:
        """Awaited without a timeout (the async fast path)."""
        return behave(mode)

    @tool(timeout=5)
    def generator(mode: str = "ok", payload: Any = None) -> Iterator[str]:
        """Streams, then misbehaves."""
        yield "first "
        yield str(behave(mode)) if mode in RAISED else "done"

    @tool(timeout=5)
    async def async_generator(mode: str = "ok", payload: Any = None) -> Any:
        """Streams on an event loop, then misbehaves."""
        yield "first "
        await asyncio.sleep(0)
        yield str(behave(mode)) if mode in RAISED else "done"

    for fn in (inline, worker, coroutine, coroutine_inline, generator, async_generator):
        host.register(fn)
    host.register(
        ToolDefinition.from_schema(
            "handwritten",
            {"type": "object", "properties": {"payload": {}}},
            description="Validated with jsonschema.",
            function=lambda payload=None: "ok",
        )
    )


TOOLS = ["inline", "worker", "coroutine", "coroutine_inline", "generator", "async_generator"]


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginHost]:
    scratch = tmp_path_factory.mktemp("contract")
    host = PluginHost(None, installed=False, cache_dir=scratch).start()
    make_tools(host)
    yield host
    host.stop()


# --- A. arguments ------------------------------------------------------------------------------


def _deep_text(depth: int) -> str:
    return '{"payload": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("api", list(CALLS))
@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("form", ["text", "dict"])
@pytest.mark.parametrize("name", ["inline", "coroutine", "handwritten"])
def test_deeply_nested_arguments_are_invalid_arguments(
    host: PluginHost, api: str, depth: int, form: str, name: str
) -> None:
    arguments: Any = _deep_text(depth) if form == "text" else {"payload": deep_list(depth)}
    result = CALLS[api](host, name, arguments)
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert f"more than {NESTING_LIMIT} levels" in result.error.message
    encodes(result)


@pytest.mark.parametrize("form", ["text", "dict"])
@pytest.mark.parametrize("name", ["inline", "worker", "handwritten"])
def test_the_nesting_limit_is_exact(host: PluginHost, form: str, name: str) -> None:
    def arguments(depth: int) -> Any:
        return _deep_text(depth) if form == "text" else {"payload": deep_list(depth)}

    assert host.execute(name, arguments(NESTING_LIMIT)).success
    beyond = host.execute(name, arguments(NESTING_LIMIT + 1))
    assert beyond.error is not None
    assert beyond.error.code == "invalid_arguments"


@pytest.mark.parametrize("api", list(CALLS))
@pytest.mark.parametrize(
    "text",
    [
        '{"payload": NaN}',
        '{"payload": Infinity}',
        '{"payload": -Infinity}',
        '{"payload": {"ratio": NaN}}',
        '{"payload": [1, Infinity]}',
    ],
)
def test_non_finite_numbers_are_not_json(host: PluginHost, api: str, text: str) -> None:
    result = CALLS[api](host, "inline", text)
    assert result.error is not None
    assert result.error.code == "invalid_arguments"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_in_a_dict_are_refused_too(host: PluginHost, value: float) -> None:
    for name in ("inline", "handwritten"):
        result = host.execute(name, {"payload": {"deep": [value]}})
        assert result.error is not None
        assert result.error.code == "invalid_arguments"


def test_a_number_beyond_float_range_never_reaches_a_float_parameter_as_infinity() -> None:
    def simple(x: float) -> float:
        """A signature the simple validator handles."""
        return x

    def general(x: float, when: datetime.date | None = None) -> float:
        """A signature pydantic's generated validator handles."""
        return x

    for fn in (simple, general):
        validator = ToolDefinition.from_function(tool(fn)).validator
        with pytest.raises(InvalidArgumentsError, match="finite number"):
            validator.validate('{"x": 1e400}')
        assert validator.validate('{"x": 1e300}')["x"] == 1e300


@pytest.mark.parametrize("api", list(CALLS))
@pytest.mark.parametrize(
    "text",
    [
        '{"mode": "ok", "mode": "SystemExit"}',
        '{"payload": {"a": 1, "a": 2}}',
        '{"payload": [{"k": 1}, {"k": 2, "k": 3}]}',
        '{"mode": "ok", "\\u006dode": "SystemExit"}',  # the same key, escaped
    ],
)
def test_objects_with_duplicate_keys_are_refused(host: PluginHost, api: str, text: str) -> None:
    for name in ("inline", "handwritten"):
        result = CALLS[api](host, name, text)
        assert result.error is not None, name
        assert result.error.code == "invalid_arguments"
        assert "duplicate key" in result.error.message


def test_error_reports_are_bounded(host: PluginHost) -> None:
    wrong = {f"wrong_{i}": i for i in range(100_000)}
    for arguments in (wrong, json.dumps(wrong), {"payload": None, **wrong}):
        result = host.execute("inline", arguments)
        assert result.error is not None
        assert result.error.code == "invalid_arguments"
        assert len(result.error.message) < 2_000
        assert "100,000 problems" in result.error.message
        assert "and 99,990 more" in result.error.message
        assert len(result.error.details["errors"]) == 10
        assert result.error.details["error_count"] == 100_000


def test_one_huge_key_or_value_gives_a_short_error(host: PluginHost) -> None:
    huge = "k" * 1_000_000
    for arguments in ({huge: 1}, {"mode": huge * 2, "payload": None, huge: [huge]}):
        result = host.execute("worker", arguments)
        assert result.error is not None
        assert result.error.code == "invalid_arguments"
        assert len(result.error.message) < 2_000


def test_in_a_batch_one_bad_call_never_loses_the_others(host: PluginHost) -> None:
    class Hostile:
        def __getattr__(self, name: str) -> Any:
            raise KeyboardInterrupt

    calls = [
        ("inline", {"payload": deep_list(100_000)}),
        ("inline", {"mode": "ok"}),
        ("worker", _deep_text(100_000)),
        ("coroutine", {"mode": "SystemExit"}),
        (["not", "a", "name"], {}),
        ("no_such_tool", {}),
        Hostile(),
        ("coroutine", '{"mode": "ok"}'),
    ]
    expected = [
        "invalid_arguments",
        "fine",
        "invalid_arguments",
        "tool_error",
        "invalid_arguments",
        "unknown_tool",
        "invalid_arguments",
        "fine",
    ]

    def outcome(results: list[ToolResult]) -> list[str]:
        return [r.error.code if r.error else r.output for r in results]

    assert outcome(host.execute_many(calls)) == expected
    assert outcome(asyncio.run(host.aexecute_many(calls))) == expected
    completed = [e.result for e in host.stream_many(calls) if e.kind == "completed"]
    assert outcome(completed) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("api", list(CALLS))
@pytest.mark.parametrize("name", [["a", "list"], {"a": "dict"}, None, 7])
def test_a_name_that_is_not_a_string_is_refused(host: PluginHost, api: str, name: Any) -> None:
    result = CALLS[api](host, name, {})
    assert result.error is not None
    # a batch reads each call first: a call without a string name cannot be read
    assert result.error.code == ("invalid_arguments" if "many" in api else "unknown_tool")
    encodes(result)


# --- A. tools that misbehave ------------------------------------------------------------------


@pytest.mark.parametrize("api", list(CALLS))
@pytest.mark.parametrize("name", TOOLS)
@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "GeneratorExit", "SystemExit"])
def test_base_exceptions_raised_by_tools_are_tool_errors(
    host: PluginHost, api: str, name: str, raised: str
) -> None:
    result = CALLS[api](host, name, {"mode": raised})
    assert result.error is not None
    assert result.error.code == "tool_error"
    assert result.error.message.startswith(raised)
    assert result.error.details["type"] == raised
    # the host's loop thread survived: async tools called from sync code still work
    assert host.execute("coroutine", {}).output == "fine"
    assert host.execute_many([("coroutine", {}), ("worker", {})])[1].output == "fine"


@pytest.mark.parametrize("api", list(CALLS))
@pytest.mark.parametrize("name", TOOLS)
def test_an_exception_whose_str_raises_is_still_explained(
    host: PluginHost, api: str, name: str
) -> None:
    result = CALLS[api](host, name, {"mode": "Unprintable"})
    assert result.error is not None
    assert result.error.code == "tool_error"
    assert result.error.message.startswith("Unprintable")
    encodes(result)


@pytest.mark.parametrize("api", list(CALLS))
@pytest.mark.parametrize("name", ["inline", "worker", "coroutine", "coroutine_inline"])
@pytest.mark.parametrize("mode", [m for m in RETURNED if m != "ok"])
def test_return_values_that_cannot_be_encoded_still_give_a_result(
    host: PluginHost, api: str, name: str, mode: str
) -> None:
    result = CALLS[api](host, name, {"mode": mode})
    assert result.success, result
    encodes(result)
    if mode.startswith("bigint"):
        assert "0" * 4000 in result.output  # the digits, as JSON writes them
    if mode.startswith("surrogate"):
        assert "\ud800" not in result.output
        assert "\udfff" not in result.output


def test_an_exception_message_with_a_lone_surrogate_is_encodable(host: PluginHost) -> None:
    for name in TOOLS:
        result = host.execute(name, {"mode": "ValueError"})
        assert result.error is not None
        assert result.error.code == "tool_error"
        assert result.error.message.startswith("ValueError: bad ")
        encodes(result)


# --- A. nested calls ---------------------------------------------------------------------------


def test_a_40_deep_chain_of_nested_calls_never_starves_the_pool(make_host: Host) -> None:
    host = make_host(None, max_workers=32).start()

    @tool(timeout=30)
    def chain(n: int) -> int:
        """Calls itself n times, each call waiting for the next (an agent as a tool)."""
        if n == 0:
            return 0
        inner = host.execute("chain", {"n": n - 1})
        assert inner.success, inner
        return int(inner.output) + 1

    host.register(chain)
    result = host.execute("chain", {"n": 40})
    assert (result.success, result.output) == (True, "40"), result


def test_40_concurrent_calls_that_each_nest_one_call_all_succeed(make_host: Host) -> None:
    host = make_host(None, max_workers=32).start()
    # The first 32 nested calls wait until all 32 run at once: that can only happen while
    # the 32 calls waiting for them hold no worker.
    all_nested_running = threading.Barrier(32, timeout=20)
    first = threading.Semaphore(32)

    @tool(timeout=30)
    def leaf() -> str:
        """The nested call."""
        if first.acquire(blocking=False):
            all_nested_running.wait()
        return "leaf"

    @tool(timeout=30)
    def outer() -> str:
        """Waits for the nested call."""
        return host.execute("leaf", {}).output

    host.register(leaf)
    host.register(outer)
    results = host.execute_many([("outer", {})] * 40)
    assert [r.output for r in results] == ["leaf"] * 40, [r.error for r in results]
    outputs: list[str] = []
    threads = [
        threading.Thread(target=lambda: outputs.append(host.execute("outer", {}).output))
        for _ in range(40)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert outputs == ["leaf"] * 40


# --- A. names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["add\n", "add\r\n", "\nadd", "add\x00"])
def test_a_tool_name_must_match_the_rule_as_a_whole(name: str) -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    with pytest.raises(ToolDefinitionError, match="is invalid"):
        ToolDefinition.from_function(tool(name=name)(add))
    with pytest.raises(ToolDefinitionError, match="is invalid"):
        ToolDefinition.from_schema(name, {"type": "object", "properties": {}})


def test_a_permission_must_match_the_rule_as_a_whole() -> None:
    def fetch(url: str) -> str:
        """Fetch."""
        return url

    with pytest.raises(ToolDefinitionError, match=re.escape("permission 'http.get\\n' is invalid")):
        ToolDefinition.from_function(tool(permissions={"http.get\n"})(fetch))


# --- the property: any input, any behaviour, every API, always a result ------------------------

JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities included: they must be refused
    | st.text()  # lone surrogates included
    | st.sampled_from(["ok", *RAISED, *RETURNED])
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)
RAW_TEXTS = st.sampled_from(
    [
        _deep_text(100_000),
        '{"payload": ' + "1" * 5_000 + "}",
        '{"payload": 1e400}',
        '{"payload": "\\ud800"}',
        '{"mode": "ok", "mode": "ok"}',
        '{"payload": NaN}',
        "[1, 2]",
        "",
        "null",
        '{"payload": "unterminated',
        "\ud800",
    ]
)
ARGUMENTS = (
    st.fixed_dictionaries(
        {"mode": st.sampled_from(["ok", *RAISED, *RETURNED])}, optional={"payload": JSON_VALUES}
    )
    | st.dictionaries(st.sampled_from(["mode", "payload", "other"]), JSON_VALUES, max_size=3)
    | RAW_TEXTS
    | JSON_VALUES.map(lambda v: json.dumps({"payload": v}))
    | st.sampled_from([{"payload": deep_list(100_000)}, {"payload": object()}, {1: 2}, b"\xff", 7])
)


@given(
    api=st.sampled_from(list(CALLS)),
    name=st.sampled_from([*TOOLS, "handwritten", "missing"]),
    arguments=ARGUMENTS,
)
def test_every_call_api_returns_a_result_for_anything(
    host: PluginHost, api: str, name: str, arguments: Any
) -> None:
    result = CALLS[api](host, name, arguments)
    assert isinstance(result, ToolResult)
    assert result.success is (result.error is None)
    encodes(result)
