"""Loading a plugin version into a worker process: the host's definitions are proxies.

The host keeps the worker's tool definitions in its registry like any other:
validation (against the published schema), permissions, interceptors and
timeouts all happen in the host, and each tool's function is a proxy that sends
the validated arguments to the worker and waits for its answer.
"""

from __future__ import annotations

import functools
import inspect
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from loguru import logger
from pydantic import Field

from agenthost._authoring import jsonschemas
from agenthost._authoring.definition import NAME_PATTERN, NAME_RULE, ToolDefinition, check_schema
from agenthost._common.frozen import freeze, thaw
from agenthost._directory.scan import Files, Source
from agenthost._directory.version import LoadFailure, PluginVersion
from agenthost._directory.wheel import WheelError, wheel_plugin_name
from agenthost._errors import DefinitionProblem, SandboxWarning, ToolDefinitionError
from agenthost._isolation import syscalls
from agenthost._isolation.options import Sandbox, WorkerOptions
from agenthost._isolation.processes import Launch
from agenthost._isolation.protocol import DefinitionError, Hello, Loaded, ToolDescription
from agenthost._isolation.sandbox import Layout, Probe, lost_guarantees, probe
from agenthost._isolation.supervisor import Supervisor

__all__ = ["load_isolated"]


def load_isolated(
    source: Source,
    content: tuple[str, Mapping[Path, bytes]],
    *,
    cache_dir: Path,
    hook_timeout: float,
    options: WorkerOptions,
    sandbox: Sandbox,
    max_output: int,
    on_change: Callable[[], None] | None = None,
) -> PluginVersion | LoadFailure:
    """Load ``source`` (``content``: the hash and files the host read) in a new worker
    process; the version's tools are proxies to it. ``on_change`` is told when the
    worker is quarantined or fails, to publish the plugin's status."""
    started = time.perf_counter()
    where = str(source.path)
    if escaped := _outside(source, content[1]):
        return LoadFailure(escaped, where, isolation="process")
    try:
        expected = _plugin_name(source, content[1])
    except WheelError as exc:
        return LoadFailure(f"unusable wheel: {exc}", where, isolation="process")
    launch = _launch(source, options, sandbox, expected)
    if isinstance(launch, str):
        return LoadFailure(launch, where, isolation="process")
    config = _config(source, cache_dir, hook_timeout, options, launch, max_output)
    worker, said = _start(source, content[1], options, launch, expected, config, on_change)
    if isinstance(said, str) or said.loaded is None:
        worker.stop()
        return _failure(said, where)
    loaded = said.loaded
    definitions, errors = _definitions(worker, loaded)
    return PluginVersion(
        name=loaded.name,
        source=source,
        version=loaded.version,
        content_hash=content[0],
        definitions=tuple(definitions),
        definition_errors=tuple(errors),
        warnings=tuple(loaded.warnings),
        load_ms=(time.perf_counter() - started) * 1000,
        unload_hooks=(worker.stop,),
        isolation="process",
        worker=worker.status,
    )


def _config(
    source: Source,
    cache_dir: Path,
    hook_timeout: float,
    options: WorkerOptions,
    launch: Launch,
    max_output: int,
) -> dict[str, Any]:
    """What a worker is told about its plugin and its limits, its first message."""
    return {
        "key": source.key, "path": str(source.path), "kind": source.kind,
        "cache_dir": str(cache_dir), "hook_timeout": hook_timeout,
        "concurrency": options.concurrency, "env": dict(launch.env),
        "max_result": min(max_output, options.max_output - 65536),
        "max_message": options.max_output, "memory_mb": options.memory_mb,
        "limits": options.limits(processes=launch.layout is not None),
    }  # fmt: skip


