"""Finding tools by what they do: BM25 over names, descriptions and parameter docs.

An agent with thousands of tools cannot be shown every definition in every
request; it is shown a search tool instead and loads what the search finds.
The index is built once per registry version (on the first search after a
change) with ``bm25s``, from the ``search`` extra.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agenthost._authoring.definition import ToolDefinition
from agenthost._common.install import install_command

__all__ = ["SEARCH_TOOL", "ToolIndex", "tokens"]

SEARCH_TOOL = "search_tools"

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "in", "is", "it",
     "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "will", "with"}
)  # fmt: skip


def tokens(text: str) -> list[str]:
    """Lower-case words of ``text``, with ``get_weather`` and ``getWeather`` split apart."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in _STOPWORDS]


def _document(definition: ToolDefinition) -> list[str]:
    parts = [definition.name, definition.name, definition.title or "", definition.description]
    parts += definition.tags
    properties: Mapping[str, Any] = definition.input_schema.get("properties") or {}
    for name, schema in properties.items():
        parts.append(name)
        if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
            parts.append(schema["description"])
    return tokens(" ".join(parts))


class ToolIndex:
    """A BM25 index of some tool definitions; :meth:`search` returns their names, best first."""

    def __init__(self, definitions: Iterable[ToolDefinition]) -> None:
        try:
            import bm25s  # type: ignore[import-untyped]
        except ImportError:
            raise ImportError(f"tool search needs bm25s: {install_command('search')}") from None
        listed = list(definitions)
        self._names = [d.name for d in listed]
        self._retriever: Any = None
        corpus = [_document(d) or [d.name.lower()] for d in listed]
        if corpus:
            self._retriever = bm25s.BM25()
            self._retriever.index(corpus, show_progress=False)
        self._vocabulary = {word for document in corpus for word in document}

    def search(self, query: str, limit: int) -> list[str]:
        """Names of the tools matching ``query``, best first, at most ``limit``."""
        words = [w for w in tokens(query) if w in self._vocabulary]
        if not words or self._retriever is None or limit <= 0:
            return []
        k = min(limit, len(self._names))
        found, scores = self._retriever.retrieve([words], k=k, show_progress=False)
        return [self._names[i] for i, score in _pairs(found[0], scores[0]) if score > 0]


def _pairs(found: Sequence[Any], scores: Sequence[Any]) -> list[tuple[int, float]]:
    return [(int(i), float(s)) for i, s in zip(found, scores, strict=True)]
