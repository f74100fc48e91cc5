"""agenthost: host AI-agent tools from a hot-reloaded plugin directory.

Plugin authors write ``@tool`` functions; the host turns each into a
:class:`ToolDefinition` with a JSON Schema and a compiled argument validator,
and exports it in every major provider's tool format.
"""

from loguru import logger

from agenthost._authoring.context import ToolContext, current_context
from agenthost._authoring.decorator import ToolOptions, tool
from agenthost._authoring.definition import ToolDefinition, ToolHints
from agenthost._calls.interceptors import (
    CachingInterceptor,
    Interceptor,
    LoggingInterceptor,
    RetryInterceptor,
)
from agenthost._calls.permissions import Permissions
from agenthost._calls.results import ToolError, ToolResult
from agenthost._calls.streaming import StreamEvent
from agenthost._common.frozen import thaw
from agenthost._common.masking import mask_secrets
from agenthost._directory.records import PluginEvent, PluginInfo, RegistryChange, ToolInfo
from agenthost._directory.version import LoadFailure
from agenthost._errors import (
    AgentHostError,
    ArgumentProblem,
    DefinitionProblem,
    InvalidArgumentsError,
    SandboxWarning,
    ToolConflictError,
    ToolDefinitionError,
    WheelError,
)
from agenthost._host import PluginHost
from agenthost._isolation.options import WorkerOptions, WorkerState
from agenthost._providers.compatibility import Finding, check_compatibility
from agenthost._providers.exporters import (
    FORMATS,
    export_tool,
    export_tools,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai,
    to_openai_responses,
)
from agenthost._version import __version__ as __version__

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
    "SandboxWarning",
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
