"""The real Redis and nginx the cluster tests use, and what the shipped deploy/nginx.conf promises.

nginx is checked against tiny in-thread upstreams: round-robin, a refused replica is
skipped, a POST that reached a replica is never sent to another one, event streams
are not buffered.
"""

# The redis_server and nginx_for fixtures are imported from services and taken as parameters.
# ruff: noqa: F811

from __future__ import annotations

import difflib
import http.client
import itertools
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis
import services
from services import (  # the fixtures too, until conftest.py registers them for every test
    DEPLOY_CONF,
    Nginx,
    RedisServer,
    need_services,
    nginx_config,
    nginx_for,  # noqa: F401
    redis_server,  # noqa: F401
)

WAIT_S = 5.0  # generous bound for an upstream to see the client's progress


class Upstream:
    """A tiny HTTP/1.1 server in a thread, standing in for a replica; it records each request.

    ``mode`` is how it answers: "answer" (200 with its name), "close" (reads the whole
    request, then closes the connection without a word, as a replica that crashed mid-call)
    or "stream" (an event stream whose second event waits until the client has the first).
    """

    def __init__(self, name: str, mode: str = "answer", accel: str | None = None) -> None:
        self.name = name
        self.mode = mode
        self.accel = accel  # the X-Accel-Buffering value a "stream" answer carries
        self.seen: list[tuple[str, str, str]] = []  # method, path, X-Request-Id
        self.headers: list[dict[str, str]] = []
        self.client_has_first = threading.Event()
        self.first_arrived_first: bool | None = None
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def ids(self) -> set[str]:
        with self._lock:
            return {request_id for _, _, request_id in self.seen}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keepalive, chunked answers: what nginx expects

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def do_DELETE(self) -> None:
                self._serve()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                with upstream._lock:
                    upstream.seen.append(
                        (self.command, self.path, self.headers.get("X-Request-Id", ""))
                    )
                    upstream.headers.append(dict(self.headers.items()))
                if upstream.mode == "close":
                    self.close_connection = True
                elif upstream.mode == "stream":
                    self._stream()
                else:
                    body = upstream.name.encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def _stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                if upstream.accel is not None:
                    self.send_header("X-Accel-Buffering", upstream.accel)
                self.end_headers()
                self._chunk(b"data: one\n\n")
                # Buffered, the client would get nothing until the second event: it is sent
                # only once the client has the first (or the bound has passed).
                upstream.first_arrived_first = upstream.client_has_first.wait(WAIT_S)
                self._chunk(b"data: two\n\n")
                self._chunk(b"")

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        return Handler


@pytest.fixture
def upstream() -> Iterator[Callable[..., Upstream]]:
    """Start upstreams; closed at teardown (after nginx, which is set up later)."""
    started: list[Upstream] = []

    def make(name: str, mode: str = "answer", accel: str | None = None) -> Upstream:
        started.append(Upstream(name, mode, accel))
        return started[-1]

    yield make
    for server in started:
        server.close()


