"""Reliability: hot reload under load, arbitrary input, and a corpus of misbehaving tools."""

from __future__ import annotations

import asyncio
import enum
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from helpers import replace_atomically, wait_for, write
from hypothesis import given
from hypothesis import strategies as st
from typezoo import Options, Person

from agenthost import InvalidArgumentsError, PluginHost, ToolResult, tool

Host = Callable[..., PluginHost]

LIVE = """
import asyncio, time
from agenthost import tool
VERSION = {n}

@tool(timeout=False)
def sync_version() -> str:
    "The version this call saw at its start and at its end."
    first = VERSION
    time.sleep(0.0005)
    import live  # a lazy import of the plugin's own module, mid-call
    return f"{{first}}:{{live.VERSION}}"

@tool(timeout=5)
def worker_version() -> str:
    "The same, in a worker thread."
    first = VERSION
    time.sleep(0.0005)
    import live
    return f"{{first}}:{{live.VERSION}}"

@tool
async def async_version() -> str:
    "The same, on an event loop."
    first = VERSION
    await asyncio.sleep(0.0005)
    import live
    return f"{{first}}:{{live.VERSION}}"
"""


def test_hot_reload_under_load_never_fails_a_call_or_mixes_versions(
    plugin_dir: Path, make_host: Host
) -> None:
    path = write(plugin_dir / "live.py", LIVE.format(n=0))
    host = make_host(plugin_dir, watch=True, debounce=0.005).start()
    stop = threading.Event()
    outcomes: Counter[str] = Counter()
    bad: list[ToolResult] = []
    lock = threading.Lock()

    def record(result: ToolResult) -> None:
        first, _, last = result.output.partition(":")
        with lock:
            if not result.success or first != last:
                bad.append(result)
            outcomes[first] += 1

    def caller(tool_name: str) -> None:
        while not stop.is_set():
            record(host.execute(tool_name, {}))

    async def async_caller() -> None:
        while not stop.is_set():
            record(await host.aexecute("async_version", {}))
            record(await host.aexecute("sync_version", {}))

    names = ["sync_version", "worker_version", "async_version"] * 2 + ["sync_version"] * 2
    threads = [threading.Thread(target=caller, args=(name,)) for name in names]
    threads.append(threading.Thread(target=lambda: asyncio.run(async_caller())))
    for thread in threads:
        thread.start()
    try:
        for n in range(1, 51):
            if n % 5 == 0:  # a broken save: the previous version keeps serving
                replace_atomically(path, "def broken(:\n")
                wait_for(lambda: host.plugins()[0].status == "failed", what=f"save {n} to fail")
            else:
                replace_atomically(path, LIVE.format(n=n))
                wait_for(lambda n=n: outcomes[str(n)] > 20, what=f"version {n} to serve calls")
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert bad == []
    assert {int(v) for v in outcomes} == {0} | {n for n in range(50) if n % 5 != 0}
    assert host.metrics()["tools"].get("(unknown)") is None
    assert host.plugins()[0].status == "failed"  # the 50th save was broken: 49 still serves
    assert host.execute("sync_version", {}).output == "49:49"


# --- arbitrary input ---------------------------------------------------------------------------


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


RECEIVED: list[dict[str, Any]] = []


