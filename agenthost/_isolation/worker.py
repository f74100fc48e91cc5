"""The worker process of a plugin loaded with process isolation (this runs in the child).

It locks itself down first: a uid of its own when its sandbox runs as root, no
way to gain privileges, an environment reduced to an allowlist, its own working
directory, hard resource limits, no file descriptors but its channel to the
host. Then it imports the plugin with the same loader as the host would,
describes the tools to the host and runs the calls the host sends, several at
once. Everything crossing the channel is JSON (see ``protocol``): the worker can
send the host data, never objects. Streamed output waits for the host's credit,
so a reader that stops reading stops the tool, not the host's memory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import errno
import json
import os
import resource
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from agenthost._authoring.context import ToolContext, _current
from agenthost._authoring.definition import ToolDefinition
from agenthost._calls.boundary import adrain, drain, tool_frames
from agenthost._calls.results import render
from agenthost._common.masking import jsonable
from agenthost._common.text import clip, exception_text, type_name
from agenthost._directory.loader import load_source
from agenthost._directory.scan import Source
from agenthost._directory.version import LoadFailure, PluginVersion
from agenthost._errors import InvalidArgumentsError
from agenthost._isolation.protocol import MAX_ERROR, MAX_FRAMES, STREAM_WINDOW

__all__ = ["boot", "main"]

Send = Callable[[dict[str, Any]], None]
_PIECE = STREAM_WINDOW // 4  # characters of one streamed message
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38


def boot(fd: int, uid: int) -> None:
    """Entry point of a pre-started worker: lock down, wait for its plugin, live for it."""
    if uid >= 0:  # a sandbox made as root: this process's own uid, before anything else
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)  # no setuid program or file capability lifts it again
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # unsandboxed: die with the host at least
    conn = Connection(fd)
    try:
        config = json.loads(conn.recv_bytes())
    except (EOFError, OSError):
        return  # a spare the host no longer needs
    main(conn, config)


def _prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def main(conn: Connection, config: dict[str, Any]) -> None:
    """The worker's whole life: harden, load, serve calls until the host hangs up."""
    _harden(conn, config)
    me = os.getpid()
    source = Source(config["key"], Path(config["path"]), config["kind"])
    result = load_source(source, Path(config["cache_dir"]), hook_timeout=config["hook_timeout"])
    if os.getpid() != me:  # the plugin forked at import and this is the child: only the
        os._exit(0)  # worker itself speaks for the plugin
    send = _sender(conn, config["max_message"])
    if isinstance(result, LoadFailure):
        send({"failed": {"message": result.message, "file": result.file, "line": result.line,
                         "traceback": result.traceback}})  # fmt: skip
        return
    send({"loaded": _describe(result)})
    tools = {d.name: d for d in result.definitions}
    streams = _Streams(send)
    with concurrent.futures.ThreadPoolExecutor(config["concurrency"]) as pool:
        while True:
            try:
                message = json.loads(conn.recv_bytes())
            except (EOFError, OSError):
                break  # the host hung up: retire
            if "credit" in message:
                streams.credit(message["credit"], message["bytes"])
            else:
                pool.submit(_call, message, tools, result, streams, config)
        streams.close()
    result.retire()


def _harden(conn: Connection, config: dict[str, Any]) -> None:
    os.dup2(2, 1)  # what the plugin prints goes to the host's relay, never its stdout
    os.environ.clear()
    os.environ.update(config["env"])
    os.makedirs(config["cwd"], exist_ok=True)
    os.chdir(config["cwd"])
    keep = conn.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, _max_fd())
    for name, value in config["limits"].items():
        limit = getattr(resource, name)
        _, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        # The hard limit too: the plugin cannot raise it. CPU time gets one second more,
        # so the soft limit's SIGXCPU says why the worker ended before SIGKILL would.
        ceiling = value + 1 if limit == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            ceiling = min(ceiling, hard)
        resource.setrlimit(limit, (value, ceiling))


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 65536


def _sender(conn: Connection, limit: int) -> Send:
    """Sends a message; an answer over ``limit`` bytes becomes an error saying so."""
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        data = _encoded(message)
        if len(data) > limit:
            size = f"{len(data):,} bytes of JSON, over the {limit:,}-byte output limit"
            if "done" not in message:
                message = {"failed": {"message": f"the plugin's tools are described in {size}"}}
            else:
                why = f"the answer is {size} (WorkerOptions.max_output)"
                message = {"done": message["done"], "error": {"type": "ValueError", "message": why}}
            data = _encoded(message)
        with lock:
            conn.send_bytes(data)

    return send


def _encoded(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, ensure_ascii=False, allow_nan=False, default=str)
    return text.encode("utf-8", "replace")  # a lone surrogate never reaches the host


