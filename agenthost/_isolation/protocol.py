"""The messages between the host and a worker, and the host's checks of what a worker says.

Everything a worker sends is treated as input from the internet: a plugin runs
in the worker and may write anything on the channel. A frame is read as strict
JSON (unique keys, no NaN, no lone surrogates, bounded nesting and numbers); its
shape is checked against what the worker's own code sends, with every string,
list and number bounded. A message that fails is a :class:`ProtocolError`, and
the host stops that worker; nothing a worker says can change the host's state
beyond its own plugin.

Host to worker: the configuration first, then ``{"call": id, "tool",
"arguments", "context"}`` and ``{"credit": id, "bytes": n}`` (room for more
streamed output). Worker to host: ``{"loaded": {...}}`` or ``{"failed": {...}}``
once, then per call ``{"delta": id, "text"}`` and ``{"done": id, "output",
"data", "truncated"}`` or ``{"done": id, "error": {"type", "message"}}``, the
error with ``"frames"`` (the tool's own, innermost last: ``{"file", "line",
"function", "source"}`` each) and ``"omitted"`` (how many were left out after the
first) when the tool raised.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import jiter
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agenthost._common.text import inert

__all__ = [
    "MAX_ERROR",
    "MAX_FRAMES",
    "MAX_TOOLS",
    "STREAM_WINDOW",
    "Failed",
    "Frame",
    "Hello",
    "Loaded",
    "ProtocolError",
    "ToolDescription",
    "answer",
    "hello",
    "read",
]

MAX_ERROR = 8192  # characters of an exception message a worker may send
MAX_FRAMES = 50  # frames of a tool's traceback a worker may send (its first, the innermost)
MAX_TOOLS = 10_000  # tools one plugin may define
STREAM_WINDOW = 64 * 1024  # characters of streamed output a call may send ahead of its reader
_TEXT = 100_000  # characters of a description, a warning, a traceback


class ProtocolError(Exception):
    """A worker sent something its own code never sends: it is stopped."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _one_line(text: str) -> str:
    return inert(text, lines=False)


def _lines(text: str) -> str:
    """Multi-line text a host shows: no line of it may start where the host's own lines do."""
    return inert(text).replace("\n", "\n  ")


# Every text a worker sends is shown by the host one day (a log, the CLI): controls
# arrive as escapes, and only fields that are text by nature keep their newlines.
Name = Annotated[str, Field(max_length=200), AfterValidator(_one_line)]
Text = Annotated[str, Field(max_length=_TEXT), AfterValidator(_lines)]
Description = Annotated[str, Field(max_length=_TEXT), AfterValidator(inert)]
Path_ = Annotated[str, Field(max_length=4096), AfterValidator(_one_line)]
Line = Annotated[int, Field(ge=0, le=10_000_000)]
Strings = Annotated[list[Name], Field(max_length=1000)]


class Options(_Strict):
    """The ``@tool`` options of a worker's tool, checked again by the host's definition."""

    title: Annotated[str, Field(max_length=1000), AfterValidator(_one_line)] | None
    permissions: Strings
    timeout: bool | Annotated[float, Field(allow_inf_nan=False)] | None
    tags: Strings
    read_only: bool | None
    destructive: bool | None
    idempotent: bool | None
    open_world: bool | None
    examples: Annotated[list[Any], Field(max_length=1000)]
    cache_ttl: Annotated[float, Field(allow_inf_nan=False)] | None
    retries: Annotated[int, Field(ge=0, le=1000)]
    icons: Annotated[list[dict[str, Any]], Field(max_length=100)]
    meta: dict[str, Any] | None


class ToolDescription(_Strict):
    name: Name
    description: Description
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    kind: Literal["sync", "async", "generator", "async_generator"]
    file: Path_ | None
    line: Line | None
    warnings: Annotated[list[Text], Field(max_length=1000)]
    options: Options


class Problem(_Strict):
    message: Text
    parameter: Name | None = None
    line: Line | None = None


class DefinitionError(_Strict):
    message: Text = ""  # the whole error as text, as ToolDefinitionError.as_dict gives it
    function: Name | None = None
    tool: Name | None = None
    file: Path_ | None = None
    line: Line | None = None
    problems: Annotated[list[Problem], Field(max_length=1000)]


class Loaded(_Strict):
    name: Name
    version: Name | None
    tools: Annotated[list[ToolDescription], Field(max_length=MAX_TOOLS)]
    errors: Annotated[list[DefinitionError], Field(max_length=MAX_TOOLS)]
    warnings: Annotated[list[Text], Field(max_length=MAX_TOOLS)]


