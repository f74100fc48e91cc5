"""Reading a tool call: a ``(name, arguments)`` tuple or a provider's own tool-call object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenthost._calls.results import ToolResult
from agenthost._common.text import exception_text, type_name

__all__ = ["Call", "read_call"]

Call = tuple[str, Any] | tuple[str, Any, str] | Mapping[str, Any] | Any


def read_call(call: Any) -> tuple[str, Any, str | None] | ToolResult:
    """(name, arguments, call id) from a tuple or a provider's tool-call object."""
    try:
        return _read(call)
    except BaseException as exc:  # noqa: BLE001 - a hostile call object is this call's problem
        return ToolResult.fail(
            "invalid_arguments",
            f"cannot read a tool call from {type_name(call)} ({exception_text(exc)}); "
            "pass (name, arguments) or a provider tool-call object",
        )


def _read(call: Any) -> tuple[str, Any, str | None] | ToolResult:
    if isinstance(call, tuple) and len(call) in (2, 3) and isinstance(call[0], str):
        return call[0], call[1], call[2] if len(call) == 3 else None

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    function = get(call, "function")  # OpenAI chat completions
    source = function if function is not None else call
    name = get(source, "name")
    arguments = next(
        (
            value
            for key in ("arguments", "input", "args")
            if (value := get(source, key)) is not None
        ),
        None,
    )  # OpenAI, Anthropic, Gemini spellings
    call_id = get(call, "call_id") or get(call, "id")
    if not isinstance(name, str):
        return ToolResult.fail(
            "invalid_arguments",
            f"cannot read a tool call from {type_name(call)}; "
            "pass (name, arguments) or a provider tool-call object",
        )
    return name, arguments, str(call_id) if call_id is not None else None
