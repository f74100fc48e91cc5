"""Loading a plugin version into a worker process: the host's definitions are proxies.

The host keeps the worker's tool definitions in its registry like any other:
validation (against the published schema), permissions, interceptors and
timeouts all happen in the host, and each tool's function is a proxy that sends
the validated arguments to the worker and waits for its answer.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Field

from agenthost._authoring.definition import ToolDefinition
from agenthost._common.frozen import freeze, thaw
from agenthost._directory.scan import Source
from agenthost._directory.version import LoadFailure, PluginVersion
from agenthost._errors import DefinitionProblem, ToolDefinitionError
from agenthost._isolation.options import WorkerOptions
from agenthost._isolation.supervisor import Supervisor

__all__ = ["load_isolated"]


def load_isolated(
    source: Source,
    cache_dir: Path,
    content_hash: str,
    *,
    hook_timeout: float,
    options: WorkerOptions,
    on_quarantine: Callable[[], None] | None = None,
) -> PluginVersion | LoadFailure:
    """Load ``source`` in a new worker process; the version's tools are proxies to it.
    ``on_quarantine`` is told when the worker is quarantined (to publish the status)."""
    started = time.perf_counter()
    worker = Supervisor(source, cache_dir, hook_timeout, options, on_quarantine)
    hello = worker.start()
    failed = hello.get("failed")
    if failed is not None or "loaded" not in hello:
        worker.stop()
        failed = failed or {"message": f"the worker {worker.status.last_exit or 'ended'}"}
        return LoadFailure(
            failed.get("message") or "the worker failed to load the plugin",
            failed.get("file") or str(source.path),
            failed.get("line"),
            failed.get("traceback") or "",
        )
    loaded = hello["loaded"]
    definitions, errors = [], []
    for described in loaded["tools"]:
        try:
            definitions.append(_proxy(worker, described))
        except ToolDefinitionError as exc:
            errors.append(exc)
    errors += [_error(e) for e in loaded["errors"]]
    return PluginVersion(
        name=loaded["name"],
        source=source,
        version=loaded["version"],
        content_hash=content_hash,
        definitions=tuple(definitions),
        definition_errors=tuple(errors),
        warnings=tuple(loaded["warnings"]),
        load_ms=(time.perf_counter() - started) * 1000,
        unload_hooks=(worker.stop,),
        isolation="process",
        worker=worker.status,
    )


def _proxy(worker: Supervisor, described: dict[str, Any]) -> ToolDefinition:
    """The host's definition of a worker's tool: same schema, a function that forwards.

    Where the published schema is made of simple types, the proxy gets the
    annotations that produce exactly that schema, so the host validates with the
    same compiled validator (and the same messages) as for an in-process tool;
    otherwise the schema itself is the validator (``jsonschema``).
    """
    name = described["name"]

    async def proxy(**arguments: Any) -> Any:
        return await worker.call(name, arguments)

    options = {"name": name, "description": described["description"], **described["options"]}
    definition = _typed(proxy, described["input_schema"], options)
    if definition is None:
        definition = ToolDefinition.from_schema(
            name, described["input_schema"], function=proxy, **{
                k: v for k, v in options.items() if k != "name"
            }
        )  # fmt: skip
    output = described["output_schema"]
    return replace(
        definition,
        output_schema=freeze(output) if output is not None else None,
        file=described["file"],
        line=described["line"],
        warnings=tuple(described["warnings"]),
    )


def _typed(
    proxy: Callable[..., Any], schema: Mapping[str, Any], options: dict[str, Any]
) -> ToolDefinition | None:
    if set(schema) - {"type", "properties", "required", "additionalProperties"}:
        return None
    required = set(schema.get("required") or ())
    parameters, annotations = [], {}
    for name, prop in (schema.get("properties") or {}).items():
        annotation = _annotation(prop)
        if annotation is None or not name.isidentifier():
            return None
        if isinstance(prop.get("description"), str):
            annotation = Annotated[annotation, Field(description=prop["description"])]
        if name not in required and "default" not in prop:
            return None
        default = inspect.Parameter.empty if name in required else prop["default"]
        kind = inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(name, kind, default=default))
        annotations[name] = annotation
    forward = _forwarding(proxy)
    forward.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    forward.__annotations__ = annotations
    try:
        definition = ToolDefinition.from_function(forward, **options)
    except ToolDefinitionError:
        return None
    return definition if thaw(definition.input_schema) == thaw(schema) else None


def _forwarding(proxy: Callable[..., Any]) -> Callable[..., Any]:
    async def forward(**arguments: Any) -> Any:
        return await proxy(**arguments)

    return forward


def _annotation(prop: Mapping[str, Any]) -> Any:
    """The Python type whose schema is ``prop`` (descriptions and defaults aside), if simple."""
    extra = set(prop) - {"type", "description", "default", "enum", "items", "anyOf"}
    if extra:
        return None
    variants = prop.get("anyOf")
    if variants is not None:
        others = [v for v in variants if v != {"type": "null"}]
        if len(others) != 1 or len(variants) != 2:
            return None
        inner = _annotation(others[0])
        return None if inner is None else Optional[inner]  # noqa: UP045 - built at run time
    kind = prop.get("type")
    if "enum" in prop:
        values = prop["enum"]
        if kind != "string" or not values or not all(isinstance(v, str) for v in values):
            return None
        return Literal[tuple(values)]
    if kind == "array":
        items = prop.get("items")
        inner = _annotation(items) if isinstance(items, Mapping) else None
        return None if inner is None else list[inner]  # type: ignore[valid-type]
    return _SIMPLE.get(kind) if isinstance(kind, str) else None


_SIMPLE: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}


def _error(described: dict[str, Any]) -> ToolDefinitionError:
    problems = [
        DefinitionProblem(p["message"], p.get("parameter"), p.get("line"))
        for p in described.get("problems", [])
    ]
    return ToolDefinitionError(
        function=described.get("function") or "?",
        tool=described.get("tool"),
        file=described.get("file"),
        line=described.get("line"),
        problems=problems,
    )
