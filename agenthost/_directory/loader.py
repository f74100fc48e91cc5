"""Turning one entry of the plugin directory into a loaded plugin version, or a failure.

Everything a plugin does at import time is contained here: syntax errors,
import errors, exceptions, ``sys.exit()`` and other BaseExceptions become a
:class:`LoadFailure` with the file, line and a short traceback, and whatever
the plugin half-imported is removed from ``sys.modules`` again. So are the
later steps that run plugin code (reading its objects, ``__version__``, the
``on_load`` hook): loading one plugin never raises. What cannot be contained
in-process (an endless loop at import, a crash in C code, ``os._exit``) is
listed in the README under isolation levels.
"""

from __future__ import annotations

import re
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import importlib_metadata
from loguru import logger

from agenthost._authoring.decorator import tool_options
from agenthost._authoring.definition import ToolDefinition
from agenthost._common.install import pip_install
from agenthost._common.text import exception_text, printable, type_name
from agenthost._directory.namespace import Namespace
from agenthost._directory.scan import Source, TooLarge, read_source
from agenthost._directory.version import HOOK_TIMEOUT, LoadFailure, PluginVersion, run_hook
from agenthost._directory.wheel import (
    ENTRY_POINT_GROUP,
    Wheel,
    WheelError,
    open_wheel,
    plugin_name,
)
from agenthost._errors import DefinitionProblem, ToolDefinitionError
from agenthost._providers.compatibility import refused_names

__all__ = ["installed_entry_points", "load_installed", "load_source"]


def load_source(
    source: Source,
    cache_dir: Path,
    content: tuple[str, dict[Path, bytes]] | None = None,
    *,
    hooks: bool = True,
    hook_timeout: float = HOOK_TIMEOUT,
) -> PluginVersion | LoadFailure:
    """Import one plugin entry into a fresh namespace and define its tools; never raises.

    ``content`` is what :func:`read_source` returned, if the caller already read it;
    ``hooks=False`` skips ``on_load`` and ``on_unload`` (for ``agenthost check``).
    """
    try:
        return _load_source(source, cache_dir, content, hooks, hook_timeout)
    except BaseException as exc:  # noqa: BLE001 - whatever a plugin's objects do on the way
        logger.opt(exception=exc).error("loading {} failed unexpectedly", source.path)
        return LoadFailure(f"cannot load this plugin: {exception_text(exc)}", str(source.path))


def _load_source(
    source: Source,
    cache_dir: Path,
    content: tuple[str, dict[Path, bytes]] | None,
    hooks: bool,
    hook_timeout: float,
) -> PluginVersion | LoadFailure:
    started = time.perf_counter()
    try:
        content_hash, contents = content or read_source(source)
    except OSError as exc:
        return LoadFailure(f"cannot read {source.path}: {exc.strerror or exc}", str(source.path))
    except TooLarge as exc:
        return LoadFailure(str(exc), str(source.path))
    layout = _layout(source, contents, cache_dir)
    if isinstance(layout, LoadFailure):
        return layout
    name, tops, modules, snapshot, wheel = layout
    namespace = Namespace(name, tops, snapshot)
    try:
        imported = [namespace.import_module(module) for module in modules]
        targets = _targets(imported, wheel, namespace)
    except BaseException as exc:  # noqa: BLE001 - contain whatever the plugin raises
        # Described while the plugin's modules still work: their code may run in __str__.
        failure = _failure(exc, [str(p) for p in tops.values()], str(source.path))
        namespace.close()
        return failure
    definitions, errors = _define(targets)
    version, warnings = _module_version(imported[0]) if wheel is None else (wheel.version, [])
    warnings = _definition_warnings(definitions) + refused_names(definitions) + warnings
    if source.kind != "module":
        warnings += _unimported(snapshot, namespace, tops)
    warnings += _run_hooks(_hooks(imported, "on_load") if hooks else [], hook_timeout)
    return PluginVersion(
        name=name,
        source=source,
        version=version,
        content_hash=content_hash,
        definitions=tuple(definitions),
        definition_errors=tuple(errors),
        warnings=tuple(warnings),
        load_ms=(time.perf_counter() - started) * 1000,
        namespace=namespace,
        unload_hooks=tuple(_hooks(imported, "on_unload")) if hooks else (),
        hook_timeout=hook_timeout,
    )