class _Streams:
    """Streamed output per call, each within the room the host has granted it."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._room: dict[int, int] = {}
        self._ready = threading.Condition()
        self._closed = False

    def sink(self, cid: int) -> Callable[..., None]:
        with self._ready:
            self._room[cid] = STREAM_WINDOW

        def write(text: str, ack: object = None) -> None:
            for piece in _pieces(text):
                with self._ready:
                    while not self._fits(cid, piece):
                        self._ready.wait()
                    if self._closed or cid not in self._room:
                        return
                    self._room[cid] -= len(piece)
                self._send({"delta": cid, "text": piece})

        return write

    def _fits(self, cid: int, piece: str) -> bool:
        return self._closed or cid not in self._room or self._room[cid] >= len(piece)

    def credit(self, cid: Any, size: Any) -> None:
        with self._ready:
            if isinstance(cid, int) and isinstance(size, int) and cid in self._room:
                self._room[cid] += size
                self._ready.notify_all()

    def end(self, cid: int) -> None:
        with self._ready:
            self._room.pop(cid, None)
            self._ready.notify_all()

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()


def _pieces(text: str) -> Iterable[str]:
    if not text:
        yield text
    for start in range(0, len(text), _PIECE):
        yield text[start : start + _PIECE]


def _describe(version: PluginVersion) -> dict[str, Any]:
    return {
        "name": version.name,
        "version": version.version,
        "tools": [_definition(d) for d in version.definitions],
        "errors": [e.as_dict() for e in version.definition_errors],
        "warnings": list(version.warnings),
    }


def _definition(d: ToolDefinition) -> dict[str, Any]:
    hints = d.hints
    return {
        "name": d.name,
        "description": d.description,
        "input_schema": jsonable(d.input_schema),
        "output_schema": jsonable(d.output_schema),
        "kind": d.kind,
        "file": d.file,
        "line": d.line,
        "warnings": list(d.warnings),
        "options": {
            "title": d.title,
            "permissions": sorted(d.permissions),
            "timeout": False if d.timeout == float("inf") else d.timeout,
            "tags": list(d.tags),
            "read_only": hints.read_only,
            "destructive": hints.destructive,
            "idempotent": hints.idempotent,
            "open_world": hints.open_world,
            "examples": jsonable(list(d.examples)),
            "cache_ttl": d.cache_ttl,
            "retries": d.retries,
            "icons": jsonable(list(d.icons)),
            "meta": jsonable(d.meta),
        },
    }


def _call(
    message: dict[str, Any],
    tools: dict[str, ToolDefinition],
    version: PluginVersion,
    streams: _Streams,
    config: dict[str, Any],
) -> None:
    cid = message["call"]
    send = streams._send
    try:
        definition = tools[message["tool"]]
        kwargs = definition.validate(message["arguments"])
        context = message["context"]
        ctx = ToolContext(definition, context["call_id"], context["session"],
                          message["arguments"], kwargs, context["attributes"],
                          version.name, version.version)  # fmt: skip
        ctx._sink = streams.sink(cid)
        if definition.context_parameter:
            kwargs = {**kwargs, definition.context_parameter: ctx}
        token = _current.set(ctx)
        try:
            value = _run(definition, kwargs, ctx, config["max_result"])
        finally:
            _current.reset(token)
        output, data, truncated = render(value, config["max_result"])
        send({"done": cid, "output": output, "data": data, "truncated": truncated})
    except BaseException as exc:  # noqa: BLE001 - the worker's boundary of tool code
        send({"done": cid, "error": _error(exc, config)})
    finally:
        streams.end(cid)


def _error(exc: BaseException, config: dict[str, Any]) -> dict[str, Any]:
    """The error of a call, for the host: the exception's type, a bounded message and the
    tool's own frames (the host logs them; nothing is printed here, where no secret is
    masked). A limit reached is told in one sentence naming it, with no frames."""
    if isinstance(exc, InvalidArgumentsError):
        return {"type": "InvalidArgumentsError", "message": clip(str(exc), MAX_ERROR)}
    if isinstance(exc, MemoryError):
        limit = f"the worker's memory limit ({config['memory_mb']} MB, WorkerOptions.memory_mb)"
        return {"type": "MemoryError", "message": f"{limit} was reached; ask for less"}
    text = clip(_message(exc), MAX_ERROR)
    if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
        files = config["limits"].get("RLIMIT_NOFILE")
        text = f"the worker's open files limit ({files}, WorkerOptions.open_files) was reached"
    elif isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        size = config["limits"].get("RLIMIT_FSIZE", 0) // 2**20
        text = f"the worker's file size limit ({size} MB, WorkerOptions.file_size_mb) was reached"
    name = type_name(exc)
    return {"type": name if name.isidentifier() else "Exception", "message": text,
            **_frames(exc)}  # fmt: skip


def _frames(exc: BaseException) -> dict[str, Any]:
    """The tool's frames of ``exc``'s traceback, innermost last: past ``MAX_FRAMES`` (a
    recursion), the first and the innermost, those between counted; none if the tool
    has none (it failed in the worker's own code)."""
    try:
        stack = traceback.extract_tb(tool_frames(exc.__traceback__))
    except Exception:  # noqa: BLE001 - a traceback that cannot be read is left out
        return {}
    if not stack:
        return {}
    omitted = max(0, len(stack) - MAX_FRAMES)
    frames = [
        {"file": _tail(f.filename, 1024), "line": f.lineno, "function": clip(f.name, 200),
         "source": clip((f.line or "").strip(), 500)}
        for f in (stack[:1] + stack[1 + omitted :])
    ]  # fmt: skip
    return {"frames": frames, "omitted": omitted}


def _tail(path: str, limit: int) -> str:
    """A long path cut at its start: its end names the file."""
    return path if len(path) <= limit else "..." + path[len(path) - limit + 3 :]


def _message(exc: BaseException) -> str:
    text = exception_text(exc)
    prefix = type_name(exc) + ": "
    return text[len(prefix) :] if text.startswith(prefix) else ""


def _run(definition: ToolDefinition, kwargs: dict[str, Any], ctx: ToolContext, limit: int) -> Any:
    fn = definition.function
    assert fn is not None
    if definition.kind == "sync":
        return fn(**kwargs)
    if definition.kind == "async":
        return asyncio.run(fn(**kwargs))
    if definition.kind == "generator":
        return drain(ctx, fn, limit, **kwargs)
    return asyncio.run(adrain(ctx, fn, limit, **kwargs))
