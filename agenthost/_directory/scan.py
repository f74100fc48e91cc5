"""What the plugin directory holds: which entries are plugins, which are litter, what changed.

Both the watcher (which events matter, whether a key is quiet on disk) and the
host (what to load) read the directory through these rules, and neither has
to import plugin code to do so. Loading a :class:`Source` is ``_loader``'s job.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agenthost._directory.wheel import plugin_name

__all__ = [
    "MAX_PLUGIN_BYTES",
    "Files",
    "Kind",
    "Source",
    "TooLarge",
    "changing",
    "defines",
    "is_ignored",
    "last_change",
    "lookalikes",
    "not_loaded",
    "plugin_sources",
    "read_source",
    "source_at",
]

Kind = Literal["module", "package", "wheel", "installed"]

# Editor temp and backup files, VCS and OS litter: never plugins, never a reason to reload.
_IGNORED_SUFFIXES = (
    "~", ".swp", ".swo", ".swx", ".tmp", ".temp", ".bak", ".orig", ".rej", ".part",
    ".crdownload", ".pyc", "___jb_tmp___", "___jb_old___", ".kate-swp",
)  # fmt: skip
_IGNORED_NAMES = frozenset({"__pycache__", "4913", "Thumbs.db", "node_modules"})


def is_ignored(name: str) -> bool:
    """Whether a file or folder name is editor or tool litter rather than plugin content."""
    return (
        name.startswith((".", "#", "~"))
        or name.endswith(_IGNORED_SUFFIXES)
        or name in _IGNORED_NAMES
        or name.endswith(".egg-info")
    )


@dataclass(frozen=True, slots=True)
class Source:
    """One plugin entry of the directory: a module file, a package folder or a wheel."""

    key: str
    path: Path
    kind: Kind

    @property
    def name(self) -> str:
        """The plugin's name as its path tells it (a wheel's metadata has the last word)."""
        if self.kind == "module":
            return self.path.stem
        if self.kind == "wheel":
            return plugin_name(self.path.name.split("-", 1)[0])
        return self.path.name


def source_at(directory: Path, key: str) -> Source | None:
    """What the directory entry ``key`` is right now, if it is a plugin."""
    if is_ignored(key) or key == "__init__.py":  # a plugin directory is not a package
        return None
    path = directory / key
    if key.endswith(".py") and path.is_file() and key[:-3].isidentifier():
        return Source(key, path, "module")
    if key.endswith(".whl") and path.is_file():
        return Source(key, path, "wheel")
    if path.is_dir() and (path / "__init__.py").is_file() and key.isidentifier():
        return Source(key, path, "package")
    return None


def not_loaded(directory: Path, key: str) -> str | None:
    """Why an entry that looks like a plugin is not one, with the fix; None if it is not close.

    ``my-tools.py`` or a folder of modules without ``__init__.py`` would otherwise be
    skipped without a word while its author waits for tools that never come.
    """
    if is_ignored(key):
        return None
    path = directory / key
    if key == "__init__.py" and path.is_file():
        return (
            "__init__.py is not loaded: a plugin directory is not a package, each module, "
            "package folder and wheel in it is a plugin; delete it"
        )
    if key.endswith(".py") and path.is_file() and not key[:-3].isidentifier():
        fixed = _identifier(key[:-3])
        return f"{key} is not loaded: its name is not a Python module name; rename it {fixed}.py"
    if path.is_dir() and any(child.suffix == ".py" for child in _children(path)):
        if not (path / "__init__.py").is_file():
            return (
                f"{key}/ is not loaded: a package folder needs an __init__.py; create "
                f"{key}/__init__.py (it may be empty, or import the modules with tools)"
            )
        if not key.isidentifier():
            return (
                f"{key}/ is not loaded: its name is not a Python package name; rename it "
                f"{_identifier(key)}/"
            )
    return None


def _identifier(name: str) -> str:
    fixed = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return f"_{fixed}" if not fixed or fixed[0].isdigit() else fixed


def _children(path: Path) -> list[Path]:
    try:
        return list(path.iterdir())
    except OSError:
        return []


def defines(path: str, name: str, *, limit: int = 2_000_000) -> bool:
    """Whether the plugin source at ``path`` appears to define a tool ``name``.

    Read only to explain an unknown tool (a plugin that failed to load cannot be
    asked), so a plain text search of its modules, ``limit`` bytes at most, will do.
    """
    if not name.isidentifier():
        return False
    pattern = re.compile(rf"\bdef {name}\s*\(|name\s*=\s*['\"]{name}['\"]".encode())
    root = Path(path)
    files: Iterable[Path] = []
    if root.suffix == ".py":
        files = [root]
    elif root.is_dir():  # the same bounded walk as loading: links out and loops are not taken
        files = (file for file in _package_files(root) if file.suffix == ".py")
    budget = limit
    for file in itertools.islice(files, 500):
        try:
            data, _, _ = _read(file, budget)
        except OSError:
            continue  # gone, or not a regular file (a FIFO would block, /dev/zero never ends)
        if data is None:
            break
        if pattern.search(data):
            return True
        budget -= len(data)
    return False


def plugin_sources(directory: Path) -> dict[str, Source]:
    """Every plugin in ``directory``, by key, in name order."""
    try:
        names = sorted(entry.name for entry in directory.iterdir())
    except OSError:
        return {}
    found = (source_at(directory, name) for name in names)
    return {source.key: source for source in found if source is not None}


def _package_files(path: Path) -> Iterator[Path]:
    """The package's files in name order. A linked folder is entered only when it lies
    inside the package and was not walked already: a link to ``/`` or to a folder
    above it would walk the whole disk or forever."""
    root = path.resolve()
    return _walk(path, root, {root})


def _walk(path: Path, root: Path, seen: set[Path]) -> Iterator[Path]:
    for child in sorted(path.iterdir()):
        if is_ignored(child.name):
            continue
        if child.is_dir():
            real = child.resolve()
            if real in seen or not real.is_relative_to(root):
                continue
            seen.add(real)
            yield from _walk(child, root, seen)
        elif child.is_file():
            yield child


def last_change(source: Source) -> float:
    """When the source last changed on disk: the newest mtime or ctime of its files and folders.

    ctime counts too because copies (``cp -p``, ``shutil.copy2``) keep old mtimes.
    """
    paths = [source.path]
    if source.kind == "package":
        paths += [p for p in source.path.rglob("*") if not any(map(is_ignored, p.parts))]
    newest = 0.0
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            continue
        newest = max(newest, info.st_mtime, info.st_ctime)
    return newest


class Files(dict[Path, bytes]):
    """A source's files as the host read them, by path, and where each really was:
    ``real`` maps a file reached through a link to the file it reached, ``shared`` a
    file with other hard links to the uid that owns it."""

    def __init__(self) -> None:
        super().__init__()
        self.real: dict[Path, str] = {}
        self.shared: dict[Path, int] = {}

    def outside(self, directory: Path) -> dict[Path, str]:
        """The files whose real place is not inside ``directory``: reached through a
        link, or hard links to a file of another user than the directory's owner."""
        root = directory.resolve()
        real = self.real.items()
        out = {path: where for path, where in real if not Path(where).is_relative_to(root)}
        try:
            owner: int | None = root.stat().st_uid
        except OSError:
            owner = None  # gone: nothing shared is anyone's
        for path, uid in self.shared.items():
            if uid != owner:
                out.setdefault(path, f"a file of uid {uid} (a hard link)")
        return out


