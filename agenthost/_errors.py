"""Exceptions raised by agenthost.

Two kinds of failure are kept apart on purpose: a plugin author who declared a
tool wrongly gets a :class:`ToolDefinitionError` at load time, while anything
that goes wrong *during* a call becomes a ``ToolResult`` with an error code and
is never raised out of the executor.

    AgentHostError
     ├── ToolDefinitionError      a @tool declaration cannot become a tool
     ├── InvalidArgumentsError    a call's arguments do not match the tool's schema
     ├── ToolConflictError        the host registered a name someone already owns
     └── WheelError               a wheel cannot be used as a plugin (unsafe, corrupt, ...)

May import: nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AgentHostError",
    "ArgumentProblem",
    "DefinitionProblem",
    "InvalidArgumentsError",
    "SandboxWarning",
    "ToolConflictError",
    "ToolDefinitionError",
    "WheelError",
]


class AgentHostError(Exception):
    """Base class of every exception agenthost raises on purpose."""


@dataclass(frozen=True, slots=True)
class DefinitionProblem:
    """One thing wrong with a tool declaration, with the way to fix it."""

    message: str
    parameter: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = ""
        if self.parameter is not None:
            where = f"parameter '{self.parameter}'"
            if self.line is not None:
                where += f" (line {self.line})"
            where += ": "
        return where + self.message

    def as_dict(self) -> dict[str, Any]:
        return {"message": self.message, "parameter": self.parameter, "line": self.line}


class ToolDefinitionError(AgentHostError):
    """A function cannot become a tool; every problem found is listed at once."""

    def __init__(
        self,
        *,
        function: str,
        problems: Sequence[DefinitionProblem],
        tool: str | None = None,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        self.function = function
        self.tool = tool
        self.file = file
        self.line = line
        self.problems = tuple(problems)
        super().__init__(self._render())

    def as_dict(self) -> dict[str, Any]:
        """The error as JSON-ready data: where, and each problem with its parameter and line."""
        return {
            "message": str(self),
            "function": self.function,
            "tool": self.tool,
            "file": self.file,
            "line": self.line,
            "problems": [problem.as_dict() for problem in self.problems],
        }

    def _render(self) -> str:
        location = f"{self.file}:{self.line}" if self.file and self.line else self.file or "?"
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [
            f"cannot define tool from function '{self.function}' at {location} ({count} {noun}):"
        ]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One failing spot in a call's arguments, addressed by a JSON path such as ``$.items[2]``."""

    path: str
    message: str
    type: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message, "type": self.type}


class InvalidArgumentsError(AgentHostError):
    """The arguments of a call do not satisfy the tool's input schema.

    ``problems`` lists the first problems found; ``total`` counts all of them.
    """

    def __init__(
        self, tool: str, problems: Sequence[ArgumentProblem], *, total: int | None = None
    ) -> None:
        self.tool = tool
        self.problems = tuple(problems)
        self.total = max(total or 0, len(self.problems))
        details = "; ".join(f"{p.path}: {p.message}" for p in self.problems)
        noun = "problem" if self.total == 1 else "problems"
        more = self.total - len(self.problems)
        tail = f"; and {more:,} more" if more else ""
        super().__init__(
            f"invalid arguments for tool '{tool}' ({self.total:,} {noun}): {details}{tail}"
        )


class ToolConflictError(AgentHostError):
    """The host tried to register a tool name that is already owned (first claim wins)."""

    def __init__(self, name: str, owner: str) -> None:
        self.name = name
        self.owner = owner
        super().__init__(f"tool '{name}' is already owned by {owner}; choose another name")


class WheelError(AgentHostError):
    """A wheel that cannot be used as a plugin, with the reason."""


class SandboxWarning(UserWarning):
    """Workers run with fewer guarantees than the sandbox gives (no bubblewrap, namespaces
    refused, no system call filter); the message says which are lost. A warning, not a
    log line, so that an application that never configured logging still hears of it;
    ``sandbox="required"`` refuses instead."""