@tool(timeout=False)
def typed(
    count: int,
    ratio: float,
    flag: bool,
    mode: Mode,
    unit: Literal["c", "f"] = "c",
    tags: list[str] | None = None,
    person: Person | None = None,
    options: Options | None = None,
) -> str:
    """Checks that it only ever receives valid values."""
    assert type(count) is int
    assert type(ratio) is float
    assert type(flag) is bool
    assert isinstance(mode, Mode)
    assert unit in ("c", "f")
    assert tags is None or all(isinstance(t, str) for t in tags)
    assert person is None or isinstance(person, Person)
    assert options is None or isinstance(options.get("verbose"), bool)
    RECEIVED.append({"count": count})
    return "ok"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["c", "f", "fast", "slow", "x", ""]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["verbose", "name", "address", "street", "city", "q"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(
    st.sampled_from(
        ["count", "ratio", "flag", "mode", "unit", "tags", "person", "options", "extra"]
    ),
    JSON,
    max_size=9,
)


@pytest.fixture(scope="module")
def typed_host() -> Any:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        host = PluginHost(None, installed=False, cache_dir=scratch).start()
        host.register(typed)
        yield host
        host.stop()


@given(arguments=ARGUMENTS | st.from_regex(r"\A[\[\]{}\"a-z0-9:, ]{0,20}\Z"), as_text=st.booleans())
def test_execute_always_returns_a_result_and_runs_the_tool_only_on_valid_input(
    typed_host: PluginHost, arguments: Any, as_text: bool
) -> None:
    raw = json.dumps(arguments) if as_text and not isinstance(arguments, str) else arguments
    RECEIVED.clear()
    result = typed_host.execute("typed", raw)
    assert isinstance(result, ToolResult)
    definition = typed_host.tool("typed").definition  # type: ignore[union-attr]
    try:
        definition.validate(raw)
        valid = True
    except InvalidArgumentsError:
        valid = False
    assert result.success is valid, result
    assert len(RECEIVED) == (1 if valid else 0)
    if not valid:
        assert result.error is not None
        assert result.error.code == "invalid_arguments"


# --- misbehaving tools -----------------------------------------------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")

    def __repr__(self) -> str:
        raise RuntimeError("no")


def _recurse(n: int) -> int:
    return _recurse(n + 1) + 1


@pytest.fixture
def corpus(make_host: Host) -> PluginHost:
    release = threading.Event()
    host = make_host(None, default_timeout=0.3).start()

    @tool
    def raises() -> str:
        """Raises."""
        raise ValueError("bad things")

    @tool
    def hangs() -> str:
        """Hangs (until the test ends)."""
        release.wait(30)
        return "late"

    @tool
    async def hangs_async() -> str:
        """Hangs on the loop, cooperatively."""
        await asyncio.sleep(30)
        return "late"

    @tool
    def unserialisable() -> Any:
        """Returns objects JSON cannot hold."""
        return {"lock": threading.Lock()}

    @tool
    def unprintable() -> Any:
        """Returns an object that cannot even be printed."""
        return Unprintable()

    @tool
    def huge() -> str:
        """Returns 50 MB."""
        return "x" * (50 * 1024 * 1024)

    @tool
    def recurses() -> int:
        """Recurses without end."""
        return _recurse(0)

    @tool
    def prints() -> str:
        """Prints to stdout."""
        print("chatter on stdout")
        return "returned"

    @tool
    def starts_a_thread() -> str:
        """Leaves a thread behind."""
        threading.Thread(target=release.wait, args=(30,), daemon=True).start()
        return "started"

    @tool(timeout=False)
    def healthy() -> str:
        """Still fine."""
        return "fine"

    for fn in (raises, hangs, hangs_async, unserialisable, unprintable, huge, recurses, prints,
               starts_a_thread, healthy):  # fmt: skip
        host.register(fn)
    yield host
    release.set()


MISBEHAVIOUR = {
    "raises": ("tool_error", "ValueError: bad things"),
    "hangs": (
        "timeout",
        "tool 'hangs' did not finish within 0.3 s; its thread keeps running (only process isolation can stop it)",
    ),
    "hangs_async": ("timeout", "tool 'hangs_async' did not finish within 0.3 s"),
    "recurses": ("tool_error", "RecursionError: maximum recursion depth exceeded"),
}


@pytest.mark.parametrize("name", list(MISBEHAVIOUR))
def test_failing_tools_give_their_documented_error(corpus: PluginHost, name: str) -> None:
    code, message = MISBEHAVIOUR[name]
    started = time.monotonic()
    result = corpus.execute(name, {})
    assert time.monotonic() - started < 2
    assert result.error is not None
    assert result.error.code == code
    assert result.error.message.startswith(message)
    assert corpus.execute("healthy", {}).output == "fine"


def test_odd_return_values_give_their_documented_result(
    corpus: PluginHost, capsys: pytest.CaptureFixture[str]
) -> None:
    unserialisable = corpus.execute("unserialisable", {})
    assert unserialisable.success
    assert unserialisable.data is None
    assert unserialisable.output.startswith("{'lock': <unlocked _thread.lock object")
    assert corpus.execute("unprintable", {}).output == "<unprintable Unprintable object>"
    huge = corpus.execute("huge", {})
    assert huge.truncated
    assert len(huge.output) < 100_200
    assert huge.output.endswith("[truncated: 52,428,800 characters, the first 100,000 shown]")
    assert corpus.execute("prints", {}).output == "returned"
    assert "chatter on stdout" in capsys.readouterr().out  # stdout is not captured into results
    assert corpus.execute("starts_a_thread", {}).output == "started"
    assert corpus.execute("healthy", {}).output == "fine"


def test_the_host_keeps_serving_while_tools_hang(corpus: PluginHost) -> None:
    results = corpus.execute_many(
        [("hangs", {}), ("hangs_async", {}), ("healthy", {}), ("raises", {})]
    )
    assert [r.error.code if r.error else r.output for r in results] == [
        "timeout",
        "timeout",
        "fine",
        "tool_error",
    ]
