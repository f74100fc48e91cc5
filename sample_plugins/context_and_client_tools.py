"""A tool that reads its call context, a client-run tool and a hand-written schema."""

from typing import Any

from agenthost import ToolContext, current_context, tool


@tool
def whoami(ctx: ToolContext) -> str:
    """Say which session is calling (the context is injected, never in the schema)."""
    return f"session {ctx.session or 'anonymous'}, call {ctx.call_id}"


@tool
def trace_id() -> str:
    """Read the call's trace id from anywhere inside the tool."""
    context = current_context()
    return str(context.attributes.get("trace_id", "")) if context else ""


@tool(definition_only=True)
def confirm_with_user(question: str) -> bool:
    """Ask the human to confirm; the client application answers this call."""
    raise NotImplementedError("run by the client")


@tool(
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "filters": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
)
def search(**arguments: Any) -> dict[str, Any]:
    """Search with a hand-written schema (validated with jsonschema)."""
    return {"query": arguments["query"], "results": []}
