"""`agenthost serve --http` under attack: raw HTTP as an attacker writes it, not as a client would.

Each test starts the server as a subprocess on 127.0.0.1 and a free port, sends
bounded requests over plain sockets and measures what it must (answers, the
server's RSS from /proc), always within a deadline.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for, write
from mcp_clients import LIVENESS, MODERN, http_server

ALICE = "alice-0123456789abcdef"
BOB = "bob-0123456789abcdefgh"

TOOLS = '''
import pathlib
import time
from collections.abc import Iterator

from agenthost import tool


@tool
def echo(text: str) -> str:
    """Return the text, generation 0."""
    return text


@tool
def size(text: str) -> int:
    """The length of the text."""
    return len(text)


@tool(timeout=30)
def hold(mark: str, release: str, pad: list[dict[str, int]] | None = None) -> str:
    """Create ``mark``, then wait (10 s at most) until ``release`` exists."""
    pathlib.Path(mark).touch()
    deadline = time.monotonic() + 10
    while not pathlib.Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return "released"


@tool(timeout=60)
def flood(n: int, counter: str) -> Iterator[str]:
    """``n`` chunks of a megabyte; how many so far goes to ``counter``."""
    for i in range(n):
        pathlib.Path(counter).write_text(str(i + 1))
        yield "x" * 1_000_000
'''

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    messages: list[Any] = field(default_factory=list)

    @property
    def error(self) -> dict[str, Any]:
        (message,) = self.messages
        assert "error" in message, message
        return dict(message)


class Wire:
    """Raw HTTP/1.1 to the server: each request on its own connection, read to its end."""

    def __init__(self, url: str, token: str | None = None, source: str | None = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.address = (parsed.hostname or "", parsed.port or 80)
        self.host = parsed.netloc
        self.token = token
        self.source = source

    def connect(self, rcvbuf: int | None = None) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.source is not None:
            sock.bind((self.source, 0))
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(LIVENESS)
        sock.connect(self.address)
        return sock

    def head(
        self, method: str, length: int | None, sid: str | None, modern: bool, extra: dict[str, str]
    ) -> bytes:
        lines = [f"{method} /mcp HTTP/1.1", f"Host: {self.host}"]
        lines.append("Accept: application/json, text/event-stream")
        if length is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {length}"]
        if self.token:
            lines.append(f"Authorization: Bearer {self.token}")
        if sid:
            lines += [f"Mcp-Session-Id: {sid}", "Mcp-Protocol-Version: 2025-06-18"]
        if modern:
            lines.append(f"Mcp-Protocol-Version: {MODERN}")
        lines += [f"{k}: {v}" for k, v in extra.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def start(
        self,
        body: Any = None,
        *,
        sid: str | None = None,
        method: str = "POST",
        modern: bool = False,
        rcvbuf: int | None = None,
        **extra: str,
    ) -> socket.socket:
        """Send a request and return its connection, unread."""
        raw = _bytes(body) if body is not None else None
        sock = self.connect(rcvbuf)
        length = len(raw) if raw is not None else None
        sock.sendall(self.head(method, length, sid, modern, extra) + (raw or b""))
        return sock

    def send(self, body: Any = None, **options: Any) -> Answer:
        """Send a request and read its whole answer."""
        with self.start(body, **options) as sock:
            return read_answer(sock)

    def session(self) -> str:
        """A session that finished its handshake."""
        opened = self.send(INITIALIZE)
        assert opened.status == 200, opened
        sid = opened.headers["mcp-session-id"]
        assert self.send(INITIALIZED, sid=sid).status == 202
        return sid


def _bytes(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def read_answer(sock: socket.socket) -> Answer:
    """A whole HTTP answer (plain or chunked), its JSON or event-stream messages parsed."""
    reader = sock.makefile("rb")
    status_line = reader.readline()
    assert status_line, "the server closed the connection without an answer"
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := reader.readline()) not in (b"\r\n", b"\n", b""):
        key, _, value = line.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        parts = []
        while size := int(reader.readline().strip() or b"0", 16):
            parts.append(reader.read(size))
            reader.readline()
        body = b"".join(parts)
    else:
        body = reader.read(int(headers.get("content-length", "0")))
    return Answer(status, headers, _messages(body, headers.get("content-type", "")))


def _messages(body: bytes, content_type: str) -> list[Any]:
    if content_type.startswith("text/event-stream"):
        found = re.findall(rb"^data: ?(.*)$", body, re.MULTILINE)
        return [json.loads(data) for data in found if data.strip()]
    if content_type.startswith("application/json") and body:
        return [json.loads(body)]
    return []


def call(request_id: Any, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, **params},
    }


def ping(request_id: Any = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None
    return int(found.group(1)) / 1024


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    write(directory / "tools.py", TOOLS)
    return directory


@contextmanager
def served(plugins: Path, *extra: str) -> Iterator[tuple[Wire, Any]]:
    with http_server(plugins, *extra) as server:
        yield Wire(server.url), server


# --- 1. what a session may pin, and for how long ------------------------------------------------
def test_an_initialize_too_large_to_keep_is_refused(plugins: Path) -> None:
    padded = json.loads(json.dumps(INITIALIZE))
    padded["params"]["clientInfo"]["name"] = "x" * 100_000
    with served(plugins) as (wire, _):
        refused = wire.send(padded)
        assert refused.status == 413
        assert refused.error["id"] == 1
        assert "64 kB" in refused.error["error"]["message"]
        assert "mcp-session-id" not in refused.headers
        assert wire.send(INITIALIZE).status == 200


def test_a_session_that_never_finishes_its_handshake_is_closed(plugins: Path) -> None:
    with served(plugins, "--limit", "handshake_s=1") as (wire, _):
        opened = wire.send(INITIALIZE)
        half_open = opened.headers["mcp-session-id"]
        finished = wire.session()
        wait_for(
            lambda: wire.send(ping(), sid=half_open).status == 404,
            LIVENESS,
            "the half-open session to be closed",
        )
        assert wire.send(ping(), sid=finished).status == 200


def test_an_idle_session_is_closed_but_one_holding_a_stream_is_not(plugins: Path) -> None:
    with served(plugins, "-v", "--limit", "idle_s=1") as (wire, server):
        idle, listening = wire.session(), wire.session()
        with wire.start(method="GET", sid=listening) as stream:
            assert stream.recv(12).startswith(b"HTTP/1.1 200")
            wait_for(  # asking the idle session would keep it busy: read the log
                lambda: f"closing MCP session {idle[:8]}" in server.output(),
                LIVENESS,
                "the idle session to be closed",
            )
            assert "was idle for 1 s" in server.output()
            assert wire.send(ping(), sid=idle).status == 404
            assert wire.send(ping(), sid=listening).status == 200


def test_a_quiet_session_lets_go_of_the_request_it_answered(plugins: Path) -> None:
    """The SDK's dispatcher kept the last request it parsed until the next one: 900 kB
    of small objects parse to about 22 MB, held by every session that then goes quiet."""
    padded = call(2, "size", {"text": "a", "pad": [{}] * 300_000})
    with served(plugins) as (wire, server):
        sessions = [wire.session() for _ in range(6)]
        before = rss_mb(server.process.pid)
        for sid in sessions:
            answer = wire.send(padded, sid=sid)
            assert "invalid_arguments" in answer.messages[-1]["result"]["content"][0]["text"]
        grown = rss_mb(server.process.pid) - before
        assert grown < 90, f"the server grew by {grown:.0f} MB for six answered requests"


# --- 4. quotas per caller -----------------------------------------------------------------------
def _tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE: {"session": "alice"}, BOB: {"session": "bob"}}))
    path.chmod(0o600)
    return path


def _too_many(answer: Answer, held: str) -> None:
    assert answer.status == 429, answer
    assert int(answer.headers["retry-after"]) >= 1
    error = answer.error["error"]
    assert held in error["message"]
    assert error["data"]["retryAfter"] >= 1


def test_each_caller_has_its_own_sessions_streams_and_calls(plugins: Path, tmp_path: Path) -> None:
    limits = ["--limit", "sessions=2", "--limit", "streams=1", "--limit", "calls=2"]
    with http_server(plugins, "--tokens", str(_tokens(tmp_path)), *limits) as server:
        alice, bob = Wire(server.url, ALICE), Wire(server.url, BOB)
        first, second = alice.session(), alice.session()
        _too_many(alice.send(INITIALIZE), "2 sessions open")
        theirs = bob.session()

        with alice.start(method="GET", sid=first) as stream:
            assert stream.recv(12).startswith(b"HTTP/1.1 200")
            _too_many(alice.send(method="GET", sid=second), "1 event streams open")
            with bob.start(method="GET", sid=theirs) as other:
                assert other.recv(12).startswith(b"HTTP/1.1 200")

        mark, release = tmp_path / "mark", tmp_path / "release"
        held = call(3, "hold", {"mark": str(mark), "release": str(release)})
        with alice.start(held, sid=first), alice.start(held, sid=second):
            wait_for(mark.exists, LIVENESS, "the held call to start")
            wait_for(
                lambda: _refused_for(alice, second, "2 requests in flight"), LIVENESS, "2 held"
            )
            echoed = bob.send(call(4, "echo", {"text": "still served"}), sid=theirs)
            assert echoed.messages[-1]["result"]["structuredContent"] == {"result": "still served"}
            release.touch()
        wait_for(
            lambda: _opens_stream(alice, second), LIVENESS, "alice's stream to be counted closed"
        )


def _refused_for(wire: Wire, sid: str, held: str) -> bool:
    answer = wire.send(ping(), sid=sid)
    if answer.status != 429:
        return False
    _too_many(answer, held)
    return True


def test_a_caller_cannot_hold_more_parsed_requests_than_its_memory_quota(
    plugins: Path, tmp_path: Path
) -> None:
    """Thousands of small objects cost far more parsed than sent: one request that would
    take more than the quota is refused whole, and a caller's requests together wait."""
    mark, release = tmp_path / "mark", tmp_path / "release"
    padded = {"mark": str(mark), "release": str(release), "pad": [{}] * 40_000}  # ~5 MB parsed
    limits = ["--limit", "inflight_mb=8", "--limit", "rate=100000"]  # the waits below poll
    with http_server(plugins, "--tokens", str(_tokens(tmp_path)), *limits) as server:
        alice, bob = Wire(server.url, ALICE), Wire(server.url, BOB)
        mine, theirs = alice.session(), bob.session()
        for huge in ({"text": "x", "pad": [{}] * 200_000}, {"text": "\U0001f600" * 600_000}):
            raw = json.dumps(call(1, "size", huge), ensure_ascii=False).encode()
            refused = alice.send(raw, sid=mine)  # many objects; 4 bytes a character
            assert refused.status == 413
            assert "MB once parsed" in refused.error["error"]["message"]
        with alice.connect() as first, alice.connect() as second:  # bodies on their way count
            for uploading in (first, second):
                uploading.sendall(alice.head("POST", 3_000_000, mine, False, {}) + b"{")
            third = call(1, "echo", {"text": "x" * 2_900_000})
            wait_for(lambda: alice.send(third, sid=mine).status == 429, LIVENESS, "counted")
            _too_many(alice.send(third, sid=mine), "MB of requests in flight")
        with alice.start(call(2, "hold", padded), sid=mine):
            wait_for(mark.exists, LIVENESS, "the held call to start")
            _too_many(alice.send(call(3, "hold", padded), sid=mine), "MB of requests in flight")
            answer = bob.send(call(4, "echo", {"text": "bob's"}), sid=theirs)
            assert answer.messages[-1]["result"]["structuredContent"] == {"result": "bob's"}
        # alice hung up, but her call runs on: it still counts until it ends
        _too_many(alice.send(call(5, "hold", padded), sid=mine), "MB of requests in flight")
        release.touch()
        wait_for(lambda: alice.send(ping(), sid=mine).status == 200, LIVENESS, "given back")


