"""Wheels built as ``pip wheel`` builds them (PEP 427), since the host verifies every wheel.

The files come first, then the ``.dist-info`` directory: METADATA, WHEEL and
last a RECORD listing every file with its sha256 and size (RECORD itself with
neither). Entries are deflated regular files, ``rw-r--r--``, with a fixed
timestamp, so the same files always give the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import zipfile

_TIMESTAMP = (2020, 1, 1, 0, 0, 0)  # what SOURCE_DATE_EPOCH does for a reproducible build


def wheel_name(name: str, version: str) -> str:
    """The file name pip gives a pure-Python wheel of ``name`` ``version``."""
    return f"{_escaped(name)}-{version}-py3-none-any.whl"


def build_wheel(name: str, version: str, files: dict[str, str]) -> bytes:
    """A pure-Python wheel holding ``files`` (path in the archive -> text) as its modules."""
    dist_info = f"{_escaped(name)}-{version}.dist-info"
    contents = {path: files[path].encode() for path in sorted(files)}
    contents[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    contents[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: agenthost-benchmarks\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n\n"
    )
    record = [f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in contents.items()]
    contents[f"{dist_info}/RECORD"] = "".join([*record, f"{dist_info}/RECORD,,\n"]).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in contents.items():
            entry = zipfile.ZipInfo(path, _TIMESTAMP)
            entry.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            archive.writestr(entry, data, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def _digest(data: bytes) -> str:
    """RECORD's spelling of a hash: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _escaped(name: str) -> str:
    """A distribution name as wheel and dist-info file names spell it (``probe-wheel``:
    ``probe_wheel``)."""
    return re.sub(r"[-_.]+", "_", name).lower()
