"""The worker process of a plugin loaded with process isolation (this runs in the child).

It hardens itself first (environment reduced to an allowlist, its own working
directory, resource limits, no file descriptors but its channel to the host,
stdout sent to stderr), then imports the plugin with the same loader as the
host would, describes the tools to the host and runs the calls the host sends,
several at once. Everything crossing the channel is JSON: the worker can send
the host data, never objects, so a hostile plugin cannot reach into the host.

Messages, host to worker: ``{"call": id, "tool", "arguments", "context"}``.
Worker to host: ``{"loaded": {...}}`` or ``{"failed": {...}}`` once, then per
call ``{"delta": id, "text"}`` and ``{"done": id, "output", "data", "truncated"}``
or ``{"done": id, "error": {"type", "message"}}``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import json
import os
import resource
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from agenthost._authoring.context import ToolContext, _current
from agenthost._authoring.definition import ToolDefinition
from agenthost._calls.results import render
from agenthost._common.masking import jsonable
from agenthost._common.text import exception_text, type_name
from agenthost._directory.loader import load_source
from agenthost._directory.scan import Source
from agenthost._directory.version import LoadFailure, PluginVersion
from agenthost._errors import InvalidArgumentsError

__all__ = ["main", "run"]


def run(fd: int) -> None:
    """Entry point of a pre-started worker: wait for its plugin, then live for it."""
    conn = Connection(fd)
    try:
        config = json.loads(conn.recv_bytes())
    except (EOFError, OSError):
        return  # a spare the host no longer needs
    main(conn, config)


def main(conn: Connection, config: dict[str, Any]) -> None:
    """The worker's whole life: harden, load, serve calls until the host hangs up."""
    _harden(conn, config)
    source = Source(config["key"], Path(config["path"]), config["kind"])
    result = load_source(source, Path(config["cache_dir"]), hook_timeout=config["hook_timeout"])
    send = _sender(conn)
    if isinstance(result, LoadFailure):
        send({"failed": {"message": result.message, "file": result.file, "line": result.line,
                         "traceback": result.traceback}})  # fmt: skip
        return
    send({"loaded": _describe(result)})
    tools = {d.name: d for d in result.definitions}
    with concurrent.futures.ThreadPoolExecutor(config["concurrency"]) as pool:
        while True:
            try:
                message = json.loads(conn.recv_bytes())
            except (EOFError, OSError):
                break  # the host hung up: retire
            pool.submit(_call, message, tools, result, send, config)
    result.retire()


def _harden(conn: Connection, config: dict[str, Any]) -> None:
    os.dup2(2, 1)  # whatever the plugin prints must never reach the host's stdout
    os.environ.clear()
    os.environ.update(config["env"])
    os.chdir(config["cwd"])
    keep = conn.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, _max_fd())
    for name, value in config["limits"].items():
        limit = getattr(resource, name)
        _, hard = resource.getrlimit(limit)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, hard))


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 65536


def _sender(conn: Connection) -> Any:
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        data = json.dumps(message, default=str).encode()
        with lock:
            conn.send_bytes(data)

    return send


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
    send: Any,
    config: dict[str, Any],
) -> None:
    cid = message["call"]
    try:
        definition = tools[message["tool"]]
        kwargs = definition.validate(message["arguments"])
        context = message["context"]
        ctx = ToolContext(definition, context["call_id"], context["session"],
                          message["arguments"], kwargs, context["attributes"],
                          version.name, version.version)  # fmt: skip
        ctx._sink = lambda text: send({"delta": cid, "text": text})
        if definition.context_parameter:
            kwargs = {**kwargs, definition.context_parameter: ctx}
        token = _current.set(ctx)
        try:
            value = _run(definition, kwargs, ctx)
        finally:
            _current.reset(token)
        output, data, truncated = render(value, config["max_output"])
        send({"done": cid, "output": output, "data": data, "truncated": truncated})
    except InvalidArgumentsError as exc:
        send({"done": cid, "error": {"type": "InvalidArgumentsError", "message": str(exc)}})
    except MemoryError:
        limit = f"the worker's memory limit ({config['memory_mb']} MB, WorkerOptions.memory_mb)"
        send({"done": cid, "error": {"type": "MemoryError", "message": f"{limit} was reached"}})
    except OSError as exc:
        text = _message(exc)
        if exc.errno == errno.EMFILE:
            files = config["limits"].get("RLIMIT_NOFILE")
            text = f"the worker's open files limit ({files}, WorkerOptions.open_files) was reached"
        send({"done": cid, "error": {"type": type_name(exc), "message": text}})
    except BaseException as exc:  # noqa: BLE001 - the worker's boundary of tool code
        print(f"tool {message.get('tool')!r} raised {exception_text(exc)}", file=sys.stderr)
        send({"done": cid, "error": {"type": type_name(exc), "message": _message(exc)}})


def _message(exc: BaseException) -> str:
    text = exception_text(exc)
    prefix = type_name(exc) + ": "
    return text[len(prefix) :] if text.startswith(prefix) else ""


def _run(definition: ToolDefinition, kwargs: dict[str, Any], ctx: ToolContext) -> Any:
    fn = definition.function
    assert fn is not None
    if definition.kind == "sync":
        return fn(**kwargs)
    if definition.kind == "async":
        return asyncio.run(fn(**kwargs))
    if definition.kind == "generator":
        return _joined(ctx, fn(**kwargs))

    async def drain() -> str:
        parts = []
        async for chunk in fn(**kwargs):
            parts.append(_chunk(ctx, chunk))
        return "".join(parts)

    return asyncio.run(drain())


def _joined(ctx: ToolContext, chunks: Any) -> str:
    return "".join(_chunk(ctx, chunk) for chunk in chunks)


def _chunk(ctx: ToolContext, chunk: Any) -> str:
    text = chunk if isinstance(chunk, str) else render(chunk, 1 << 30)[0] + "\n"
    if ctx._sink is not None:
        ctx._sink(text)
    return text
