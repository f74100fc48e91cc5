"""Descriptions from docstrings: a function's summary and Args, and attribute docstrings.

Google, NumPy, reST and Epydoc styles are read with ``docstring_parser``; prose
without sections is a summary only. The properties of models, dataclasses and
TypedDicts are described by the string literal that follows each annotated
attribute in the class body (the convention PEP 257 names).
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import linecache
import re
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

import docstring_parser

from agenthost._errors import DefinitionProblem

__all__ = ["Docstring", "attribute_docs", "one_line", "parse_docstring"]


@dataclass(slots=True)
class Docstring:
    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(target: Any, problems: list[DefinitionProblem]) -> Docstring:
    doc = _docstring(target)
    if not doc:
        return Docstring()
    style = _docstring_style(doc)
    if style is None:  # prose only: no need to try every parser
        return Docstring(one_line(doc.split("\n\n", 1)[0]))
    try:
        parsed = docstring_parser.parse(doc, style)
    except docstring_parser.ParseError as exc:
        problems.append(
            DefinitionProblem(f"the docstring cannot be parsed ({exc}); fix its layout")
        )
        return Docstring()
    summary = parsed.short_description or ""
    if parsed.long_description and not parsed.blank_after_short_description:
        summary += " " + parsed.long_description.split("\n\n", 1)[0]
    params = {
        p.arg_name: one_line(p.description)
        for p in parsed.params
        if p.description and not p.arg_name.startswith("*")
    }
    return Docstring(one_line(summary), params)


_GOOGLE_SECTIONS = (
    "Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    "Returns?|Yields?|Raises|Exceptions|Attributes|Examples?|Notes?|Todo"
)
_STYLE_MARKERS = (
    (r"^\s*:(param|parameter|arg|argument|key|keyword|returns?|raises?)\b", "REST"),
    (r"^\s*\w[\w ]*\n\s*-{3,}\s*$", "NUMPYDOC"),
    (rf"^\s*({_GOOGLE_SECTIONS})\s*:\s*$", "GOOGLE"),
    (r"^\s*@(param|return|raise)", "EPYDOC"),
)
_STYLES = [(re.compile(p, re.M), docstring_parser.DocstringStyle[s]) for p, s in _STYLE_MARKERS]


def _docstring(target: Any) -> str | None:
    """The cleaned docstring, made parseable when it opens with a section (``Args:``)."""
    doc = inspect.getdoc(target)
    if not doc:
        return doc
    first, _, rest = doc.partition("\n")
    if not _SECTION.fullmatch(first.strip()):
        return doc
    raw = (getattr(target, "__doc__", None) or "").expandtabs()
    opening, _, after = raw.partition("\n")
    if opening.strip():  # the section starts on the quotes' line: cleandoc lost its indent
        lines = textwrap.dedent(after).strip("\n").splitlines()
        if lines and not lines[0][:1].isspace():
            lines = [
                line if not line or _SECTION.fullmatch(line.strip()) else "    " + line
                for line in lines
            ]
        rest = "\n".join(lines)
    return f"\n{first.strip()}\n{rest}"  # docstring_parser wants a summary line first


_SECTION = re.compile(rf"(?:{_GOOGLE_SECTIONS})\s*:")


def _docstring_style(doc: str) -> docstring_parser.DocstringStyle | None:
    """The style whose section markers appear in ``doc``; None for plain prose."""
    for pattern, style in _STYLES:
        if pattern.search(doc):
            return style
    return None


def one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def attribute_docs(cls: type) -> dict[str, str]:
    """``{attribute: docstring}`` from the string literals that follow annotated attributes
    in the class bodies of ``cls`` and its bases (the convention PEP 257 names)."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        module = sys.modules.get(klass.__module__)
        filename = getattr(module, "__file__", None)
        if module is None or not isinstance(filename, str) or klass.__module__ in _NO_DOCS:
            continue
        source = "".join(linecache.getlines(filename, module.__dict__))
        found.update(_documented_attributes(source).get(klass.__qualname__, {}))
    return found


_NO_DOCS = frozenset({"builtins", "typing", "typing_extensions", "pydantic.main"})


@functools.lru_cache(maxsize=32)
def _documented_attributes(source: str) -> dict[str, dict[str, str]]:
    """Attribute docstrings of every class in a module, by qualified name: one parse per
    source text, shared by all the tools and models of a plugin."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, dict[str, str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                docs = {
                    statement.target.id: one_line(inspect.cleandoc(after.value.value))
                    for statement, after in itertools.pairwise(node.body)
                    if isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                }
                found[prefix + node.name] = docs
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, f"{prefix}{node.name}.<locals>.")

    visit(tree.body, "")
    return found