def test_every_loopback_address_is_one_caller_without_tokens(plugins: Path) -> None:
    with served(plugins, "--limit", "sessions=1") as (wire, _):
        wire.session()
        elsewhere = Wire(f"http://{wire.host}/mcp", source="127.0.0.2")
        _too_many(elsewhere.send(INITIALIZE), "1 sessions open")


def test_only_post_carries_a_body_and_other_methods_are_refused_at_once(plugins: Path) -> None:
    with served(plugins) as (wire, _):
        sid = wire.session()
        for method in ("GET", "DELETE"):
            with wire.connect() as sock:  # a body that would never finish: no wait for it
                head = wire.head(method, 4_000_000, sid, False, {}).replace(
                    b"Content-Type: application/json\r\n", b""
                )
                sock.sendall(head + b"{" * 1000)
                refused = read_answer(sock)
            assert refused.status == 400, method
            assert "takes no body" in refused.error["error"]["message"]
        assert wire.send(b"{}", method="PUT").status == 405
        assert wire.send(ping(), sid=sid).status == 200


def _opens_stream(wire: Wire, sid: str) -> bool:
    with wire.start(method="GET", sid=sid) as stream:
        return stream.recv(12).startswith(b"HTTP/1.1 200")


def test_a_caller_over_its_rate_is_told_when_to_retry(plugins: Path, tmp_path: Path) -> None:
    with http_server(plugins, "--tokens", str(_tokens(tmp_path)), "--limit", "rate=5") as server:
        alice, bob = Wire(server.url, ALICE), Wire(server.url, BOB)
        # all at once, so a loaded machine answering slowly cannot spread them out
        with concurrent.futures.ThreadPoolExecutor(25) as pool:
            answers = list(pool.map(lambda _: alice.send(INITIALIZE), range(25)))
        refused = [a for a in answers if a.status == 429]
        assert refused, [a.status for a in answers]
        _too_many(refused[0], "5 requests a second")
        assert bob.send(INITIALIZE).status == 200


