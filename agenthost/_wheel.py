"""Pure-Python wheels as plugins: safe extraction into a cache named by content hash.

A wheel is untrusted input until proven otherwise. Extraction refuses absolute
paths, ``..`` components, links, ``.pth`` files (which run code at interpreter
start), compiled extensions, ``.data`` directories and archives that expand
beyond sane limits; only then is anything written, into a temporary directory
renamed into place, so a half-extracted wheel is never seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import stat
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import importlib_metadata
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["ENTRY_POINT_GROUP", "Wheel", "WheelError", "open_wheel", "prune_cache"]

ENTRY_POINT_GROUP = "agenthost.plugins"
MAX_UNCOMPRESSED = 200 * 1024 * 1024
MAX_ENTRIES = 10_000
_COMPILED = (".so", ".pyd", ".dylib", ".dll")


class WheelError(Exception):
    """A wheel that cannot be used as a plugin, with the reason."""


@dataclass(frozen=True)
class Wheel:
    """An extracted wheel: identity, where its modules are, and what to scan."""

    name: str
    version: str
    root: Path
    tops: dict[str, Path]
    modules: list[str]
    entry_points: list[tuple[str, str | None]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def open_wheel(data: bytes, cache_dir: Path) -> Wheel:
    """Extract ``data`` (a wheel's bytes) into the cache if needed and read its metadata."""
    digest = hashlib.sha256(data).hexdigest()
    root = cache_dir / "wheels" / digest[:32]
    if root.is_dir():
        os.utime(root)  # in use: keeps it out of prune_cache's reach
    else:
        _extract(data, root)
    dist_info = next(root.glob("*.dist-info"), None)
    if dist_info is None:
        raise WheelError("no .dist-info directory: not a wheel")
    _check_pure(dist_info)
    distribution = importlib_metadata.PathDistribution(dist_info)
    name = distribution.metadata["Name"]
    version = distribution.metadata["Version"]
    if not name or not version:
        raise WheelError(f"{dist_info.name}/METADATA lacks Name or Version")
    tops = _top_level(root, dist_info)
    entry_points = [
        (ep.module, ep.attr or None)
        for ep in distribution.entry_points.select(group=ENTRY_POINT_GROUP)
    ]
    public = sorted(name for name in tops if not name.startswith("_"))
    modules = list(dict.fromkeys(m for m, _ in entry_points)) or public
    return Wheel(
        name=canonicalize_name(name),
        version=version,
        root=root,
        tops=tops,
        modules=modules,
        entry_points=entry_points,
        missing=missing_requirements(distribution.requires or []),
    )


def prune_cache(cache_dir: Path, older_than: float = 24 * 3600) -> None:
    """Remove extracted wheels nobody opened for ``older_than`` seconds.

    Extractions are shared by every host using the cache (and a retired version
    may still be draining), so they are never removed on unload, only when stale.
    """
    wheels = cache_dir / "wheels"
    if not wheels.is_dir():
        return
    limit = time.time() - older_than
    for path in wheels.iterdir():
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < limit:
                shutil.rmtree(path, ignore_errors=True)


def _extract(data: bytes, root: Path) -> None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise WheelError(f"not a readable zip archive ({exc}); is the copy complete?") from None
    with archive:
        entries = archive.infolist()
        _check_entries(entries)
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=root.parent))
        try:
            for entry in entries:
                target = staging.joinpath(*PurePosixPath(entry.filename).parts)
                if entry.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(entry) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink)
            try:
                staging.rename(root)
            except OSError:
                if not root.is_dir():  # another loader may have won the race
                    raise
        except zipfile.BadZipFile as exc:
            raise WheelError(f"corrupt entry in the archive ({exc})") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _check_entries(entries: list[zipfile.ZipInfo]) -> None:
    if len(entries) > MAX_ENTRIES:
        raise WheelError(f"{len(entries)} entries; at most {MAX_ENTRIES} are accepted")
    if sum(e.file_size for e in entries) > MAX_UNCOMPRESSED:
        raise WheelError(f"expands beyond {MAX_UNCOMPRESSED // 2**20} MB")
    for entry in entries:
        name = entry.filename
        parts = PurePosixPath(name).parts
        if name.startswith(("/", "\\")) or (parts and parts[0].endswith(":")) or "\\" in name:
            raise WheelError(f"refused entry {name!r}: absolute or Windows path")
        if ".." in parts or "\x00" in name:
            raise WheelError(f"refused entry {name!r}: it would escape the extraction directory")
        if stat.S_ISLNK(entry.external_attr >> 16):
            raise WheelError(f"refused entry {name!r}: links are not allowed")
        if name.endswith(".pth"):
            raise WheelError(f"refused entry {name!r}: .pth files run code at interpreter start")
        if name.endswith(_COMPILED) or ".so." in PurePosixPath(name).name:
            raise WheelError(f"refused entry {name!r}: compiled extensions are not supported")
        if parts and parts[0].endswith(".data"):
            raise WheelError(f"refused entry {name!r}: .data directories are not supported")


def _check_pure(dist_info: Path) -> None:
    wheel_file = dist_info / "WHEEL"
    if not wheel_file.is_file():
        raise WheelError(f"{dist_info.name}/WHEEL is missing")
    for line in wheel_file.read_text(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "root-is-purelib" and value.strip().lower() != "true":
            raise WheelError("not a pure-Python wheel (Root-Is-Purelib is not true)")


def _top_level(root: Path, dist_info: Path) -> dict[str, Path]:
    tops: dict[str, Path] = {}
    for path in sorted(root.iterdir()):
        if path == dist_info or path.name.startswith(".") or path.name == "__pycache__":
            continue
        if path.is_dir() and path.name.isidentifier():
            tops[path.name] = path
        elif path.suffix == ".py" and path.stem.isidentifier():
            tops[path.stem] = path
    return tops


def missing_requirements(requires: list[str]) -> list[str]:
    """The ``Requires-Dist`` entries that no installed distribution satisfies."""
    missing = []
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            missing.append(text)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            installed = importlib_metadata.version(requirement.name)
        except importlib_metadata.PackageNotFoundError:
            missing.append(str(requirement))
            continue
        if requirement.specifier and not requirement.specifier.contains(
            installed, prereleases=True
        ):
            missing.append(f"{requirement} (installed: {installed})")
    return missing
