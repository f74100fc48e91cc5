"""A loaded plugin version: its tools, the calls in flight on it, and its retirement.

A call enters a version before running one of its tools and exits after; once
retired, its modules are dropped and ``on_unload`` runs when the last of those
calls has ended, so a running call never loses its code. Lifecycle hooks run
in daemon threads under a time limit, so a hook that hangs is cut off and
never keeps the process alive.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from agenthost._authoring.definition import ToolDefinition
from agenthost._common.text import exception_text
from agenthost._directory.namespace import Namespace
from agenthost._directory.scan import Source
from agenthost._errors import ToolDefinitionError

__all__ = [
    "HOOK_TIMEOUT",
    "LoadFailure",
    "PluginVersion",
    "hook_timeout_from",
    "run_hook",
]

HOOK_TIMEOUT = 10.0  # seconds an on_load or on_unload hook may take


def hook_timeout_from(value: float | None) -> float:
    """The hook time limit: the argument, else ``AGENTHOST_HOOK_TIMEOUT`` (s), else 10 s."""
    if value is not None:
        return float(value)
    text = os.environ.get("AGENTHOST_HOOK_TIMEOUT")
    if text:
        try:
            return float(text)
        except ValueError:
            logger.warning("AGENTHOST_HOOK_TIMEOUT={!r} is not a number; using the default", text)
    return HOOK_TIMEOUT


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """Why a plugin did not load: the message, where, and the plugin's part of the traceback."""

    message: str
    file: str | None = None
    line: int | None = None
    traceback: str = ""
    isolation: str = "in-process"  # where the version that failed was to run

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else self.file or ""

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


@dataclass(eq=False)
class PluginVersion:
    """One loaded version of a plugin.

    Calls ``enter()`` it before running one of its tools and ``exit()`` after;
    once retired, its modules are dropped and ``on_unload`` runs when the last
    of those calls has ended, so a running call never loses its code.
    """

    name: str
    source: Source
    version: str | None
    content_hash: str
    definitions: tuple[ToolDefinition, ...]
    definition_errors: tuple[ToolDefinitionError, ...] = ()  # tools that could not be defined
    warnings: tuple[str, ...] = ()  # hook errors, names some provider refuses
    load_ms: float = 0.0
    namespace: Namespace | None = None
    unload_hooks: tuple[Callable[[], Any], ...] = ()
    hook_timeout: float = HOOK_TIMEOUT
    on_closed: Callable[[PluginVersion], None] | None = None
    isolation: str = "in-process"
    worker: Any = None  # the live WorkerState of a process-isolated version
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _calls: list[None] = field(default_factory=list, repr=False)
    _retired: bool = False
    _closed: bool = False

    @property
    def problems(self) -> tuple[str, ...]:
        """The definition errors as text, one per tool that could not be defined."""
        return tuple(map(str, self.definition_errors))

    # enter() and exit() are on every call's path, so they avoid the lock: list append
    # and pop are atomic, and enter() publishes its call *before* looking at _retired
    # while retire() sets _retired *before* counting calls, so one of the two always
    # sees the other. Only closing, which happens once, takes the lock.

    def enter(self) -> bool:
        """Count a call in; False once the version is retired (route the call to the new one)."""
        self._calls.append(None)
        if self._retired:
            self.exit()
            return False
        return True

    def retain(self) -> None:
        """One more hold by a call that already entered (work that may outlive the call)."""
        self._calls.append(None)

    def exit(self) -> None:
        """Count a call out; the last one out of a retired version closes it."""
        self._calls.pop()
        if self._retired and not self._calls:
            self._close_once()

    @property
    def closed(self) -> bool:
        return self._closed

    def retire(self) -> None:
        """No new calls will be routed here; close now or when the last call ends."""
        self._retired = True
        if not self._calls:
            self._close_once()

    def _close_once(self) -> None:
        with self._lock:
            if self._closed or self._calls:
                return
            self._closed = True
        self._close()

    def _close(self) -> None:
        for hook in self.unload_hooks:
            error = run_hook(hook, self.hook_timeout)
            if error:
                logger.warning("plugin {}: on_unload failed: {}", self.name, error)
        if self.namespace is not None:
            self.namespace.close()
        if self.on_closed is not None:
            self.on_closed(self)
        self.definitions = ()
        self.unload_hooks = ()


def run_hook(hook: Callable[[], Any], timeout: float = HOOK_TIMEOUT) -> str | None:
    """Run a sync or async lifecycle hook; return an error message instead of raising.

    The hook runs in a daemon thread: one that outlives ``timeout`` is left
    behind, and never keeps the process from exiting.
    """
    outcome: list[str | None] = []

    def call() -> None:
        try:
            result = hook()
            if inspect.isawaitable(result):
                asyncio.run(_await(result))
        except BaseException as exc:  # noqa: BLE001 - plugin code: reported, never fatal
            outcome.append(f"{_name(hook)} raised {exception_text(exc)}")
        else:
            outcome.append(None)

    thread = threading.Thread(target=call, name=f"agenthost-hook-{_name(hook)}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        return f"{_name(hook)} did not finish within {timeout:g} s"
    return outcome[0]


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _name(hook: Callable[..., Any]) -> str:
    try:
        name = getattr(hook, "__name__", None)
    except BaseException:  # noqa: BLE001 - a hostile callable
        name = None
    return name if isinstance(name, str) else "hook"