# --- 4b and 5. a reader that stops --------------------------------------------------------------
@contextmanager
def stalled_flood(wire: Wire, tmp_path: Path, n: int) -> Iterator[tuple[socket.socket, Path]]:
    """A session streaming ``n`` MB to a client that reads nothing, until the tool stops."""
    counter = tmp_path / "counter"
    sid = wire.session()
    request = call(9, "flood", {"n": n, "counter": str(counter)}, _meta={"progressToken": "p"})
    with wire.start(request, sid=sid, rcvbuf=4096) as sock:
        seen = {"value": "", "since": time.monotonic()}

        def settled() -> bool:
            value = counter.read_text() if counter.exists() else ""
            if value != seen["value"]:
                seen.update(value=value, since=time.monotonic())
            return bool(value) and time.monotonic() - seen["since"] > 1.0

        wait_for(settled, 20, "the flood to stop advancing")
        yield sock, counter


def test_a_streaming_call_whose_reader_stops_is_paused_not_buffered(
    plugins: Path, tmp_path: Path
) -> None:
    with served(plugins) as (wire, server):
        wire.session()
        before = rss_mb(server.process.pid)
        with stalled_flood(wire, tmp_path, 150) as (sock, counter):
            produced = int(counter.read_text())
            grown = rss_mb(server.process.pid) - before
            assert produced < 150, "the tool ran to its end for a reader that read nothing"
            assert grown < 60, f"the server buffered {grown:.0f} MB for one stalled reader"
            sock.settimeout(30)
            answer = read_answer(sock)  # the reader comes back: nothing was lost
        progress = [m for m in answer.messages if m.get("method") == "notifications/progress"]
        assert len(progress) == 150
        assert answer.messages[-1]["id"] == 9
        assert answer.messages[-1]["result"]["isError"] is False


