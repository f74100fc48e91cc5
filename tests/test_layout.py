"""The package layout: rooms by job, and an import graph that runs one way.

Every room (a subpackage such as ``agenthost._calls``) and every private module
at the top (``_host``, ``_errors``, ...) says in its docstring what it may
import, on a line ``May import: _errors, _common.``. These tests read those
lines and every import statement of the package with ``ast``: at module level,
inside functions, and the type-only ones under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import agenthost

PACKAGE = Path(agenthost.__file__).parent
ROOT = PACKAGE.parent
SURFACE = {"agenthost", "agenthost.__main__"}  # the public surface may import any room
ALLOWED = re.compile(r"^May import: ([^.]*)\.?", re.M)  # the list may wrap


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = module_files()


def room_of(module: str) -> str:
    """``agenthost._calls.executor`` -> ``_calls``; ``agenthost._host`` -> ``_host``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else module


ROOMS = sorted({m.split(".")[1] for m in MODULES if m.count(".") == 2})  # the subpackages
TOPS = sorted(  # the private modules at the top, and otel
    room_of(m) for m, path in MODULES.items() if path.parent == PACKAGE and m not in SURFACE
)


def room_docstring(room: str) -> str:
    return ast.get_docstring(ast.parse(MODULES[f"agenthost.{room}"].read_text())) or ""


def may_import(room: str) -> set[str]:
    found = ALLOWED.search(room_docstring(room))
    assert found is not None, f"agenthost.{room}: its docstring has no 'May import:' line"
    listed = found[1].strip()
    return set() if listed == "nothing" else {name.strip() for name in listed.split(",")}


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def imports(module: str) -> Iterator[tuple[str, bool, int]]:
    """(imported agenthost module, whether only for type checking, line) for every import."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, type_only: bool) -> Iterator[tuple[str, bool, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                yield from visit(child, True)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "agenthost":
                        yield alias.name, type_only, child.lineno
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                if base.split(".")[0] != "agenthost":
                    continue
                for alias in child.names:  # `from agenthost._calls import results`
                    target = f"{base}.{alias.name}"
                    yield (target if target in MODULES else base), type_only, child.lineno
            yield from visit(child, type_only)

    yield from visit(ast.parse(path.read_text()), False)


def test_every_room_says_what_it_is_for_and_what_it_may_import() -> None:
    for room in ROOMS + TOPS:
        text = room_docstring(room)
        assert len(text.split("\n\n")[0]) > 30, f"agenthost.{room}: say what it is for"
        for other in may_import(room):
            assert other in ROOMS + TOPS, f"agenthost.{room} lists {other!r}, not a room"


@pytest.mark.parametrize("module", sorted(set(MODULES) - SURFACE))
def test_each_module_imports_only_the_rooms_its_room_may_import(module: str) -> None:
    room = room_of(module)
    allowed = {room} | may_import(room)
    for target, _, line in imports(module):
        assert target != "agenthost", (
            f"{module}:{line} imports the package itself, which imports every room; "
            "import the module that defines the name"
        )
        assert room_of(target) in allowed, (
            f"{module}:{line} imports {target}, but {room} may import only "
            f"{', '.join(sorted(allowed - {room}))}"
        )


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or None (depth-first, three colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circle_between_modules() -> None:
    """Counting every import: inside functions and for type checking only, too."""
    graph = {m: {t for t, _, _ in imports(m)} for m in MODULES}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_import_circle_between_rooms() -> None:
    graph: dict[str, set[str]] = {}
    for module in set(MODULES) - SURFACE:
        room = room_of(module)
        graph.setdefault(room, set()).update(
            room_of(t) for t, _, _ in imports(module) if room_of(t) != room
        )
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_modules_inside_a_room_drop_the_underscore_and_the_rooms_word() -> None:
    for module in MODULES:
        parts = module.split(".")
        if len(parts) != 3:
            continue
        room, name = parts[1], parts[2]
        assert not name.startswith("_"), f"{module}: the room is private already"
        assert room.strip("_") not in name.split("_"), f"{module}: drop the room's word"


def test_the_readme_table_says_what_the_docstrings_say() -> None:
    """The README's 'How the code is laid out' table: one row per room, the same imports."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### How the code is laid out", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `agenthost/(\w+)(?:/|\.py)` \|.*\| (.*) \|$", section, re.M)
    listed = {room: set(re.findall(r"`(\w+)`", allowed)) for room, allowed in rows}
    assert set(ROOMS) <= set(listed) <= set(ROOMS + TOPS)
    for room, allowed in listed.items():
        assert allowed == may_import(room), room


def test_a_module_that_breaks_the_rules_is_caught(tmp_path: Path) -> None:
    """The checks see imports inside functions and under TYPE_CHECKING too."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from agenthost._cli.main import main\n"
        "def f():\n"
        "    from agenthost._host import PluginHost\n"
    )
    MODULES["agenthost._common.probe"] = tmp_path / "probe.py"
    (tmp_path / "probe.py").write_text(source)
    try:
        found = list(imports("agenthost._common.probe"))
        assert ("agenthost._cli.main", True, 3) in found
        assert ("agenthost._host", False, 5) in found
        with pytest.raises(AssertionError, match="may import only"):
            test_each_module_imports_only_the_rooms_its_room_may_import("agenthost._common.probe")
    finally:
        del MODULES["agenthost._common.probe"]


LONGEST = 50  # lines; a longer function needs its reason here, or a split
LONGER_FOR_A_REASON: dict[str, str] = {
    "agenthost._host:__init__": "its signature lists every option of the host, one a line",
}


def test_functions_are_short_or_have_a_reason() -> None:
    long = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                name = f"{module}:{node.name}"
                if length > LONGEST and name not in LONGER_FOR_A_REASON:
                    long[name] = length
    assert not long, f"over {LONGEST} lines: {long}; split them or say why in LONGER_FOR_A_REASON"
