"""Provider compatibility findings name the tool, its file and line, and what breaks."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from typezoo import Tree

from agenthost import Finding, ToolDefinition, check_compatibility, tool


def findings(fn: Any, **overrides: Any) -> list[tuple[str, str, str]]:
    definition = ToolDefinition.from_function(fn, **overrides)
    return [(f.provider, f.severity, f.message) for f in check_compatibility(definition)]


def test_a_plain_tool_is_fine_everywhere() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    assert findings(add) == []


def test_gemini_rejects_names_that_start_with_a_digit() -> None:
    @tool(name="3d_render")
    def render(scene: str) -> None:
        """Render a scene."""

    assert findings(render) == [
        (
            "gemini",
            "error",
            "name '3d_render' breaks the rule: start with a letter or '_', "
            "then a-z A-Z 0-9 _ . : -, at most 128",
        )
    ]


def test_dicts_and_recursion_are_errors_for_gemini_and_not_strict_for_openai() -> None:
    @tool
    def index(tree: Tree, labels: dict[str, str]) -> None:
        """Index a tree."""

    assert findings(index) == [
        (
            "gemini",
            "error",
            "$.tree.children[]: recursive model 'Tree' is not supported; cut to an object",
        ),
        ("gemini", "error", "$.labels: objects with free-form keys (dict) are not supported"),
        (
            "openai",
            "info",
            "strict mode not possible: $.labels: an object with free-form keys (a dict) cannot be strict",
        ),
        (  # Anthropic's strict tool use takes no recursion either (OpenAI's does)
            "anthropic",
            "info",
            "strict mode not possible: $.tree: recursive model 'Tree' cannot be strict",
        ),
        (
            "anthropic",
            "info",
            "strict mode not possible: $.labels: an object with free-form keys (a dict) cannot be strict",
        ),
        (
            "anthropic",
            "info",
            "strict mode not possible: $defs.Tree.children[]: recursive model 'Tree' cannot be strict",
        ),
    ]


def test_lossy_gemini_conversions_are_warnings() -> None:
    @tool
    def measure(pair: tuple[int, int], ratio: Annotated[float, Field(gt=0)]) -> None:
        """Measure."""

    assert findings(measure) == [
        ("gemini", "warning", "$.pair: tuple item types are merged (no prefixItems)"),
        ("gemini", "warning", "$.ratio: 'exclusiveMinimum' becomes an inclusive bound"),
        (
            "openai",
            "info",
            "strict mode not possible: $.pair: keyword 'prefixItems' is not supported in strict mode",
        ),
    ]


def test_a_missing_description_is_a_warning_for_every_provider() -> None:
    @tool
    def nameless(x: int) -> None:
        pass

    assert findings(nameless) == [
        ("all", "warning", "no description: models pick tools by it; add a docstring")
    ]


def test_a_finding_prints_with_file_and_line() -> None:
    @tool(name="9lives")
    def lives(count: int) -> None:
        """Count lives."""

    definition = ToolDefinition.from_function(lives)
    [finding] = check_compatibility(definition, providers=["gemini"])
    assert isinstance(finding, Finding)
    assert (finding.file, finding.line) == (__file__, lives.__code__.co_firstlineno)
    assert str(finding) == (
        f"{__file__}:{finding.line}: error: [gemini] tool '9lives': name '9lives' breaks the "
        "rule: start with a letter or '_', then a-z A-Z 0-9 _ . : -, at most 128"
    )


def test_providers_can_be_selected() -> None:
    @tool
    def index(labels: dict[str, str]) -> None:
        """Index."""

    definition = ToolDefinition.from_function(index)
    assert {f.provider for f in check_compatibility(definition, providers=["openai"])} == {"openai"}
    assert check_compatibility(definition, providers=["mcp"]) == []
    assert {f.provider for f in check_compatibility(definition, providers=["anthropic"])} == {
        "anthropic"
    }
