"""Providers: one definition in each LLM provider's tool format, and what each refuses.

* ``exporters``: OpenAI Chat Completions and Responses, Anthropic, Gemini, MCP.
* ``dialects``: each provider's JSON Schema rules (OpenAI strict, Anthropic
  strict, Gemini's OpenAPI subset), with notes on what a conversion loses.
* ``compatibility``: each provider's tool-name rule and per-tool findings.
* ``search``: finding tools by what they do (BM25).

May import: _errors, _common, _authoring.
"""
