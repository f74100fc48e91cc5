"""The provider fields of 2026: strict and examples for Anthropic, tool search (defer_loading),
prompt caching, output schemas for OpenAI Responses and Gemini, icons and _meta for MCP."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import jsonschema
import mcp.types
import pytest
from helpers import wait_for, write
from provider_rules import (
    ANTHROPIC_TOOL_PARAM_KEYS,
    GEMINI_DECLARATION_KEYS,
    RESPONSES_FUNCTION_KEYS,
    anthropic_strict_violations,
    gemini_violations,
)
from pydantic import BaseModel, Field
from typezoo import ZOO, Tree, function_with

from agenthost import (
    PluginHost,
    ToolDefinition,
    ToolDefinitionError,
    check_compatibility,
    thaw,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai_responses,
    tool,
)

ZOO_TOOLS = {key: ToolDefinition.from_function(tool(function_with(ZOO[key][0]))) for key in ZOO}


class Address(BaseModel):
    street: str
    zip_code: Annotated[str, Field(pattern=r"^\d{5}$")]


@tool(examples=[{"name": "Ada", "age": 36}, "one person per call"])
def register_person(
    name: Annotated[str, Field(min_length=1, max_length=80)],
    age: Annotated[int, Field(ge=0, le=150)],
    tags: Annotated[list[str], Field(min_length=2)] | None = None,
    address: Address | None = None,
) -> dict[str, int]:
    """Register a person."""
    return {"id": 1}


REGISTER = ToolDefinition.from_function(register_person)


# --- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_strict_follows_the_strict_tool_use_rules_and_keeps_constraints_in_words() -> (
    None
):
    exported = thaw(to_anthropic(REGISTER, strict=True))
    assert exported["strict"] is True
    schema = exported["input_schema"]
    assert anthropic_strict_violations(schema) == []
    properties = schema["properties"]
    assert "minLength: 1" in properties["name"]["description"]
    assert "maximum: 150" in properties["age"]["description"]
    assert schema["required"] == ["name", "age"]  # optional stays optional (unlike OpenAI)
    address = properties["address"]["anyOf"][0]
    assert address["additionalProperties"] is False
    assert "pattern" in address["properties"]["zip_code"]["description"]
    # Whatever the grammar cannot hold, the host still enforces:
    with PluginHost(None, installed=False) as host:
        host.register(REGISTER)
        refused = host.execute("register_person", {"name": "", "age": 200})
    assert refused.error is not None
    assert refused.error.code == "invalid_arguments"


def test_anthropic_input_examples_come_from_argument_examples_only() -> None:
    exported = to_anthropic(REGISTER)
    assert thaw(exported["input_examples"]) == [{"name": "Ada", "age": 36}]
    assert "one person per call" in exported["description"]
    assert "Ada" not in exported["description"]  # not said twice
    assert set(exported) <= ANTHROPIC_TOOL_PARAM_KEYS


@pytest.mark.parametrize("key", list(ZOO))
def test_every_type_is_strict_for_anthropic_or_says_why_not(key: str) -> None:
    definition = ZOO_TOOLS[key]
    exported = to_anthropic(definition, strict=True)
    assert set(exported) <= ANTHROPIC_TOOL_PARAM_KEYS
    jsonschema.Draft202012Validator.check_schema(thaw(exported["input_schema"]))
    if exported.get("strict"):
        assert anthropic_strict_violations(exported["input_schema"]) == []
    else:
        assert exported["input_schema"] == definition.input_schema
        infos = [
            f
            for f in check_compatibility(definition, ["anthropic"])
            if f.message.startswith("strict mode not possible")
        ]
        assert infos, "a tool that cannot be strict says why"


def test_recursive_models_and_dicts_are_not_made_strict_for_anthropic() -> None:
    def walk(tree: Tree) -> int:
        """Walk a tree."""
        return 0

    def count(words: dict[str, int]) -> int:
        """Count words."""
        return 0

    for fn in (walk, count):
        exported = to_anthropic(ToolDefinition.from_function(fn), strict=True)
        assert "strict" not in exported


# --- tool search: defer_loading ------------------------------------------------------------------


SEARCHABLE = """
from agenthost import tool

@tool
def get_weather(city: str) -> str:
    '''Current weather and forecast for a city.

    Args:
        city: the city name
    '''
    return "sunny"

@tool
def send_email(to: str, body: str) -> str:
    '''Send an email message to an address.'''
    return "sent"

@tool
def convertCurrency(amount: float, currency: str) -> float:
    '''Convert money using today's exchange rates.'''
    return amount