MAX_PLUGIN_BYTES = 100 * 2**20  # what the host reads of one plugin: it keeps each version's files


class TooLarge(ValueError):
    """A plugin whose files are more than the host reads (:data:`MAX_PLUGIN_BYTES`)."""

    def __init__(self, source: Source, size: int | None = None) -> None:
        held = f"{size / 2**20:,.0f} MB of files" if size is not None else "files that grew"
        super().__init__(
            f"{source.path} holds {held}; the host reads at most "
            f"{MAX_PLUGIN_BYTES // 2**20} MB of a plugin (it hashes and keeps every version): "
            "move data out of the plugin directory and open it at run time"
        )


def read_source(source: Source) -> tuple[str, Files]:
    """The content hash of a source and the bytes it was computed from (``OSError`` if gone,
    :class:`TooLarge` past :data:`MAX_PLUGIN_BYTES`, checked before anything is read)."""
    digest = hashlib.sha256()
    files = [source.path] if source.kind != "package" else list(_package_files(source.path))
    total = sum(path.stat().st_size for path in files)
    if total > MAX_PLUGIN_BYTES:
        raise TooLarge(source, total)
    contents = Files()
    budget = MAX_PLUGIN_BYTES
    for path in files:
        data, real, info = _read(path, budget)
        if data is None:  # it grew (or says size 0 and is not): stop at the budget
            raise TooLarge(source)
        budget -= len(data)
        contents[path] = data
        if real != str(path):
            contents.real[path] = real
        if info.st_nlink > 1:
            contents.shared[path] = info.st_uid
        digest.update(str(path.relative_to(source.path.parent)).encode() + b"\0")
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()[:16], contents


def _read(path: Path, budget: int) -> tuple[bytes | None, str, os.stat_result]:
    """A file's bytes (None past ``budget``), the path of the file really read (asked of
    the open file where the system tells it, so a link swapped after the check cannot
    hide where it led) and its status (a regular file's only: ``OSError`` else)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            real = os.path.realpath(path)
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(budget + 1)
        return (data if len(data) <= budget else None), real, info
    finally:
        os.close(fd)


def lookalikes(directory: Path, names: Iterable[str] | None = None) -> list[str]:
    """Why entries that look like plugins are not loaded (``my-tools.py``, no __init__.py).

    ``names`` are the entries to look at; None means every entry of ``directory``
    that is not a plugin.
    """
    if names is None:
        try:
            names = [e.name for e in directory.iterdir() if source_at(directory, e.name) is None]
        except OSError:
            return []
    reasons = (not_loaded(directory, name) for name in sorted(names))
    return [reason for reason in reasons if reason is not None]


def changing(directory: Path, key: str, window: float) -> bool:
    """Whether the entry ``key`` changed on disk within the last ``window`` seconds.

    File events can lag behind a copy in progress; an entry that is not quiet
    yet is better looked at again than loaded half-written.
    """
    source = source_at(directory, key)
    if source is None:
        return False
    age = time.time() - last_change(source)
    return 0 <= age < window
