"""Isolated module namespaces: each loaded plugin version lives under its own package.

A plugin's modules are imported as ``__agenthost_plugins__.<plugin>_<n>.<module>``,
never under their bare names, so two plugins that both ship ``utils`` get their
own, a plugin's ``json.py`` shadows nothing for anyone else, and two versions of
one plugin coexist while the old one drains.

Two pieces make the plugin's own absolute imports (``import mypkg.core``) work:

* a meta-path finder that resolves names under a version's prefix to the
  plugin's files, compiling from source (never from ``__pycache__``, whose
  mtime check can miss an edit made within the same second), and
* a per-version ``__builtins__`` whose ``__import__`` maps the plugin's
  top-level names into its prefix. Every module of the version gets it, so the
  mapping follows the code wherever it imports from.

This isolates names, not faults: plugin code runs in the host process with the
host's privileges (see the README on isolation levels).
"""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import re
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "Namespace"]

ROOT = "__agenthost_plugins__"
_counter = itertools.count(1)
_original_import = builtins.__import__


class Namespace:
    """The module space of one plugin version."""

    def __init__(
        self, plugin: str, tops: Mapping[str, Path], sources: Mapping[Path, bytes] | None = None
    ) -> None:
        ident = re.sub(r"\W", "_", plugin) or "plugin"
        self.prefix = f"{ROOT}.{ident}_{next(_counter)}"
        self.tops = dict(tops)  # top-level name -> module file or package directory
        # The source of every module as it was when this version loaded: a lazy import
        # during a call runs this version's code even if the file changed since.
        self.sources = dict(sources or {})
        self.builtins: dict[str, Any] = {**builtins.__dict__, "__import__": self._import}
        _FINDER.add(self)

    def has(self, path: Path) -> bool:
        """Whether ``path`` belongs to this version (its snapshot, else the disk)."""
        return path in self.sources or path.exists()

    def import_module(self, name: str) -> types.ModuleType:
        """Import the plugin's module ``name`` (its own top-level or dotted name)."""
        return importlib.import_module(f"{self.prefix}.{name}")

    def module_names(self) -> list[str]:
        """Every module of this version now in ``sys.modules``."""
        start = self.prefix + "."
        return [n for n in list(sys.modules) if n == self.prefix or n.startswith(start)]

    def close(self) -> None:
        """Forget every module of this version (after its last call ended)."""
        for name in self.module_names():
            sys.modules.pop(name, None)
        _FINDER.remove(self)
        self.builtins.clear()  # breaks the cycle namespace -> builtins -> bound hook
        self.sources.clear()

    def _import(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        if level == 0:
            top = name.partition(".")[0]
            if top in self.tops:
                module = _original_import(f"{self.prefix}.{name}", globals, locals, fromlist, 0)
                return module if fromlist else sys.modules[f"{self.prefix}.{top}"]
        return _original_import(name, globals, locals, fromlist, level)


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Executes a plugin module from source with its version's ``__builtins__``."""

    def __init__(self, fullname: str, path: str, namespace: Namespace) -> None:
        super().__init__(fullname, path)
        self._namespace = namespace

    def get_data(self, path: str) -> bytes:
        snapshot = self._namespace.sources.get(Path(path))
        return snapshot if snapshot is not None else super().get_data(path)

    def get_code(self, fullname: str) -> types.CodeType:
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__builtins__"] = self._namespace.builtins
        super().exec_module(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Resolves module names under a version prefix to that version's files."""

    def __init__(self) -> None:
        self._spaces: dict[str, Namespace] = {}
        self._lock = threading.Lock()

    def add(self, namespace: Namespace) -> None:
        with self._lock:
            if not any(finder is self for finder in sys.meta_path):
                sys.meta_path.insert(0, self)
            if ROOT not in sys.modules:
                sys.modules[ROOT] = _package(ROOT)
            self._spaces[namespace.prefix] = namespace
            sys.modules[namespace.prefix] = _package(namespace.prefix)

    def remove(self, namespace: Namespace) -> None:
        with self._lock:
            self._spaces.pop(namespace.prefix, None)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(ROOT + "."):
            return None
        parts = fullname.split(".")
        namespace = self._spaces.get(".".join(parts[:2]))
        if namespace is None or len(parts) < 3:
            return None
        if len(parts) == 3:
            location = namespace.tops.get(parts[2])
            return None if location is None else _spec(fullname, location, namespace)
        parent = sys.modules.get(fullname.rpartition(".")[0])
        for directory in getattr(parent, "__path__", ()):
            base = Path(directory) / parts[-1]
            # Python's own order: a package, then a module, then a namespace directory.
            module = base.with_name(base.name + ".py")
            for candidate in (base / "__init__.py", module, base):
                if namespace.has(candidate):
                    return _spec(fullname, base if candidate != module else module, namespace)
        return None


def _package(name: str) -> types.ModuleType:
    module = types.ModuleType(name, "agenthost plugin namespace")
    module.__path__ = []
    return module


def _spec(fullname: str, location: Path, namespace: Namespace) -> importlib.machinery.ModuleSpec:
    if location.suffix != ".py":
        init = location / "__init__.py"
        if not namespace.has(init):  # a namespace package inside the plugin
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [str(location)]
            return spec
        loader = _SourceLoader(fullname, str(init), namespace)
        found = importlib.util.spec_from_file_location(
            fullname, init, loader=loader, submodule_search_locations=[str(location)]
        )
    else:
        loader = _SourceLoader(fullname, str(location), namespace)
        found = importlib.util.spec_from_file_location(fullname, location, loader=loader)
    assert found is not None
    return found


_FINDER = _Finder()
