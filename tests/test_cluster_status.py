"""``agenthost cluster status`` against a real Redis and real ``serve --redis`` replicas.

The replicas are subprocesses serving copies of one plugin directory; the command runs
in-process through ``main``, so its output and exit code are what a user sees. Every
wait polls against a deadline: a replica beats once a second, and its record expires
5 s after its last beat.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from helpers import replace_atomically, write
from mcp_clients import LIVENESS, command, environment
from services import RedisServer, free_port

from agenthost._cli.main import main
from agenthost._cluster.record import Member
from agenthost._cluster.status import compare, masked, status

CALC = '''
from agenthost import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers{note}."""
    return a + b


@tool(permissions={{"secret.read"}})
def vault() -> str:
    """Needs a grant."""
    return "opened"
'''

GREET = '''
from agenthost import tool


@tool
def hello(name: str) -> str:
    """Greet someone."""
    return f"hello {name}"
'''

GONE_S = 10.0  # a killed replica's record expires 5 s after its last beat: twice that
T = TypeVar("T")
POLL_S = 0.05  # between two status runs while waiting: each one connects to Redis anew


@dataclass
class Running:
    """One ``agenthost serve --http ... --redis`` subprocess, once it serves."""

    directory: Path
    url: str
    replica: str
    process: subprocess.Popen[bytes]


def plugins(tmp_path: Path, *names: str) -> list[Path]:
    """One copy of the same plugin directory per name."""
    first = tmp_path / names[0]
    write(first / "calc.py", CALC.format(note=""))
    write(first / "greet.py", GREET)
    for name in names[1:]:
        shutil.copytree(first, tmp_path / name)
    return [tmp_path / name for name in names]


@contextlib.contextmanager
def replicas(directories: Sequence[Path], url: str) -> Iterator[list[Running]]:
    """A replica per directory, started together (each imports the SDK: seconds on a busy
    machine) and listed by URL, as status lists them; all stopped whatever happens."""
    started: list[tuple[Path, subprocess.Popen[bytes], Path]] = []
    try:
        for directory in directories:
            log = directory.parent / f"{directory.name}.log"
            with log.open("wb") as sink:
                process = subprocess.Popen(
                    command(directory, "--http", "127.0.0.1:0", "--redis", url),
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    env=environment(),
                )
            started.append((directory, process, log))
        yield sorted((ready(*each) for each in started), key=lambda r: r.url)
    finally:
        for _, process, _ in started:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for _, process, _ in started:
            try:
                process.wait(LIVENESS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def ready(directory: Path, process: subprocess.Popen[bytes], log: Path) -> Running:
    """Wait for the lines a replica prints once it serves and has joined."""
    deadline = time.monotonic() + LIVENESS * 2
    while True:
        text = log.read_text(errors="replace")
        served = re.search(r"serving MCP at (\S+)", text)
        joined = re.search(r"replica ([0-9a-f]+) of cluster", text)
        if served and joined:
            return Running(directory, served[1], joined[1], process)
        assert process.poll() is None, f"the replica exited:\n{text}"
        assert time.monotonic() < deadline, f"the replica did not start:\n{text}"
        time.sleep(0.02)


def until(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """``check()`` once it is not None; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (value := check()) is None:
        assert time.monotonic() < deadline, f"timed out after {timeout:.1f} s waiting for {what}"
        time.sleep(POLL_S)
    return value


def cluster_status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``agenthost cluster status ARGS``: exit code, stdout, stderr."""
    code = main(["cluster", "status", *args])
    out, err = capsys.readouterr()
    return code, out, err


def row(replica: Running, health: str) -> str:
    """The pattern of a replica's line in the status table."""
    return rf"(?m)^{replica.replica}\s+{re.escape(replica.url)}\s+ready\s+{health}\s"


def test_two_replicas_agree_until_one_copy_of_a_plugin_is_edited(
    redis_server: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = redis_server.url
    a, b = plugins(tmp_path, "a", "b")
    printed = []
    with replicas([a, b], url) as (one, two):
        edited = one if one.directory == b else two
        code, out, err = cluster_status(capsys, "--redis", url)
        printed.append(out + err)
        assert code == 0, out + err
        assert f"cluster 'agenthost' at {url}: 2 replicas" in out
        assert re.search(row(one, "ok"), out), out
        assert re.search(row(two, "ok"), out), out
        assert re.search(r"(?m)^calc\s+([0-9a-f]{12})\s+\1$", out), out  # same hash twice
        assert out.rstrip().endswith("all 2 replicas agree"), out

        code, out, err = cluster_status(capsys, "--redis", url, "--json")
        printed.append(out + err)
        record = json.loads(out)
        assert code == 0
        assert (record["cluster"], record["redis"], record["agree"]) == ("agenthost", url, True)
        assert record["differences"] == []
        assert [r["url"] for r in record["replicas"]] == [one.url, two.url]
        for seen in record["replicas"]:
            assert set(seen) == {"replica", "url", "state", "healthy", "age_s", "beat",
                                 "started", "version", "plugins", "tools"}  # fmt: skip
            assert seen["state"] == "ready"
            assert seen["healthy"] is True
            assert 0 <= seen["age_s"] <= 3
            assert seen["tools"] == 3
            assert set(seen["plugins"]) == {"calc", "greet"}

        code, out, err = cluster_status(capsys, "--redis", url, "--cluster-name", "other")
        assert (code, out, err) == (1, f"no replica of cluster 'other' at {url}\n", "")

        replace_atomically(b / "calc.py", CALC.format(note=", the second version"))
        (b / "greet.py").unlink()

        def disagree() -> str | None:
            code, out, err = cluster_status(capsys, "--redis", url)
            printed.append(out + err)
            wanted = ("replicas disagree:", "plugin calc differs", "plugin greet missing")
            return out if code == 1 and all(w in out for w in wanted) else None

        out = until(disagree, LIVENESS, "status to see the edit")
        hashes = rf"\({one.replica}: [0-9a-f]{{12}}, {two.replica}: [0-9a-f]{{12}}\)"
        assert re.search(rf"(?m)^  plugin calc differs {hashes}$", out), out
        assert re.search(rf"(?m)^  plugin greet missing on {edited.replica}$", out), out
        cells = ("-", r"[0-9a-f]{12}") if edited is one else (r"[0-9a-f]{12}", "-")
        assert re.search(rf"(?m)^greet\s+{cells[0]}\s+{cells[1]}$", out), out

        code, out, _ = cluster_status(capsys, "--redis", url, "--json")
        record = json.loads(out)
        assert (code, record["agree"], len(record["differences"])) == (1, False, 2)
        ring = json.loads(redis.Redis.from_url(url).get("agenthost:statekeys") or "[]")
    assert ring, "the replicas keep a key ring in Redis"
    for key in ring:  # the key ring sits beside the records: never shown
        assert not any(key in text for text in printed)


def test_a_killed_replica_turns_stale_then_drops_out(
    redis_server: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = redis_server.url
    with replicas(plugins(tmp_path, "a", "b"), url) as (alive, dead):
        dead.process.send_signal(signal.SIGKILL)
        dead.process.wait()
        killed = time.monotonic()

        def stale() -> str | None:
            code, out, _ = cluster_status(capsys, "--redis", url)
            return out if code == 0 and re.search(row(dead, "stale"), out) else None

        out = until(stale, GONE_S, "the killed replica to turn stale")
        assert re.search(row(alive, "ok"), out), out

        def gone() -> str | None:
            code, out, _ = cluster_status(capsys, "--redis", url)
            return out if code == 0 and dead.replica not in out else None

        out = until(gone, GONE_S - (time.monotonic() - killed), "its record to expire")
        assert re.search(row(alive, "ok"), out), out
        assert "1 replica:" in out

        alive.process.send_signal(signal.SIGINT)  # a clean stop deletes the record at once
        alive.process.wait(LIVENESS)
        code, out, err = cluster_status(capsys, "--redis", url)
        assert (code, out, err) == (1, f"no replica of cluster 'agenthost' at {url}\n", "")


def test_an_empty_cluster_is_exit_1_in_json_too(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cluster_status(capsys, "--redis", redis_server.url, "--json")
    assert (code, err) == (1, "")
    assert json.loads(out) == {"cluster": "agenthost", "redis": redis_server.url,
                               "replicas": [], "agree": False, "differences": []}  # fmt: skip


@pytest.mark.parametrize(
    "url",
    ["redis://:secret@127.0.0.1:{port}/0", "redis://127.0.0.1:{port}/0?password=secret"],
)
def test_an_unreachable_redis_is_one_line_without_the_password(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()  # nothing listens there
    code, out, err = cluster_status(capsys, "--redis", url.format(port=port))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err  # one line: no traceback
    assert err.startswith("agenthost cluster status: cannot read Redis at redis://"), err
    assert f"127.0.0.1:{port}: ***" not in err  # a real cause, not a mangled one
    assert re.search(rf"at redis://\S*127\.0\.0\.1:{port}/0\S*: .*refused", err), err
    assert "***" in err
    assert "secret" not in err


def test_the_redis_url_comes_from_the_environment_or_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AGENTHOST_REDIS_URL", raising=False)
    code, out, err = cluster_status(capsys)
    assert (code, out) == (2, "")
    assert "--redis URL or set AGENTHOST_REDIS_URL" in err, err
    port = free_port()
    monkeypatch.setenv("AGENTHOST_REDIS_URL", f"redis://127.0.0.1:{port}/0")
    code, _, err = cluster_status(capsys)
    assert code == 2
    assert f"at redis://127.0.0.1:{port}/0: " in err, err
    code, _, err = cluster_status(capsys, "--redis", "http://127.0.0.1/")
    assert code == 2
    assert "not a Redis URL" in err, err


def member(replica: str, **fields: object) -> Member:
    record: dict[str, object] = {"replica": replica, "url": f"http://{replica}/mcp",
                                 "state": "ready", "started": 1.0, "version": "1.0",
                                 "plugins": {"calc": "a" * 16}, "tools": {"t1": []},
                                 "beat": time.time()}  # fmt: skip
    return Member(**{**record, **fields})  # type: ignore[arg-type]


def test_records_are_compared_by_version_plugins_and_tools() -> None:
    one, same = member("r1"), member("r2")
    assert compare([one, same]) == []
    assert compare([one]) == []
    assert compare([one, member("r2", version="2.0")]) == [
        "agenthost version differs (r1: 1.0, r2: 2.0)"
    ]
    assert compare([one, member("r2", plugins={"calc": "b" * 16, "extra": "c" * 16})]) == [
        f"plugin calc differs (r1: {'a' * 12}, r2: {'b' * 12})",
        "plugin extra missing on r1",
    ]
    other_tools = member("r2", tools={"t1": ["fs.read"]})  # same plugins: other packages?
    assert compare([one, other_tools]) == ["tools differ by name or permissions (r1: 1, r2: 1)"]
    now = time.time()
    seen = status("c", [member("r2", beat=now - 4), member("r1", beat=now)], now=now)
    assert [(r.member.replica, r.healthy) for r in seen.replicas] == [("r1", True), ("r2", False)]
    assert seen.agree
    assert not status("c", []).agree


def test_only_the_clusters_own_readable_records_count(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shared Redis: a cluster named with glob characters, one whose name extends
    another's, and a record no agenthost could have written."""
    client = redis.Redis.from_url(redis_server.url)
    for key in ("a*:replica:r1", "ab:replica:r2", "a*:replica:x:replica:r3"):
        client.set(key, json.dumps(asdict(member(key.rpartition(":")[2]))))
    code, out, _ = cluster_status(capsys, "--redis", redis_server.url, "--cluster-name", "a*")
    assert code == 0
    assert re.findall(r"(?m)^(r\d)  ", out) == ["r1"], out
    client.set("a*:replica:r4", "not a record")
    code, out, _ = cluster_status(capsys, "--redis", redis_server.url, "--cluster-name", "a*")
    assert code == 1
    assert "record of replica r4 is unreadable" in out, out


def test_a_password_never_shows_in_a_printed_url() -> None:
    assert masked("redis://user:secret@h:6379/0") == "redis://***@h:6379/0"
    assert (
        masked("rediss://:secret@h/0?password=secret&db=1") == "rediss://***@h/0?password=***&db=1"
    )
    assert masked("redis://h:6379/0") == "redis://h:6379/0"
