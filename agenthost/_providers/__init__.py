"""Providers: one definition in each LLM provider's tool format, and what each refuses.

The exporters (OpenAI Chat Completions and Responses, Anthropic, Gemini, MCP),
each provider's strict or subset schema rules, the per-provider compatibility
check, and tool search over definitions.

May import: _errors, _common, _authoring.
"""
