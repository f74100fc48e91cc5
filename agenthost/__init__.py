"""agenthost: host AI-agent tools from a hot-reloaded plugin directory.

Plugin authors write ``@tool`` functions; the host turns each into a
:class:`ToolDefinition` with a JSON Schema and a compiled argument validator,
and exports it in every major provider's tool format.
"""

from loguru import logger

from agenthost._context import ToolContext, current_context
from agenthost._decorator import ToolOptions, tool
from agenthost._definition import ToolDefinition, ToolHints
from agenthost._errors import (
    AgentHostError,
    ArgumentProblem,
    DefinitionProblem,
    InvalidArgumentsError,
    ToolConflictError,
    ToolDefinitionError,
    WheelError,
)
from agenthost._exporters import (
    FORMATS,
    export_tool,
    export_tools,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai,
    to_openai_responses,
)
from agenthost._frozen import thaw
from agenthost._host import PluginHost
from agenthost._interceptors import (
    CachingInterceptor,
    Interceptor,
    LoggingInterceptor,
    RetryInterceptor,
)
from agenthost._isolation import WorkerOptions, WorkerState
from agenthost._loader import LoadFailure
from agenthost._masking import mask_secrets
from agenthost._permissions import Permissions
from agenthost._providers import Finding, check_compatibility
from agenthost._registry import (
    PluginEvent,
    PluginInfo,
    RegistryChange,
    ToolInfo,
)
from agenthost._results import ToolError, ToolResult
from agenthost._streaming import StreamEvent

__version__ = "0.1.0"

__all__ = [
    "AgentHostError",
    "ArgumentProblem",
    "CachingInterceptor",
    "DefinitionProblem",
    "FORMATS",
    "Finding",
    "Interceptor",
    "InvalidArgumentsError",
    "LoadFailure",
    "LoggingInterceptor",
    "Permissions",
    "PluginEvent",
    "PluginHost",
    "PluginInfo",
    "RegistryChange",
    "RetryInterceptor",
    "StreamEvent",
    "ToolConflictError",
    "ToolContext",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolError",
    "ToolHints",
    "ToolInfo",
    "ToolOptions",
    "ToolResult",
    "WheelError",
    "WorkerOptions",
    "WorkerState",
    "check_compatibility",
    "current_context",
    "export_tool",
    "export_tools",
    "mask_secrets",
    "thaw",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai",
    "to_openai_responses",
    "tool",
]

# A library stays quiet unless the application asks; the CLI turns logging on.
logger.disable("agenthost")