def _start(
    source: Source,
    files: Mapping[Path, bytes],
    options: WorkerOptions,
    launch: Launch,
    expected: str,
    config: dict[str, Any],
    on_change: Callable[[], None] | None,
) -> tuple[Supervisor, Hello | str]:
    """A worker and its hello; one allowed the network that none of its tools declares
    needing is started again without it."""
    worker = Supervisor(source, options, launch, files=files, expected=expected, config=config,
                        on_change=on_change)  # fmt: skip
    said = worker.start()
    if launch.layout is None or not launch.layout.network or _declares_network(said):
        return worker, said
    worker.stop()
    logger.warning(_NO_NETWORK_NEEDED, expected)
    launch = replace(launch, layout=replace(launch.layout, network=False))
    return _start(source, files, options, launch, expected, config, on_change)


def _declares_network(said: Hello | str) -> bool:
    """Whether one of the plugin's tools declares a permission to use the network."""
    if isinstance(said, str) or said.loaded is None:
        return True  # nothing to judge by: the failure is reported as it is
    permissions = (p for tool in said.loaded.tools for p in tool.options.permissions)
    return any(p.startswith(_NETWORK) or p == "*" for p in permissions)


_NETWORK = ("http.", "https.", "network.", "net.", "socket.")
_PLUGIN_PATTERNS = 1000
_NO_NETWORK_NEEDED = (
    "plugin {} may use the network, but none of its tools declares a network permission "
    "(http.*, network.*); it runs without"
)


def _failure(said: Hello | str, where: str) -> LoadFailure:
    """Why the worker did not load the plugin: its own report, or what the host saw."""
    failed = said.failed if not isinstance(said, str) else None
    if failed is None:
        return LoadFailure(str(said), where, isolation="process")
    file = failed.file or where
    return LoadFailure(failed.message, file, failed.line, failed.traceback, isolation="process")


def _outside(source: Source, files: Mapping[Path, bytes]) -> str | None:
    """Why the worker may not have these files: one is a link to a file outside the
    plugin directory, which the host (reading as itself) would hand to the worker."""
    if not isinstance(files, Files):
        return None
    outside = files.outside(source.path.parent)
    if not outside:
        return None
    path, real = min(outside.items())
    return (
        f"{path} is a link to {real}, outside the plugin directory; a plugin in a worker "
        "gets only files inside the plugin directory: copy the file in instead of linking it"
    )


def _plugin_name(source: Source, files: Mapping[Path, bytes]) -> str:
    """The name the worker must give: the entry's own, or the wheel's metadata's."""
    if source.kind == "wheel":
        return wheel_plugin_name(files[source.path])
    return source.path.stem if source.kind == "module" else source.path.name


def _launch(source: Source, options: WorkerOptions, sandbox: Sandbox, name: str) -> Launch | str:
    """How to start this plugin's workers, or why it may not start."""
    env = tuple((k, os.environ[k]) for k in options.env if k in os.environ)
    memory = options.memory_mb * 2**20 if options.memory_mb else None
    plain = Launch(env, memory=memory, pids=options.processes)
    if sandbox == "off":
        return plain
    found = probe(options.bwrap)
    if not found.available:
        if sandbox == "required":
            return f"the sandbox is required, and {found.reason}"
        _warn_once(found)
        return plain
    if (unfiltered := syscalls.unavailable()) is not None:
        if sandbox == "required":
            return f"the sandbox is required, and {unfiltered}"
        _warn_unfiltered(unfiltered)
    layout = Layout(source.path.parent, None, name in options.network, options.tmp_mb)
    uids = options.user_ids if found.root else None
    return Launch(env, layout, found.bwrap, uids, memory, options.processes)


@functools.lru_cache(maxsize=1)
def _warn_once(found: Probe) -> None:
    warnings.warn(lost_guarantees(found), SandboxWarning, stacklevel=2)