class _Layout(NamedTuple):
    """What to import: the plugin's name, its top-level names and where they live, the
    modules to import first, the source files to import from, and the wheel if it is one."""

    name: str
    tops: dict[str, Path]
    modules: list[str]
    files: dict[Path, bytes]
    wheel: Wheel | None


def _layout(source: Source, contents: dict[Path, bytes], cache_dir: Path) -> _Layout | LoadFailure:
    if source.kind != "wheel":
        name = source.path.stem if source.kind == "module" else source.path.name
        return _Layout(name, {name: source.path}, [name], contents, None)
    try:
        wheel = open_wheel(contents[source.path], cache_dir)
    except (WheelError, OSError) as exc:
        return LoadFailure(f"unusable wheel: {exc}", str(source.path))
    if wheel.missing:
        return LoadFailure(
            "missing dependencies: " + ", ".join(wheel.missing)
            + "; install them into the host's environment: "
            + pip_install([m.partition(" (installed: ")[0] for m in wheel.missing]),
            str(source.path),
        )  # fmt: skip
    return _Layout(wheel.name, wheel.tops, wheel.modules, wheel.sources, wheel)


def load_installed(
    entry_point: importlib_metadata.EntryPoint, hook_timeout: float = HOOK_TIMEOUT
) -> tuple[Source, PluginVersion | LoadFailure]:
    """A plugin from an installed distribution's entry point (imported normally, not isolated)."""
    source = Source(f"entry-point:{entry_point.name}", Path(entry_point.value), "installed")
    try:
        return source, _load_installed(entry_point, source, hook_timeout)
    except BaseException as exc:  # noqa: BLE001 - whatever a plugin's objects do on the way
        return source, LoadFailure(
            f"cannot load this plugin: {exception_text(exc)}", str(source.path)
        )


def _load_installed(
    entry_point: importlib_metadata.EntryPoint, source: Source, hook_timeout: float
) -> PluginVersion | LoadFailure:
    started = time.perf_counter()
    dist = entry_point.dist
    try:
        target = entry_point.load()
    except BaseException as exc:  # noqa: BLE001 - contain whatever the plugin raises
        return _failure(exc, [], entry_point.value)
    modules = [target] if isinstance(target, types.ModuleType) else []
    definitions, errors = _define(_expand(target, entry_point.value))
    warnings = _definition_warnings(definitions) + refused_names(definitions)
    warnings += _run_hooks(_hooks(modules, "on_load"), hook_timeout)
    return PluginVersion(
        name=plugin_name(entry_point.name),
        source=source,
        version=dist.version if dist else None,
        content_hash="",
        definitions=tuple(definitions),
        definition_errors=tuple(errors),
        warnings=tuple(warnings),
        load_ms=(time.perf_counter() - started) * 1000,
        unload_hooks=tuple(_hooks(modules, "on_unload")),
        hook_timeout=hook_timeout,
    )


def _hooks(modules: Iterable[types.ModuleType], name: str) -> list[Callable[[], Any]]:
    return [hook for module in modules if callable(hook := module.__dict__.get(name))]


def _definition_warnings(definitions: Iterable[ToolDefinition]) -> list[str]:
    """What the definitions noted (a docstring naming a missing parameter, ...)."""
    return [f"tool '{d.name}' at {d.location}: {w}" for d in definitions for w in d.warnings]


def _run_hooks(hooks: Iterable[Any], timeout: float) -> list[str]:
    """Run ``on_load`` hooks; their errors become warnings, never failures."""
    return [
        f"on_load: {error}"
        for hook in hooks
        if callable(hook) and (error := run_hook(hook, timeout))
    ]


_TOOL_DECORATOR = re.compile(rb"^[ \t]*@(?:agenthost\.)?tool\b", re.MULTILINE)


def _unimported(
    snapshot: dict[Path, bytes], namespace: Namespace, tops: dict[str, Path]
) -> list[str]:
    """Modules of a package with ``@tool`` functions that its import never loaded."""
    loaded: set[Path] = set()
    for name in namespace.module_names():
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            loaded.add(Path(file))
    warnings = []
    for path, data in sorted(snapshot.items()):
        if path.suffix != ".py" or path in loaded or not _TOOL_DECORATOR.search(data):
            continue
        top = next((t for t in tops.values() if path.is_relative_to(t)), None)
        shown = path.relative_to(top.parent) if top is not None else path
        parent = shown.parent.as_posix()
        warnings.append(
            f"{shown.as_posix()} has @tool functions, but nothing imports it, so they are not "
            f"loaded; import it from {parent}/__init__.py (`from . import {path.stem}`)"
        )
    return warnings


