"""Shared fixtures: plugin directories and a helper to write plugin files."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from loguru import logger

from agenthost import PluginHost

# Property tests run on CI machines with 2 cores: keep them bounded and quiet about slowness.
settings.register_profile(
    "agenthost", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# CI replays the same examples every run, so a red build always reproduces.
settings.register_profile("ci", parent=settings.get_profile("agenthost"), derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "agenthost")

TESTS = Path(__file__).parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

pytest_plugins = ["services"]  # real redis-server and nginx, for the cluster tests


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """An empty plugin directory."""
    path = tmp_path / "plugins"
    path.mkdir()
    return path


@pytest.fixture
def make_host(tmp_path: Path) -> Iterator[Callable[..., PluginHost]]:
    """Build hosts that use a scratch wheel cache, skip installed plugins and stop at teardown."""
    hosts: list[PluginHost] = []

    def make(directory: Path | None = None, **options: Any) -> PluginHost:
        options.setdefault("cache_dir", tmp_path / "cache")
        options.setdefault("installed", False)
        if directory is None:
            directory = tmp_path / "plugins"
            directory.mkdir(exist_ok=True)
        host = PluginHost(directory, **options)
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.stop()


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    """What the library logs at WARNING and above (its logging is off unless turned on)."""
    lines: list[str] = []
    logger.enable("agenthost")
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    yield lines
    with contextlib.suppress(ValueError):  # the CLI's main() resets loguru's handlers
        logger.remove(sink)
    logger.disable("agenthost")
