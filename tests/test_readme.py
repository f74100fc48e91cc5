"""Every example in the README runs on its own, so the README stays true.

Python blocks are executed one by one, each in a fresh namespace and an empty
working directory; a block followed by "prints `...`" must print exactly that.
JSON blocks must parse. Other blocks are output samples and must say ``text``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\n(?:\nprints `(.*?)`)?", flags=re.S | re.M)


def blocks(language: str) -> list[tuple[str, str | None]]:
    return [(m[2], m[3]) for m in BLOCK.finditer(README.read_text()) if m[1] == language]


def test_every_block_says_its_language() -> None:
    languages = {m[1] for m in BLOCK.finditer(README.read_text())}
    assert languages <= {"python", "json", "text"}, languages


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_example_runs_on_its_own(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, expected = blocks("python")[index]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTHOST_CACHE_DIR", str(tmp_path / "cache"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README python block {index}", "exec"), {"__name__": "__main__"})
    if expected is not None:
        assert out.getvalue() == expected + "\n"


def test_the_agent_loop_example_says_what_it_prints() -> None:
    said = [expected for code, expected in blocks("python") if "StandInModel" in code]
    assert said == ['Here is the weather: {"city":"Oslo","temperature":21,"unit":"celsius"}']


@pytest.mark.parametrize("index", range(len(blocks("json"))))
def test_json_example_parses(index: int) -> None:
    json.loads(blocks("json")[index][0])


def test_the_readme_points_only_at_files_in_the_repository() -> None:
    text = README.read_text()
    assert not re.search(r"DESIGN\.md|STYLE\.md|seeds/|\.\./", text)
    for target in re.findall(r"\]\(([^)#]+)\)", text):  # markdown links
        assert target.startswith(("http://127.0.0.1", "https://")) or (ROOT / target).exists()
    for path in re.findall(r"`((?:sample_plugins|benchmarks|tests|agenthost)/[\w./-]*)`", text):
        assert (ROOT / path).exists(), path