class Failed(_Strict):
    message: Text
    file: Path_ | None = None
    line: Line | None = None
    traceback: Text = ""


class Frame(_Strict):
    """One frame of a tool's traceback: where, and the line of source (as Python shows it)."""

    file: Annotated[str, Field(max_length=1024), AfterValidator(_one_line)]
    line: Line | None
    function: Name
    source: Annotated[str, Field(max_length=500), AfterValidator(_one_line)]


_FRAMES = TypeAdapter(Annotated[list[Frame], Field(max_length=MAX_FRAMES)])


class Hello(_Strict):
    loaded: Loaded | None = None
    failed: Failed | None = None


def read(frame: bytes) -> dict[str, Any]:
    """A frame as a JSON object, strictly; :class:`ProtocolError` for anything else."""
    try:
        message = jiter.from_json(frame, catch_duplicate_keys=True, allow_inf_nan=False)
    except ValueError as exc:
        raise ProtocolError(f"sent a message that is not strict JSON ({exc})") from None
    if type(message) is not dict:
        raise ProtocolError("sent a message that is not a JSON object")
    return message


def hello(message: dict[str, Any], expected: str) -> Hello:
    """The worker's first message, checked: its shape, and that it speaks for its own plugin."""
    try:
        said = Hello.model_validate(message)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, first["loc"])) or "the message"
        raise ProtocolError(f"sent a malformed hello ({where}: {first['msg']})") from None
    if (said.loaded is None) == (said.failed is None):
        raise ProtocolError("sent a hello that says neither loaded nor failed")
    if said.loaded is not None and said.loaded.name != expected:
        raise ProtocolError(
            f"said it loaded plugin {said.loaded.name[:80]!r}, but it was started for {expected!r}"
        )
    return said


_DONE_KEYS = frozenset({"done", "output", "data", "truncated"})
_ERROR_KEYS = frozenset({"done", "error"})
_RAISED_KEYS = (frozenset({"type", "message"}), frozenset({"type", "message", "frames", "omitted"}))


def answer(message: dict[str, Any]) -> tuple[str, int, Any]:
    """``("delta", id, text)``, ``("done", id, (output, data, truncated))`` or
    ``("error", id, (type, message, frames, omitted))``, each part checked;
    :class:`ProtocolError` else."""
    if "delta" in message:
        cid, text = message.get("delta"), message.get("text")
        if message.keys() != {"delta", "text"} or type(cid) is not int or type(text) is not str:
            raise ProtocolError("sent a malformed stream message")
        return "delta", cid, text
    cid = message.get("done")
    if type(cid) is not int:
        raise ProtocolError("sent a message that is neither an answer nor a stream")
    keys = message.keys()
    if keys == _DONE_KEYS:
        output, truncated = message["output"], message["truncated"]
        if type(output) is not str or type(truncated) is not bool:
            raise ProtocolError("sent an answer whose output is not text")
        if not _finite(message["data"]):
            raise ProtocolError("sent an answer whose data holds a number JSON cannot carry")
        return "done", cid, (output, message["data"], truncated)
    error = message.get("error")
    if keys != _ERROR_KEYS or type(error) is not dict or error.keys() not in _RAISED_KEYS:
        raise ProtocolError("sent a malformed answer")
    return "error", cid, _raised(error)


def _raised(error: dict[str, Any]) -> tuple[str, str, tuple[Frame, ...], int]:
    """An error's type, message (controls escaped), frames and frames left out, checked."""
    kind, text = error["type"], error["message"]
    if type(kind) is not str or not kind.isidentifier() or len(kind) > 100:
        raise ProtocolError("sent an error whose type is not a class name")
    if type(text) is not str or len(text) > MAX_ERROR:
        raise ProtocolError(f"sent an error message over {MAX_ERROR} characters")
    omitted = error.get("omitted", 0)
    if type(omitted) is not int or not 0 <= omitted <= 10_000_000:
        raise ProtocolError("sent a traceback whose count of frames left out is not a count")
    try:
        frames = _FRAMES.validate_python(error.get("frames", []), strict=True)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, first["loc"])) or "the frames"
        raise ProtocolError(f"sent a malformed traceback ({where}: {first['msg']})") from None
    return kind, inert(text), tuple(frames), omitted


def _finite(data: Any) -> bool:
    """Whether no number in ``data`` is infinite: the reader turns ``1e400`` into one."""
    stack = [data]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return True
