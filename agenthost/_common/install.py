"""The command that installs an extra, as it works from where the user stands.

agenthost is installed from a checkout (``make`` runs ``pip install -e``) or
from a built wheel, and it is on no package index: ``pip install
'agenthost[mcp]'`` fails for both. From a checkout the hint reinstalls the
checkout with the extra; otherwise it installs the extra's own requirements,
which are on the index. Either way through the running interpreter's pip, so
it lands in the environment that needs it.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import importlib_metadata
from packaging.requirements import InvalidRequirement, Requirement

__all__ = ["install_command", "pip_install"]


def pip_install(requirements: list[str]) -> str:
    """A shell command that installs ``requirements`` where this interpreter finds them."""
    return f"{_pip()} {' '.join(shlex.quote(r) for r in requirements)}"


def _pip() -> str:
    return f"{shlex.quote(sys.executable)} -m pip install"


def install_command(extra: str) -> str:
    """A shell command that installs ``extra`` (``"mcp"``, ``"search"``, ``"otel"``)."""
    pip = _pip()
    try:
        distribution = importlib_metadata.distribution("agenthost")
    except importlib_metadata.PackageNotFoundError:
        return f"{pip} {shlex.quote(extra)}"
    checkout = _checkout(distribution.read_text("direct_url.json"))
    if checkout is not None:
        return f"{pip} -e {shlex.quote(f'{checkout}[{extra}]')}"
    needed = _requirements(distribution.requires or [], extra)
    return f"{pip} {' '.join(shlex.quote(r) for r in needed) or shlex.quote(extra)}"


def _checkout(direct_url: str | None) -> Path | None:
    """The source folder of an editable install (PEP 610), if it still is one."""
    try:
        record = json.loads(direct_url or "null")
        url = urlparse(record["url"])
        editable = record.get("dir_info", {}).get("editable", False)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    folder = Path(unquote(url.path))
    if url.scheme != "file" or not editable or not (folder / "pyproject.toml").is_file():
        return None
    return folder


def _requirements(requires: list[str], extra: str) -> list[str]:
    """The requirements ``extra`` adds, without their markers: ``mcp<3,>=2.3``."""
    found = []
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if (
            marker is not None
            and marker.evaluate({"extra": extra})
            and not marker.evaluate({"extra": ""})
        ):
            requirement.marker = None
            found.append(str(requirement))
    return found
