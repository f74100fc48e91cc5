"""Test helpers: write plugins and wheels, wait on conditions with a deadline, record events."""

from __future__ import annotations

import base64
import hashlib
import os
import textwrap
import threading
import time
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from agenthost import PluginEvent, PluginHost


def write(path: Path, source: str) -> Path:
    """Write dedented source, creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def replace_atomically(path: Path, source: str) -> None:
    """Save the way most editors and tools do: a temp file renamed over the target."""
    temp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    temp.write_text(textwrap.dedent(source).lstrip())
    os.replace(temp, path)


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.002)


def wheel_bytes(
    dist: str,
    version: str,
    files: dict[str, str],
    *,
    entry_points: dict[str, str] | None = None,
    requires: Iterable[str] = (),
    pure: bool = True,
    raw: Iterable[tuple[zipfile.ZipInfo | str, bytes]] = (),
) -> bytes:
    """A wheel as bytes: modules, dist-info metadata, optional entry points and raw entries."""
    import io

    buffer = io.BytesIO()
    info = f"{dist.replace('-', '_')}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    contents = {name: textwrap.dedent(text).lstrip() for name, text in files.items()}
    contents[f"{info}/METADATA"] = metadata
    contents[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: {'true' if pure else 'false'}\n"
        "Tag: py3-none-any\n"
    )
    if entry_points:
        lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
        contents[f"{info}/entry_points.txt"] = f"[agenthost.plugins]\n{lines}"
    record = []
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in contents.items():
            data = text.encode()
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        for entry, data in raw:
            archive.writestr(entry, data)
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return buffer.getvalue()


def make_wheel(directory: Path, dist: str, version: str, files: dict[str, str], **kw: Any) -> Path:
    path = directory / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
    path.write_bytes(wheel_bytes(dist, version, files, **kw))
    return path


class Events:
    """Collects plugin events from a host, thread-safely."""

    def __init__(self, host: PluginHost) -> None:
        self._lock = threading.Lock()
        self.all: list[PluginEvent] = []
        host.on_event(self._add)

    def _add(self, event: PluginEvent) -> None:
        with self._lock:
            self.all.append(event)

    def of(self, kind: str, plugin: str | None = None) -> list[PluginEvent]:
        with self._lock:
            return [e for e in self.all if e.kind == kind and plugin in (None, e.plugin)]

    def kinds(self, plugin: str | None = None) -> list[str]:
        with self._lock:
            return [e.kind for e in self.all if plugin in (None, e.plugin)]


def call(host: PluginHost, name: str, **arguments: Any) -> Any:
    """Run a tool's function directly from the live registry (the executor comes later)."""
    info = host.tool(name)
    assert info is not None, f"no tool {name!r}"
    function = info.definition.function
    assert function is not None
    return function(**info.definition.validate(arguments))
