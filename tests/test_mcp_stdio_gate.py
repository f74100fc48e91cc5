"""`agenthost serve` over stdio, spoken to in raw JSON-RPC lines the official client never sends.

Every line is read strictly before the SDK parses it: repeated keys are refused (the
SDK would keep the last), an unusable id or unparsable text gets an error (the SDK
says nothing), ``8`` and ``"8"`` in flight together both get their answer (the SDK
takes them for one id), and an over-long line is answered and skipped. Every read
has a deadline and the server is always killed.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from helpers import wait_for, write
from mcp_clients import command, environment

ANSWER_WITHIN = 5.0  # seconds for any one answer, or one line to be taken in
STARTUP = 30.0  # seconds for the first answer: importing the SDK takes a while on a busy machine
LIMIT = 4 * 1024 * 1024  # the SDK's DEFAULT_MAX_REQUEST_BODY_SIZE

PLUGIN = '''
import os
import sys
import time
from pathlib import Path

from agenthost import tool

OUTSIDE = Path(__file__).resolve().parent.parent  # outside the watched directory
print("a print at import")
os.write(1, b"raw bytes to fd 1 at import\\n")


@tool
def echo(text: str) -> str:
    """Echo text, and log that it ran."""
    with open(OUTSIDE / "ran.log", "a") as log:
        log.write(text + "\\n")
    return text


@tool
def hold() -> str:
    """Wait until the test releases it (at most 10 s)."""
    deadline = time.monotonic() + 10
    while not (OUTSIDE / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(OUTSIDE / "ran.log", "a") as log:
        log.write("held\\n")
    return "released"


@tool
def noisy() -> str:
    """Print, write to fd 1 and read stdin, as careless plugins do."""
    print("a print in a call")
    os.write(1, b"raw bytes to fd 1 in a call\\n")
    return f"stdin gave {sys.stdin.read()!r} and {os.read(0, 100)!r}"
'''


class Raw:
    """A raw JSON-RPC client over the server's stdin and stdout, every read bounded."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._stdin = process.stdin
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, args=(process.stdout,), daemon=True).start()

    def _pump(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def send(self, line: bytes | str | dict[str, Any]) -> None:
        """Write one line, from a thread: a server that stops reading fails the test, not hangs it."""
        if isinstance(line, dict):
            line = json.dumps(line)
        data = (line.encode() if isinstance(line, str) else line) + b"\n"

        def write() -> None:
            self._stdin.write(data)
            self._stdin.flush()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(ANSWER_WITHIN)
        assert not writer.is_alive(), f"the server took no line within {ANSWER_WITHIN} s"

    def receive(self, within: float = ANSWER_WITHIN) -> dict[str, Any]:
        """The next message; every line on stdout must be one JSON-RPC message."""
        try:
            line = self._lines.get(timeout=within)
        except queue.Empty:
            raise AssertionError(f"no message within {within} s") from None
        assert line, "the server closed its stdout"
        message = json.loads(line)
        assert isinstance(message, dict)
        assert message["jsonrpc"] == "2.0"
        return message

    def answer(self, within: float = ANSWER_WITHIN) -> dict[str, Any]:
        """The next answer, skipping notifications."""
        while "method" in (message := self.receive(within)):
            pass
        return message

    def call(self, request_id: Any, name: str, **arguments: Any) -> None:
        params = {"name": name, "arguments": arguments}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def _result(answer: dict[str, Any]) -> str:
    """What a successful tool call returned."""
    assert "result" in answer, answer
    assert answer["result"].get("isError") is not True, answer
    return str(answer["result"]["structuredContent"]["result"])


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[Raw]:
    """A server on a plugin directory, handshake done; always killed."""
    with _serving(tmp_path) as (client, _):
        yield client


@contextmanager
def _serving(tmp_path: Path) -> Iterator[tuple[Raw, subprocess.Popen[bytes]]]:
    directory = tmp_path / "plugins"
    write(directory / "tools.py", PLUGIN)
    with (tmp_path / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(
            command(directory),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment(),
        )
    try:
        client = Raw(process)
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        assert client.answer(STARTUP)["id"] == 0
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield client, process
    finally:
        process.kill()
        process.wait(timeout=ANSWER_WITHIN)
        if process.stdin is not None:
            process.stdin.close()
        if process.stdout is not None:
            process.stdout.close()


REPEATED = {
    "text": '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo",'
    '"arguments":{"text":"vetted","text":"smuggled"}}}',
    "name": '{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"hold",'
    '"arguments":{"text":"smuggled"},"name":"echo"}}',
}


def test_a_repeated_key_is_refused_and_the_tool_never_runs(raw: Raw, tmp_path: Path) -> None:
    """The SDK would run the tool with the last value, which a gateway may not have vetted."""
    for key, line in REPEATED.items():
        raw.send(line)
        answer = raw.answer()
        assert answer["id"] == json.loads(line)["id"]  # 7, then "7"
        assert answer["error"]["code"] == -32600, answer
        assert f'duplicate key "{key}"' in answer["error"]["message"]
    assert not (tmp_path / "ran.log").exists()
    raw.call(8, "echo", text="plain")
    assert _result(raw.answer()) == "plain"
    assert (tmp_path / "ran.log").read_text() == "plain\n"


def test_every_unusable_request_gets_exactly_one_error_and_serving_goes_on(raw: Raw) -> None:
    request = {"jsonrpc": "2.0", "method": "tools/list"}
    for bad_id in (None, {"a": 1}, 1.5, True, [1]):
        raw.send({**request, "id": bad_id})
        answer = raw.answer()
        assert answer["id"] is None, (bad_id, answer)
        assert answer["error"]["code"] == -32600, (bad_id, answer)
    for unreadable in ("[" * 10_000 + "]" * 10_000, "{not json"):
        raw.send(unreadable)
        answer = raw.answer()
        assert answer["id"] is None
        assert answer["error"]["code"] == -32700
    raw.call("after", "echo", text="still serving")
    answer = raw.answer()  # the very next message: no late answer to any line above
    assert answer["id"] == "after"
    assert _result(answer) == "still serving"


def test_ids_8_and_quoted_8_in_flight_together_stay_two_requests(raw: Raw, tmp_path: Path) -> None:
    """The SDK files both under 8: cancelling 8 would stop ``"8"`` and leave 8 running."""
    raw.call(8, "hold")
    raw.call("8", "echo", text="quick")
    quick = raw.answer()
    assert quick["id"] == "8"
    assert _result(quick) == "quick"
    raw.call("8", "hold")
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}})
    raw.send({"jsonrpc": "2.0", "id": "sync", "method": "ping"})
    assert raw.answer()["id"] == "sync"  # lines are dispatched in order: the cancel is in
    (tmp_path / "release").touch()
    log = tmp_path / "ran.log"
    wait_for(lambda: log.read_text().count("held") == 2, ANSWER_WITHIN, "both holds to end")
    answers = [raw.answer()]  # "8" ends; its answer may trail a quicker call's, so wait for it
    raw.call(9, "echo", text="after")  # then one more round trip: a wrong answer to 8 is out
    while (answer := raw.answer())["id"] != 9:
        answers.append(answer)
    assert [(a["id"], _result(a)) for a in answers] == [("8", "released")]  # never 8


