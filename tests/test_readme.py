"""The README's examples marked as executed are run here, so they stay true."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"
MARKER = "<!-- executed by tests/test_readme.py -->"


def examples() -> list[str]:
    text = README.read_text()
    return re.findall(MARKER + r"\n```python\n(.*?)```", text, flags=re.S)


def test_the_readme_has_executed_examples() -> None:
    assert len(examples()) >= 1


@pytest.mark.parametrize("index", range(len(examples())))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTHOST_CACHE_DIR", str(tmp_path / "cache"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(
            compile(examples()[index], f"README example {index}", "exec"), {"__name__": "__main__"}
        )
    assert (
        out.getvalue() == 'Here is the weather: {"city":"Oslo","temperature":21,"unit":"celsius"}\n'
    )