@pytest.fixture
def refused() -> Iterator[str]:
    """An address that refuses connections: a bound socket that never listens holds the port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


_ids = itertools.count()


def request(
    nginx: Nginx,
    method: str,
    path: str = "/mcp",
    connection: http.client.HTTPConnection | None = None,
) -> tuple[int, str, str]:
    """Status, body and X-Request-Id of one request through ``nginx`` (a new connection
    unless one is given)."""
    request_id = f"r{next(_ids)}"
    own = connection is None
    conn = connection or http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=WAIT_S * 2)
    try:
        body = b'{"jsonrpc": "2.0"}' if method == "POST" else None
        conn.request(method, path, body=body, headers={"X-Request-Id": request_id})
        response = conn.getresponse()
        return response.status, response.read().decode(), request_id
    finally:
        if own:
            conn.close()


# --- Redis ---------------------------------------------------------------------------------


def test_redis_answers_ping(redis_server: RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    with redis.Redis.from_url(redis_server.url) as client:
        assert client.ping() is True


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_redis_restarts_on_the_same_port_and_a_client_reconnects(
    redis_server: RedisServer, how: str
) -> None:
    with redis.Redis.from_url(redis_server.url) as client:
        client.set("key", "value")
        port = redis_server.port
        getattr(redis_server, how)()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        redis_server.start()
        assert redis_server.port == port
        assert client.ping() is True  # the same client, a new connection
        assert client.get("key") is None  # nothing was persisted
    assert [p.name for p in redis_server.directory.iterdir()] == ["redis.log"]


# --- the shipped nginx config --------------------------------------------------------------


def test_shipped_config_is_valid_nginx(tmp_path: Path) -> None:
    need_services("nginx")
    nginx = Nginx(["127.0.0.1:1"], tmp_path)
    nginx.config = DEPLOY_CONF  # as shipped, not rewritten
    result = subprocess.run(nginx.command("-t"), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_tests_change_only_the_upstreams_and_the_listen_line() -> None:
    shipped = DEPLOY_CONF.read_text().splitlines()
    rewritten = nginx_config(["127.0.0.1:1", "127.0.0.1:2"], 5).splitlines()
    changed = [
        line[0] + line[1:].strip()
        for line in difflib.unified_diff(shipped, rewritten, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert sorted(changed) == sorted(
        [
            "-server 127.0.0.1:8001 max_fails=1 fail_timeout=2s;",
            "-server 127.0.0.1:8002 max_fails=1 fail_timeout=2s;",
            "-server 127.0.0.1:8003 max_fails=1 fail_timeout=2s;",
            "+server 127.0.0.1:1 max_fails=1 fail_timeout=2s;",
            "+server 127.0.0.1:2 max_fails=1 fail_timeout=2s;",
            "-listen 8080;",
            "+listen 127.0.0.1:5;",
        ]
    )


def test_round_robin_reaches_every_replica(
    upstream: Callable[..., Upstream], nginx_for: Callable[[Sequence[str]], Nginx]
) -> None:
    a, b = upstream("a"), upstream("b")
    nginx = nginx_for([a.address, b.address])
    answers = [request(nginx, "POST")[:2] for _ in range(6)]
    assert answers.count((200, "a")) == answers.count((200, "b")) == 3


def test_probes_and_headers_reach_a_replica_and_nothing_else_is_served(
    upstream: Callable[..., Upstream], nginx_for: Callable[[Sequence[str]], Nginx]
) -> None:
    a = upstream("a")
    nginx = nginx_for([a.address])
    assert request(nginx, "GET", "/healthz")[:2] == (200, "a")
    assert request(nginx, "GET", "/readyz")[:2] == (200, "a")
    assert request(nginx, "GET", "/")[0] == 404
    assert request(nginx, "GET", "/elsewhere")[0] == 404
    assert [path for _, path, _ in a.seen] == ["/healthz", "/readyz"]
    headers = a.headers[0]
    assert headers["Host"] == f"127.0.0.1:{nginx.port}"  # the client's, port included
    assert headers["X-Forwarded-For"] == "127.0.0.1"
    assert headers["X-Forwarded-Proto"] == "http"


def test_a_refused_replica_is_skipped(
    upstream: Callable[..., Upstream],
    nginx_for: Callable[[Sequence[str]], Nginx],
    refused: str,
) -> None:
    live = upstream("live")
    nginx = nginx_for([refused, live.address])
    answers = [request(nginx, method) for method in ["GET", "POST"] * 3]
    assert [answer[:2] for answer in answers] == [(200, "live")] * 6
    assert live.ids() == {request_id for _, _, request_id in answers}


@pytest.mark.parametrize(("method", "resent"), [("POST", False), ("GET", True), ("DELETE", True)])
def test_a_post_that_reached_a_replica_is_never_sent_to_another_replica(
    upstream: Callable[..., Upstream],
    nginx_for: Callable[[Sequence[str]], Nginx],
    method: str,
    resent: bool,
) -> None:
    """A replica that took the request and closed without an answer (it crashed mid-call):
    a POST (a tool call it may have started) gets a 502 and no other replica sees it.
    nginx does re-send GET and DELETE, which it deems idempotent: in MCP they open an event
    stream or end a session, so a second replica doing it is harmless."""
    crashing, other = upstream("crashing", mode="close"), upstream("other")
    nginx = nginx_for([crashing.address, other.address])
    statuses: dict[str, int] = {}
    for _ in range(4):  # round-robin: one of the first two goes to the crashing replica
        status, _, request_id = request(nginx, method)
        statuses[request_id] = status
        if crashing.ids():
            break
    (lost,) = crashing.ids()
    assert statuses[lost] == (200 if resent else 502)
    assert (lost in other.ids()) is resent
    assert all(status == 200 for request_id, status in statuses.items() if request_id != lost)


@pytest.mark.parametrize("accel", ["no", "yes", None])
def test_an_event_stream_arrives_event_by_event(
    upstream: Callable[..., Upstream],
    nginx_for: Callable[[Sequence[str]], Nginx],
    accel: str | None,
) -> None:
    stream = upstream("stream", mode="stream", accel=accel)
    nginx = nginx_for([stream.address])
    conn = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=WAIT_S * 2)
    try:
        # Accept-Encoding as httpx (so the MCP SDK) sends it: a gzipped stream is held back.
        headers = {"Accept": "text/event-stream", "Accept-Encoding": "gzip, deflate"}
        conn.request("GET", "/mcp", headers=headers)
        response = conn.getresponse()
        assert response.status == 200
        # A replica's own X-Accel-Buffering reaches the client (and any proxy in front),
        # and the events arrive one by one whatever it says.
        assert response.getheader("X-Accel-Buffering") == accel
        first = b""
        while not first.endswith(b"\n\n") and (chunk := response.read1(1024)):
            first += chunk
        stream.client_has_first.set()
        rest = response.read()
    finally:
        conn.close()
    assert first == b"data: one\n\n"
    assert rest == b"data: two\n\n"
    assert stream.first_arrived_first is True


# --- missing binaries ----------------------------------------------------------------------


@pytest.fixture
def no_binaries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither PATH nor the sbin directories hold redis-server or nginx."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(services, "SBIN_DIRS", ())


@pytest.mark.usefixtures("no_binaries")
@pytest.mark.parametrize("ci", ["1", "true"])
def test_missing_services_fail_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y redis-server nginx"):
        need_services("redis-server", "nginx")


@pytest.mark.usefixtures("no_binaries")
@pytest.mark.parametrize("ci", [None, "", "0", "false"])
def test_missing_services_skip_elsewhere(monkeypatch: pytest.MonkeyPatch, ci: str | None) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=r"^needs nginx: apt-get install -y"):
        need_services("nginx")


def test_nginx_in_sbin_counts_as_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    (sbin / "nginx").write_text("#!/bin/sh\n")
    (sbin / "nginx").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(services, "SBIN_DIRS", (str(sbin),))
    monkeypatch.setenv("CI", "1")
    need_services("nginx")  # neither skips nor fails
