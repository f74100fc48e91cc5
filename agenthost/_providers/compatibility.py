"""What each LLM provider accepts: its tool-name rule and per-tool compatibility findings.

A tool can be a perfectly good Python tool and still break one provider: a
name Gemini refuses, a dict parameter Gemini's schema subset cannot express, a
schema OpenAI cannot take in strict mode. The check runs each exporter's own
conversion and reports what it had to drop or cannot express, naming the tool,
its file and line, so ``agenthost check`` can point at the declaration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from agenthost._authoring.definition import ToolDefinition
from agenthost._providers.dialects import (
    Note,
    anthropic_strict_schema,
    gemini_schema,
    strict_schema,
)

__all__ = [
    "NAME_RULES",
    "PROVIDERS",
    "Finding",
    "check_compatibility",
    "refused_names",
]

Provider = Literal["openai", "anthropic", "gemini", "mcp"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "gemini", "mcp")

# Tool-name rules as each provider documents them, each matched against the whole name.
NAME_RULES: dict[Provider, tuple[re.Pattern[str], str]] = {
    "openai": (re.compile(r"[a-zA-Z0-9_-]{1,64}"), "1-64 of a-z A-Z 0-9 _ -"),
    "anthropic": (re.compile(r"[a-zA-Z0-9_-]{1,64}"), "1-64 of a-z A-Z 0-9 _ -"),
    "gemini": (
        re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}"),
        "start with a letter or '_', then a-z A-Z 0-9 _ . : -, at most 128",
    ),
    "mcp": (re.compile(r"[a-zA-Z0-9_.-]{1,128}"), "1-128 of a-z A-Z 0-9 _ . -"),
}
_GEMINI_PARAMETER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}")


@dataclass(frozen=True, slots=True)
class Finding:
    """Something about a tool that a provider will reject (error) or lose (warning)."""

    provider: str
    severity: Literal["error", "warning", "info"]
    tool: str
    message: str
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file else ""
        return f"{where}{self.severity}: [{self.provider}] tool '{self.tool}': {self.message}"


def check_compatibility(
    definition: ToolDefinition, providers: Iterable[str] = PROVIDERS
) -> list[Finding]:
    """Findings for ``definition`` against each provider, errors first."""
    found: list[Finding] = []

    def add(provider: str, notes: Iterable[Note]) -> None:
        for severity, message in notes:
            found.append(
                Finding(
                    provider, severity, definition.name, message, definition.file, definition.line
                )
            )

    wanted = set(providers)
    if not definition.description:
        add("all", [("warning", "no description: models pick tools by it; add a docstring")])
    for provider in PROVIDERS:
        if provider not in wanted:
            continue
        pattern, rule = NAME_RULES[provider]
        if not pattern.fullmatch(definition.name):
            add(provider, [("error", f"name {definition.name!r} breaks the rule: {rule}")])
        if provider == "openai":
            add(provider, strict_schema(definition.input_schema)[1])
        elif provider == "anthropic":
            add(provider, anthropic_strict_schema(definition.input_schema)[1])
        elif provider == "gemini":
            add(provider, _gemini_notes(definition))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(found, key=lambda f: order[f.severity])


def _gemini_notes(definition: ToolDefinition) -> list[Note]:
    notes: list[Note] = []
    for name in definition.input_schema.get("properties") or {}:
        if not _GEMINI_PARAMETER.fullmatch(name):
            notes.append(
                ("error", f"parameter name {name!r} must match {_GEMINI_PARAMETER.pattern}")
            )
    return notes + gemini_schema(definition.input_schema)[1]


def refused_names(definitions: Iterable[ToolDefinition]) -> list[str]:
    """Which provider refuses which tool name, one line each (found at load time)."""
    return [
        f"tool '{d.name}' at {d.location}: {provider} refuses the name ({rule})"
        for d in definitions
        for provider, (pattern, rule) in NAME_RULES.items()
        if not pattern.fullmatch(d.name)
    ]