"""


@pytest.fixture
def searchable(tmp_path: Path) -> PluginHost:
    plugins = tmp_path / "plugins"
    write(plugins / "office.py", SEARCHABLE)
    return PluginHost(plugins, installed=False, tool_search=True, watch=True, debounce=0.02)


def _names(exported: list[Any]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in exported]


def test_loaded_tools_are_shown_and_the_rest_deferred_where_providers_search(
    searchable: PluginHost,
) -> None:
    with searchable as host:
        for format in ("anthropic", "openai-responses"):
            exported = host.schemas(format, loaded=["get_weather"])
            deferred = {t["name"]: t.get("defer_loading", False) for t in exported}
            assert deferred == {
                "convertCurrency": True,
                "get_weather": False,
                "search_tools": False,  # always loaded: it is how the rest are found
                "send_email": True,
            }
        for format in ("openai", "gemini", "mcp"):  # no tool search: the rest are left out
            assert _names(host.schemas(format, loaded=["get_weather"])) == [
                "get_weather",
                "search_tools",
            ]
        assert all("defer_loading" not in t for t in host.schemas("anthropic"))
        assert set(_names(host.schemas("openai", loaded=[]))) == {"search_tools"}


def test_a_caller_finds_only_the_tools_it_may_call(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    write(
        plugins / "office.py",
        SEARCHABLE.replace(
            "@tool\ndef send_email", "@tool(permissions={'mail.send'})\ndef send_email"
        ),
    )
    with PluginHost(plugins, installed=False, tool_search=True) as host:
        host.permissions.grant("clerk", "mail.send")

        def found(session: str | None) -> list[str]:
            data = host.execute("search_tools", {"query": "email an address"}, session=session).data
            return [t["name"] for t in data["tools"]]

        assert "send_email" in found("clerk")
        assert "send_email" not in found("guest")  # another session's tool stays unseen
        assert "send_email" not in found(None)
        assert "send_email" not in {t.name for t in host.search_tools("email", session="guest")}
        assert host.search_tools("email", 1)[0].name == "send_email"  # the host sees all


def test_search_finds_tools_by_name_words_description_and_parameter_docs(
    searchable: PluginHost,
) -> None:
    with searchable as host:
        assert [t.name for t in host.search_tools("forecast", 3)] == ["get_weather"]
        assert [t.name for t in host.search_tools("CITY")] == ["get_weather"]
        assert [t.name for t in host.search_tools("currency")] == ["convertCurrency"]
        assert host.search_tools("email an address")[0].name == "send_email"
        assert host.search_tools("zebra xylophone") == []
        assert host.search_tools("") == []
        assert host.search_tools("weather", 0) == []
        assert "search_tools" not in {t.name for t in host.search_tools("find tools")}
        huge = "weather " * 200_000  # 1.6 MB of query
        assert [t.name for t in host.search_tools(huge, 1)] == ["get_weather"]


def test_the_search_tool_answers_a_model_and_follows_reloads(
    searchable: PluginHost, tmp_path: Path
) -> None:
    with searchable as host:
        result = host.execute("search_tools", json.dumps({"query": "exchange rates"}))
        assert result.success, result.error
        assert result.data == {
            "tools": [
                {
                    "name": "convertCurrency",
                    "description": "Convert money using today's exchange rates.",
                }
            ]
        }
        bad = host.execute("search_tools", {"query": "", "limit": 500})
        assert bad.error is not None
        assert bad.error.code == "invalid_arguments"
        write(
            tmp_path / "plugins" / "calendar.py",
            "from agenthost import tool\n@tool\ndef book_meeting(when: str) -> str:\n"
            "    'Book a meeting in the calendar.'\n    return when\n",
        )
        wait_for(lambda: host.tool("book_meeting"), what="the new plugin to load")
        found = host.execute("search_tools", {"query": "calendar meeting"}).data
        assert found["tools"][0]["name"] == "book_meeting"


def test_tool_search_without_its_extra_fails_at_construction_with_a_command_that_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "bm25s", None)  # as if not installed
    with pytest.raises(ImportError, match="tool_search=True needs bm25s") as raised:
        PluginHost(tmp_path, installed=False, tool_search=True)  # not at the model's first search
    # installed from this checkout (pip install -e): reinstall it with the extra, by the
    # interpreter that runs, since agenthost is on no package index
    checkout = Path(__file__).resolve().parent.parent
    command = f"{sys.executable} -m pip install -e '{checkout}[search]'"
    assert str(raised.value).endswith(command)


def test_anthropic_cache_control_marks_the_last_tool_only_when_asked(
    searchable: PluginHost,
) -> None:
    with searchable as host:
        cached = host.schemas("anthropic", cache_control=True)
        assert [("cache_control" in t) for t in cached] == [False, False, False, True]
        assert cached[-1]["cache_control"] == {"type": "ephemeral"}
        hour = host.schemas("anthropic", cache_control={"type": "ephemeral", "ttl": "1h"})
        assert hour[-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        assert all("cache_control" not in t for t in host.schemas("anthropic"))
        assert all("cache_control" not in t for t in host.schemas("openai", cache_control=True))


# --- output schemas ----------------------------------------------------------------------------


def test_openai_responses_takes_an_output_schema_when_the_output_is_json() -> None:
    def as_object() -> dict[str, int]:
        """Object."""
        return {}

    def as_number() -> int:
        """Number."""
        return 1

    def as_text() -> str:
        """Text is not JSON-encoded, so it has no output schema."""
        return ""

    def as_maybe_text() -> int | str:
        """Maybe text."""
        return ""

    schemas = {
        fn.__name__: to_openai_responses(ToolDefinition.from_function(fn)).get("output_schema")
        for fn in (as_object, as_number, as_text, as_maybe_text)
    }
    assert thaw(schemas) == {
        "as_object": {"type": "object", "additionalProperties": {"type": "integer"}},
        "as_number": {"type": "integer"},
        "as_text": None,
        "as_maybe_text": None,
    }
    for key in ZOO:
        exported = to_openai_responses(ZOO_TOOLS[key])
        assert set(exported) <= RESPONSES_FUNCTION_KEYS


def test_gemini_declares_the_response_from_the_output_schema() -> None:
    json_form = to_gemini(REGISTER, json_schema=True)
    assert json_form["responseJsonSchema"] == REGISTER.output_schema
    assert "response" not in json_form  # the two are mutually exclusive
    openapi_form = to_gemini(REGISTER)
    assert openapi_form["response"]["type"] == "OBJECT"
    assert "responseJsonSchema" not in openapi_form
    for key in ZOO:
        assert gemini_violations(to_gemini(ZOO_TOOLS[key])) == []
        assert set(to_gemini(ZOO_TOOLS[key], json_schema=True)) <= GEMINI_DECLARATION_KEYS


# --- MCP icons and _meta ----------------------------------------------------------------------


def test_mcp_icons_and_meta_come_from_tool_options_and_fit_the_sdk_type() -> None:
    @tool(
        icons=[
            {"src": "https://example.com/sun.png", "mimeType": "image/png", "sizes": ["48x48"]},
            {"src": "data:image/svg+xml;base64,PHN2Zy8+", "theme": "dark"},
        ],
        meta={"com.example/team": "geo", "weight": [1, 2]},
    )
    def sunny() -> bool:
        """Is it sunny?"""
        return True

    exported = thaw(to_mcp(ToolDefinition.from_function(sunny)))
    parsed = mcp.types.Tool.model_validate(exported)
    assert [icon.src for icon in parsed.icons or []] == [
        "https://example.com/sun.png",
        "data:image/svg+xml;base64,PHN2Zy8+",
    ]
    assert parsed.meta == {"com.example/team": "geo", "weight": [1, 2]}
    assert not {"icons", "_meta"} & set(to_mcp(REGISTER))


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"icons": [{"src": "file:///etc/passwd"}]}, "'src' must be an https://"),
        ({"icons": [{"src": "https://x/a.png", "size": "48"}]}, "unknown keys ['size']"),
        ({"icons": [{"src": "https://x/a.png", "sizes": "48x48"}]}, "'sizes' must be a list"),
        ({"icons": [{"src": "https://x/a.png", "theme": "blue"}]}, "'theme' must be"),
        ({"icons": ["https://x/a.png"]}, "must be a dict"),
        ({"meta": {"when": object()}}, "meta must be JSON"),
        ({"meta": {1: "x"}}, "string keys"),
        ({"meta": {"x": float("nan")}}, "meta must be JSON"),
    ],
)
def test_bad_icons_and_meta_are_definition_errors_with_the_fix(
    options: dict[str, Any], says: str
) -> None:
    def fn() -> None:
        """Does nothing."""

    with pytest.raises(ToolDefinitionError, match=r"(?s).*" + says.replace("[", r"\[")):
        ToolDefinition.from_function(fn, **options)


def test_a_changed_icon_is_a_changed_tool() -> None:
    def fn() -> None:
        """Does nothing."""

    plain = ToolDefinition.from_function(fn)
    with_icon = ToolDefinition.from_function(fn, icons=[{"src": "https://x/a.png"}])
    assert plain.fingerprint != with_icon.fingerprint