@functools.lru_cache(maxsize=1)
def _warn_unfiltered(why: str) -> None:
    warnings.warn(
        f"workers run in the sandbox without a system call filter: {why}. They can still "
        "create namespaces of their own (and mount a /tmp past their limit) and reach "
        "io_uring, userfaultfd, BPF and keyrings. Install libseccomp (Debian and Ubuntu: "
        "apt-get install libseccomp2), or pass sandbox='required' to refuse instead.",
        SandboxWarning,
        stacklevel=2,
    )


def _definitions(
    worker: Supervisor, loaded: Loaded
) -> tuple[list[ToolDefinition], list[ToolDefinitionError]]:
    """The host's definitions of the worker's tools, each checked as the loader checks one;
    a tool that fails is a definition error, as a bad tool in-process is."""
    definitions: dict[str, ToolDefinition] = {}
    errors: list[ToolDefinitionError] = [_error(e) for e in loaded.errors]
    patterns = _PLUGIN_PATTERNS  # each is compiled in the host: a budget for the plugin
    for described in loaded.tools:
        try:
            if described.name in definitions:
                raise _refused(described, "its name is defined twice")
            schemas = (described.input_schema, described.output_schema or {})
            patterns -= sum(len(jsonschemas.patterns(schema)) for schema in schemas)
            if patterns < 0:
                raise _refused(
                    described, f"the plugin's tools hold over {_PLUGIN_PATTERNS} patterns"
                )
            definitions[described.name] = _proxy(worker, described)
        except ToolDefinitionError as exc:  # where the worker says the tool is, not here
            errors.append(_refused(described, *(p.message for p in exc.problems)))
        except Exception as exc:  # noqa: BLE001 - a forged description: refuse that tool
            errors.append(
                _refused(described, f"the host cannot use its description ({exc!r:.200})")
            )
    return list(definitions.values()), errors


def _proxy(worker: Supervisor, described: ToolDescription) -> ToolDefinition:
    """The host's definition of a worker's tool: same schema, a function that forwards.

    Where the published schema is made of simple types, the proxy gets the
    annotations that produce exactly that schema, so the host validates with the
    same compiled validator (and the same messages) as for an in-process tool;
    otherwise the schema itself is the validator (``jsonschema``).
    """
    name, streams = described.name, described.kind in ("generator", "async_generator")
    if not NAME_PATTERN.fullmatch(name):
        raise _refused(described, f"tool name {name!r} is invalid: use {NAME_RULE}")

    async def proxy(**arguments: Any) -> Any:
        return await worker.call(name, arguments, streams=streams)

    options = {"name": name, "description": described.description,
               **described.options.model_dump()}  # fmt: skip
    definition = _typed(proxy, described.input_schema, options)
    if definition is None:
        definition = ToolDefinition.from_schema(
            name, described.input_schema, function=proxy, **{
                k: v for k, v in options.items() if k != "name"
            }
        )  # fmt: skip
    output = described.output_schema
    problems: list[DefinitionProblem] = []
    if output is not None and not check_schema(output, "output_schema", problems):
        raise _refused(described, problems[0].message)
    for what, schema in (("input_schema", described.input_schema), ("output_schema", output)):
        if schema is not None and (why := jsonschemas.untrusted_problem(schema)) is not None:
            raise _refused(described, f"{what}: {why}")
    return replace(
        definition,
        output_schema=freeze(output) if output is not None else None,
        file=described.file,
        line=described.line,
        warnings=tuple(described.warnings),
    )


def _refused(described: ToolDescription, *why: str) -> ToolDefinitionError:
    problems = [DefinitionProblem(text) for text in why]
    return ToolDefinitionError(function=described.name, tool=described.name, file=described.file,
                               line=described.line, problems=problems)  # fmt: skip


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


def _error(described: DefinitionError) -> ToolDefinitionError:
    problems = [DefinitionProblem(p.message, p.parameter, p.line) for p in described.problems]
    return ToolDefinitionError(
        function=described.function or "?",
        tool=described.tool,
        file=described.file,
        line=described.line,
        problems=problems,
    )