def test_a_stalled_reader_delays_no_one_elses_notifications(plugins: Path, tmp_path: Path) -> None:
    """A session whose stream is full used to hold every change notification up to 5 s."""
    with served(plugins) as (wire, _):
        listener = wire.session()
        with (
            stalled_flood(wire, tmp_path, 100),
            wire.start(method="GET", sid=listener) as stream,
        ):
            assert stream.recv(12).startswith(b"HTTP/1.1 200")
            heard = _Heard(stream)
            started = time.monotonic()
            for generation in range(1, 4):
                source = TOOLS.replace("generation 0", f"generation {generation}")
                (plugins / "tools.py").write_text(source)
                wait_for(lambda g=generation: heard.count >= g, LIVENESS, f"change {generation}")
            took = time.monotonic() - started
        assert took < 6, f"three changes took {took:.1f} s to reach a client that reads"


class _Heard:
    """Counts the list-changed notifications arriving on an event stream, in a thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.count = 0
        self._sock = sock
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffered = b""
        try:
            while chunk := self._sock.recv(65536):
                buffered += chunk
                self.count = buffered.count(b"notifications/tools/list_changed")
        except OSError:
            return


# --- 6 and 7. what the SDK would smuggle or leave unanswered -------------------------------------
def test_repeated_keys_are_refused_in_both_protocol_generations(plugins: Path) -> None:
    smuggled = '{"text": "vetted", "text": "smuggled"}'
    arguments = f'{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"echo","arguments":{smuggled}}}}}'
    name_twice = '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","name":"size","arguments":{"text":"t"}}}'
    with served(plugins) as (wire, _):
        sid = wire.session()
        for body, repeated, request_id in ((arguments, "text", 5), (name_twice, "name", 6)):
            for options in ({"sid": sid}, {"modern": True}):
                refused = wire.send(body, **options)
                assert refused.status == 400, (options, refused)
                assert refused.error["id"] == request_id
                assert f'duplicate key "{repeated}"' in refused.error["error"]["message"]
        fine = wire.send(call(7, "echo", {"text": "vetted"}), sid=sid)
        assert fine.messages[-1]["result"]["structuredContent"] == {"result": "vetted"}


def test_a_request_id_of_the_wrong_type_gets_an_error_not_silence(plugins: Path) -> None:
    with served(plugins) as (wire, _):
        sid = wire.session()
        for bad_id in (None, {"n": 1}, 1.5, True, [1]):
            answer = wire.send(ping(bad_id), sid=sid)
            assert answer.status == 400, bad_id
            assert answer.error["id"] is None
            assert answer.error["error"]["code"] == -32600
            assert "id must be a string or an integer" in answer.error["error"]["message"]
        batch = wire.send([ping(1), ping(2)], sid=sid)
        assert batch.status == 400
        assert batch.error["error"]["code"] == -32600
        assert wire.send(ping(3), sid=sid).messages == [{"jsonrpc": "2.0", "id": 3, "result": {}}]


def test_ids_8_and_quoted_8_in_flight_at_once_each_get_their_own_answer(
    plugins: Path, tmp_path: Path
) -> None:
    mark, release = tmp_path / "mark", tmp_path / "release"
    with served(plugins) as (wire, _):
        sid = wire.session()
        held = wire.start(call(8, "hold", {"mark": str(mark), "release": str(release)}), sid=sid)
        with held:
            wait_for(mark.exists, LIVENESS, "the held call to start")
            quick = wire.send(call("8", "echo", {"text": "quick"}), sid=sid)
            assert quick.messages[-1]["id"] == "8"
            assert quick.messages[-1]["result"]["structuredContent"] == {"result": "quick"}
            release.touch()
            slow = read_answer(held)
        assert slow.messages[-1]["id"] == 8
        assert slow.messages[-1]["result"]["structuredContent"] == {"result": "released"}


# --- 8. slowloris -------------------------------------------------------------------------------
def test_a_request_head_or_body_that_never_finishes_is_cut_off(plugins: Path) -> None:
    with served(plugins, "--limit", "head_s=1", "--limit", "body_s=1") as (wire, _):
        with wire.connect() as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: " + wire.host.encode() + b"\r\n")
            deadline = time.monotonic() + LIVENESS
            answer = b""
            sock.settimeout(0.1)
            while time.monotonic() < deadline:  # one header byte a tenth of a second
                try:
                    chunk = sock.recv(4096)  # read before each byte: the answer comes first
                except TimeoutError:
                    sock.sendall(b"X")
                    continue
                answer += chunk
                if not chunk or b"\r\n\r\n" in answer:
                    break
            assert answer.startswith(b"HTTP/1.1 408"), answer
        body = json.dumps(ping()).encode()
        with wire.connect() as sock:
            sock.sendall(wire.head("POST", len(body), None, False, {}) + body[:5])
            late = read_answer(sock)
        assert late.status == 408
        assert "did not arrive within 1 s" in late.error["error"]["message"]
        assert wire.send(INITIALIZE).status == 200