def test_an_over_long_line_is_answered_and_skipped(raw: Raw) -> None:
    raw.call(9, "echo", text="x" * (LIMIT + 10))
    answer = raw.answer()
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert str(LIMIT) in answer["error"]["message"]
    raw.call(10, "echo", text="next")
    answer = raw.answer()
    assert answer["id"] == 10
    assert _result(answer) == "next"


def test_a_plugin_printing_and_reading_stdin_never_touches_the_protocol(
    raw: Raw, tmp_path: Path
) -> None:
    raw.call(11, "noisy")
    assert _result(raw.answer()) == "stdin gave '' and b''"
    raw.call(12, "echo", text="clean")
    assert _result(raw.answer()) == "clean"  # every line read so far was one JSON message
    stderr = (tmp_path / "stderr.log").read_bytes()
    for printed in (b"a print at import", b"raw bytes to fd 1 at import", b"in a call"):
        assert printed in stderr


def test_ctrl_c_stops_a_server_whose_client_keeps_stdin_open(tmp_path: Path) -> None:
    """A thread of a pool blocked reading a terminal's stdin used to keep the process alive."""
    with _serving(tmp_path) as (client, process):
        client.call(1, "echo", text="served")
        assert _result(client.answer()) == "served"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=ANSWER_WITHIN) == 0
