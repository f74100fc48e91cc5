"""The shipped example plugins define valid tools that every provider can take."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from agenthost import FORMATS, ToolDefinition, check_compatibility, export_tool
from agenthost._authoring.decorator import tool_options

ROOT = Path(__file__).parent.parent
FILES = sorted([*ROOT.glob("sample_plugins/*.py"), *ROOT.glob("plugins/*.py")])


@pytest.fixture
def load() -> Iterator[Callable[[Path], ModuleType]]:
    """Import a plugin file as a module (kept in sys.modules while the test defines its tools)."""
    names: list[str] = []

    def _load(path: Path) -> ModuleType:
        name = f"_sample_{path.parent.name}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        names.append(name)
        spec.loader.exec_module(module)
        return module

    yield _load
    for name in names:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_sample_plugin_defines_clean_tools(path: Path, load: Callable[[Path], ModuleType]) -> None:
    module = load(path)
    tools = [value for value in vars(module).values() if tool_options(value) is not None]
    assert tools, f"{path} defines no tools"
    for fn in tools:
        definition = ToolDefinition.from_function(fn)
        errors = [f for f in check_compatibility(definition) if f.severity == "error"]
        if definition.name not in ("create_order", "search"):  # dicts: Gemini needs json_schema
            assert errors == []
        for format in FORMATS:
            export_tool(definition, format)