def installed_entry_points() -> list[importlib_metadata.EntryPoint]:
    """The ``agenthost.plugins`` entry points of installed distributions, by name."""
    return sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def _targets(
    imported: list[types.ModuleType], wheel: Wheel | None, namespace: Namespace
) -> list[Any]:
    """The tool functions to define: from entry points if the wheel names objects, else modules."""
    if wheel is None or not any(attr for _, attr in wheel.entry_points):
        # Every module the import loaded, not only the top one: tools in `geo/extra.py`
        # that `geo/__init__.py` imports count, whether or not it re-exports them.
        tops = {module.__name__ for module in imported}
        names = sorted(set(namespace.module_names()) - tops)
        loaded = [module for module in map(sys.modules.get, names) if module is not None]
        return [
            obj
            for module in [*imported, *loaded]
            if isinstance(module, types.ModuleType)
            for obj in _expand(module, module.__name__)
        ]
    found: list[Any] = []
    for module_name, attr in wheel.entry_points:
        obj: Any = namespace.import_module(module_name)
        for part in (attr or "").split(".") if attr else ():
            obj = getattr(obj, part)
        found += _expand(obj, f"{module_name}:{attr}" if attr else module_name)
    return found


def _expand(target: Any, where: str) -> list[Any]:
    """Tools inside an entry point target: a module, one tool, or a list of tools."""
    if isinstance(target, types.ModuleType):
        return [v for v in vars(target).values() if tool_options(v) is not None]
    if isinstance(target, list | tuple):
        return [v for v in target if tool_options(v) is not None]
    if tool_options(target) is not None or callable(target):
        return [target]
    raise TypeError(f"entry point {where} names neither a module, a tool nor a list of tools")


def _define(targets: Iterable[Any]) -> tuple[list[ToolDefinition], list[ToolDefinitionError]]:
    definitions: dict[str, ToolDefinition] = {}
    errors: list[ToolDefinitionError] = []
    for target in {id(t): t for t in targets}.values():
        try:
            definition = ToolDefinition.from_function(target)
        except ToolDefinitionError as exc:
            errors.append(exc)
            continue
        except BaseException as exc:  # noqa: BLE001 - a plugin object that fails when read
            shown = printable(target)[:60]
            message = f"reading {type_name(target)} object {shown!r} raised {exception_text(exc)}"
            errors.append(
                ToolDefinitionError(function=shown, problems=[DefinitionProblem(message)])
            )
            continue
        first = definitions.get(definition.name)
        if first is not None:
            message = (
                f"tool name '{definition.name}' is defined twice: at {first.location} and here; "
                "rename one with @tool(name=...)"
            )
            errors.append(
                ToolDefinitionError(
                    function=getattr(definition.function, "__qualname__", definition.name),
                    tool=definition.name,
                    file=definition.file,
                    line=definition.line,
                    problems=[DefinitionProblem(message)],
                )
            )
            continue
        definitions[definition.name] = definition
    return list(definitions.values()), errors


def _module_version(module: types.ModuleType) -> tuple[str | None, list[str]]:
    """The module's ``__version__`` as text, and a warning if it cannot be read."""
    value = module.__dict__.get("__version__")
    if value is None:
        return None, []
    try:
        return str(value), []
    except BaseException as exc:  # noqa: BLE001 - plugin code in __str__
        return None, [f"__version__ cannot be read as text ({exception_text(exc)}); no version"]


def _failure(exc: BaseException, roots: list[str], where: str) -> LoadFailure:
    """A failure pointing at the plugin's own frames, not at agenthost or importlib."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if (frame.filename.startswith(tuple(roots)) if roots else "importlib" not in frame.filename)
    ]
    file: str | None = where
    line: int | None = None
    if isinstance(exc, SyntaxError) and exc.filename:
        file, line = exc.filename, exc.lineno
    elif frames:
        file, line = frames[-1].filename, frames[-1].lineno
    message = exception_text(exc)
    if isinstance(exc, SyntaxError):
        message = f"SyntaxError: {exc.msg}"
    try:
        tail = "".join(traceback.format_exception_only(type(exc), exc))
    except BaseException:  # noqa: BLE001 - a __str__ that raises what traceback does not catch
        tail = message
    short = "".join(traceback.format_list(frames[-5:])) + tail
    del exc  # the traceback holds the plugin's frames; do not keep them alive
    return LoadFailure(message, file, line, short.rstrip())
