"""Pure-Python wheels as plugins: verified, then extracted into a cache named by content hash.

A wheel is untrusted input until proven otherwise. Before anything is written,
the archive must hold each file once, exactly one ``.dist-info`` directory, and
a ``RECORD`` that lists every file with a SHA-256 (or stronger) hash its bytes
match; entries with absolute paths, ``..``, links, ``.pth`` files (which run
code at interpreter start), compiled extensions, ``.data`` directories and
archives that expand beyond sane limits are refused. The files are written to
a temporary directory renamed into place, so a half-extracted wheel is never
seen. An extraction already in the cache is compared with the verified
archive before each use and extracted again if anything in it changed; the
modules are then imported from the verified bytes themselves.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import importlib_metadata
from loguru import logger
from packaging.requirements import InvalidRequirement, Requirement

from agenthost._errors import WheelError

__all__ = [
    "ENTRY_POINT_GROUP",
    "Wheel",
    "WheelError",
    "open_wheel",
    "plugin_name",
    "prune_cache",
    "wheel_plugin_name",
]


ENTRY_POINT_GROUP = "agenthost.plugins"
MAX_UNCOMPRESSED = 200 * 1024 * 1024
MAX_ENTRIES = 10_000
_COMPILED = (".so", ".pyd", ".dylib", ".dll")
_HASHES = frozenset({"sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b"})
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")  # listed in RECORD without a hash


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
    sources: dict[Path, bytes] = field(default_factory=dict, repr=False)  # verified .py files


def open_wheel(data: bytes, cache_dir: Path) -> Wheel:
    """Verify ``data`` (a wheel's bytes), make sure the cache holds exactly its files, and
    read its metadata."""
    files, dist_info = _verified_files(data)
    root = cache_dir / "wheels" / hashlib.sha256(data).hexdigest()[:32]
    if not root.is_dir():
        _extract(files, root)
    elif not _extraction_matches(root, files):
        logger.warning("the cached extraction {} was changed; extracting the wheel again", root)
        _discard(root)
        _extract(files, root)
    os.utime(root)  # in use: keeps it out of prune_cache's reach
    _check_pure(files.get(f"{dist_info}/WHEEL"), dist_info)
    distribution = importlib_metadata.PathDistribution(root / dist_info)
    name = distribution.metadata["Name"]
    version = distribution.metadata["Version"]
    if not name or not version:
        raise WheelError(f"{dist_info}/METADATA lacks Name or Version")
    tops = _top_level(root, files, dist_info)
    entry_points = [
        (ep.module, ep.attr or None)
        for ep in distribution.entry_points.select(group=ENTRY_POINT_GROUP)
    ]
    public = sorted(name for name in tops if not name.startswith("_"))
    modules = list(dict.fromkeys(m for m, _ in entry_points)) or public
    return Wheel(
        name=plugin_name(name, distribution.entry_points.select(group=ENTRY_POINT_GROUP).names),
        version=version,
        root=root,
        tops=tops,
        modules=modules,
        entry_points=entry_points,
        missing=missing_requirements(distribution.requires or []),
        sources={root / path: data for path, data in files.items() if path.endswith(".py")},
    )


def wheel_plugin_name(data: bytes) -> str:
    """The name a wheel's plugin has, once the archive is verified, known without
    extracting or importing anything (see :func:`plugin_name`)."""
    files, dist_info = _verified_files(data)
    distribution = _Unpacked(files, dist_info)
    name = distribution.metadata["Name"]
    if not name:
        raise WheelError(f"{dist_info}/METADATA lacks Name or Version")
    return plugin_name(name, distribution.entry_points.select(group=ENTRY_POINT_GROUP).names)


class _Unpacked(importlib_metadata.Distribution):
    """A wheel's metadata read from its verified bytes, before anything is extracted."""

    def __init__(self, files: dict[str, bytes], dist_info: str) -> None:
        self._files, self._dist_info = files, dist_info

    def read_text(self, filename: str | os.PathLike[str]) -> str | None:
        data = self._files.get(f"{self._dist_info}/{filename}")
        return data.decode("utf-8", "replace") if data is not None else None

    def locate_file(self, path: str | os.PathLike[str]) -> Path:
        raise WheelError("a wheel's files are read from the archive, not located")


def plugin_name(distribution: str, entry_points: Iterable[str] = ()) -> str:
    """One name for one plugin, installed or dropped into the directory as a wheel: its
    entry point's when it declares exactly one, else its distribution's, normalised
    (``Text-Tools`` and ``text.tools`` are ``text_tools``), so the same plugin present
    twice is "already provided", not a conflict over each of its tools."""
    names = sorted(set(entry_points))
    return re.sub(r"[-_.]+", "_", names[0] if len(names) == 1 else distribution).lower()


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


def _verified_files(data: bytes) -> tuple[dict[str, bytes], str]:
    """Every file of the archive by its path, checked against RECORD; and the dist-info name."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise WheelError(f"not a readable zip archive ({exc}); is the copy complete?") from None
    with archive:
        entries = archive.infolist()
        _check_entries(entries)
        try:
            files = {_path(e.filename): _read(archive, e) for e in entries if not e.is_dir()}
        except (zipfile.BadZipFile, EOFError) as exc:
            raise WheelError(f"corrupt entry in the archive ({exc})") from None
    infos = sorted(
        {path.split("/", 1)[0] for path in files if path.split("/", 1)[0].endswith(".dist-info")}
    )
    if not infos:
        raise WheelError("no .dist-info directory: not a wheel")
    if len(infos) > 1:
        raise WheelError(f"more than one .dist-info directory ({', '.join(infos)})")
    _check_record(files, infos[0])
    return files, infos[0]


def _read(archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> bytes:
    """An entry's bytes, never more than it declares: the declared sizes are what the
    archive's total was checked against, and a bomb declares little."""
    with archive.open(entry) as member:
        data = member.read(entry.file_size + 1)
    if len(data) > entry.file_size:
        raise WheelError(f"refused entry {entry.filename!r}: larger than the archive declares")
    return data


def _path(name: str) -> str:
    """An archive member's path in one spelling (``./a//b`` is ``a/b``)."""
    return "/".join(PurePosixPath(name).parts)


def _check_record(files: dict[str, bytes], dist_info: str) -> None:
    record = f"{dist_info}/RECORD"
    if record not in files:
        raise WheelError(f"{record} is missing")
    listed: dict[str, tuple[str, str]] = {}
    try:
        rows = list(csv.reader(io.StringIO(files[record].decode())))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise WheelError(f"{record} cannot be read ({exc})") from None
    for row in rows:
        if not row:
            continue
        path = _path(row[0])
        if path in listed:
            raise WheelError(f"RECORD lists {path!r} twice")
        listed[path] = (row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
    for path in sorted(files):
        if path != record and not path.endswith(_SIGNATURES) and path not in listed:
            raise WheelError(f"{path!r} is not listed in RECORD")
    for path, (hashed, size) in sorted(listed.items()):
        if path == record or path.endswith(_SIGNATURES):
            continue
        if path not in files:
            raise WheelError(f"RECORD lists {path!r}, which the archive lacks")
        algorithm, _, expected = hashed.partition("=")
        if algorithm not in _HASHES:
            shown = algorithm or "nothing"
            raise WheelError(
                f"{path!r} is hashed with {shown} in RECORD; sha256 or stronger is required"
            )
        content = files[path]
        actual = base64.urlsafe_b64encode(hashlib.new(algorithm, content).digest()).rstrip(b"=")
        if actual.decode() != expected.rstrip("=") or (size and size != str(len(content))):
            raise WheelError(f"{path!r} does not match its hash in RECORD")


def _extract(files: dict[str, bytes], root: Path) -> None:
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=root.parent))
    try:
        for path, content in files.items():
            target = staging.joinpath(*path.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        try:
            staging.rename(root)
        except OSError:
            if not root.is_dir():  # another loader may have won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extraction_matches(root: Path, files: dict[str, bytes]) -> bool:
    """Whether ``root`` holds exactly ``files``, byte for byte (bytecode caches aside)."""
    found = 0
    for path in root.rglob("*"):
        if path.is_symlink():
            return False
        if path.is_dir() or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(root).as_posix()
        try:
            if files.get(relative) != path.read_bytes():
                return False
        except OSError:
            return False
        found += 1
    return found == len(files)


def _discard(root: Path) -> None:
    """Move ``root`` aside, then delete it (so a half-deleted copy is never used)."""
    aside = root.with_name(f".discard-{root.name}-{os.getpid()}-{time.monotonic_ns()}")
    with contextlib.suppress(OSError):
        root.rename(aside)
    shutil.rmtree(aside, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)


def _check_entries(entries: list[zipfile.ZipInfo]) -> None:
    if len(entries) > MAX_ENTRIES:
        raise WheelError(f"{len(entries)} entries; at most {MAX_ENTRIES} are accepted")
    if sum(e.file_size for e in entries) > MAX_UNCOMPRESSED:
        raise WheelError(f"expands beyond {MAX_UNCOMPRESSED // 2**20} MB")
    seen: set[str] = set()
    for entry in entries:
        name = entry.filename
        parts = PurePosixPath(name).parts
        if name.startswith(("/", "\\")) or (parts and parts[0].endswith(":")) or "\\" in name:
            raise WheelError(f"refused entry {name!r}: absolute or Windows path")
        if ".." in parts or "\x00" in name:
            raise WheelError(f"refused entry {name!r}: it would escape the extraction directory")
        if entry.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise WheelError(  # bzip2 and LZMA decompress a whole block, however large
                f"refused entry {name!r}: compressed with method {entry.compress_type}; "
                "wheels are stored or deflated"
            )
        if stat.S_ISLNK(entry.external_attr >> 16):
            raise WheelError(f"refused entry {name!r}: links are not allowed")
        if name.endswith(".pth"):
            raise WheelError(f"refused entry {name!r}: .pth files run code at interpreter start")
        if name.endswith(_COMPILED) or ".so." in PurePosixPath(name).name:
            raise WheelError(f"refused entry {name!r}: compiled extensions are not supported")
        if parts and parts[0].endswith(".data"):
            raise WheelError(f"refused entry {name!r}: .data directories are not supported")
        if not entry.is_dir():
            if _path(name) in seen:
                raise WheelError(f"refused entry {name!r}: it appears twice in the archive")
            seen.add(_path(name))


def _check_pure(wheel_file: bytes | None, dist_info: str) -> None:
    if wheel_file is None:
        raise WheelError(f"{dist_info}/WHEEL is missing")
    for line in wheel_file.decode(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "root-is-purelib" and value.strip().lower() != "true":
            raise WheelError("not a pure-Python wheel (Root-Is-Purelib is not true)")


def _top_level(root: Path, files: dict[str, bytes], dist_info: str) -> dict[str, Path]:
    """The wheel's top-level packages and modules, from its verified file list."""
    tops: dict[str, Path] = {}
    for path in sorted(files):
        first, _, rest = path.partition("/")
        if first == dist_info or first.startswith(".") or first == "__pycache__":
            continue
        if rest and first.isidentifier():
            tops[first] = root / first
        elif not rest and first.endswith(".py") and first[:-3].isidentifier():
            tops[first[:-3]] = root / first
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
