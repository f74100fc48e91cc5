"""``agenthost check``: validate plugins without hosting them, for every provider or some.

Each path is loaded into a scratch directory without its lifecycle hooks; its
tools are checked against each provider's rules. ``--json`` prints one array
with a record per path, so the output of any number of paths is one document.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agenthost._cli.arguments import add_command, indent
from agenthost._directory.loader import load_source
from agenthost._directory.scan import not_loaded, source_at
from agenthost._directory.version import LoadFailure, PluginVersion
from agenthost._providers.compatibility import PROVIDERS, Finding, check_compatibility

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands,
        "check",
        run,
        help="validate plugins (files, folders, wheels, a directory of them)",
    )
    sub.add_argument(
        "path",
        nargs="+",
        help="the plugins to check (files, folders, wheels, or a plugin directory)",
    )
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub.add_argument(
        "--provider",
        action="append",
        choices=PROVIDERS,
        default=[],
        help="only this provider's findings, its refusals failing the check (repeatable); "
        "by default a refusal by one provider alone is a warning",
    )


def run(args: argparse.Namespace) -> int:
    """Check every path given (`agenthost check plugins/*` or `plugins`); 1 if any fails."""
    records: list[dict[str, Any]] | None = [] if args.json else None
    codes = [_check_one(path, args, records) for path in _plugins(args.path)]
    if records is not None:
        print(json.dumps(records, indent=2, default=str))
    return max(codes)


def _plugins(given: Sequence[str]) -> list[Path]:
    """The paths to check: a plugin directory (a folder without ``__init__.py`` holding
    plugins) stands for every plugin in it, as ``check plugins/*`` would."""
    paths = []
    for path in map(Path, given):
        inside = []
        if path.is_dir() and not (path / "__init__.py").exists():
            names = sorted(child.name for child in path.iterdir())
            inside = [path / n for n in names if source_at(path, n) or not_loaded(path, n)]
        paths += inside or [path]
    return paths


def _check_one(given: Path, args: argparse.Namespace, records: list[dict[str, Any]] | None) -> int:
    """Check one path; its report is printed, or appended to ``records`` for ``--json``."""
    path = given.absolute()
    if not path.exists():
        message = f"{path}: no such file or directory"
        _say(records, message, path=str(path), ok=False, error=message)
        return 1
    source = source_at(path.parent, path.name)
    if source is None:
        what = "no plugins in this folder" if path.is_dir() else "not a plugin"
        reason = not_loaded(path.parent, path.name)
        message = reason or f"{path}: {what} (a .py file, a folder with __init__.py, or a .whl)"
        _say(records, message, path=str(path), ok=False, error=message)
        return 1
    with tempfile.TemporaryDirectory(prefix="agenthost-check-") as scratch:
        result = load_source(source, Path(scratch), hooks=False)
        if isinstance(result, LoadFailure):
            text = f"failed: {result}"
            text += f"\n{indent(result.traceback)}" if result.traceback else ""
            _say(records, text, path=str(path), ok=False, error=result.message,
                 file=result.file, line=result.line, traceback=result.traceback)  # fmt: skip
            return 1
        try:
            findings = [f for d in result.definitions for f in check_compatibility(d)]
            findings = _weighed(findings, args.provider)
            failed = bool(result.definition_errors) or any(f.severity == "error" for f in findings)
            if records is not None:
                records.append(_record(result, findings, failed))
            else:
                _report(result, findings, failed)
            return 1 if failed else 0
        finally:
            result.retire()


def _say(records: list[dict[str, Any]] | None, text: str, **record: Any) -> None:
    if records is None:
        print(text)
    else:
        records.append({"plugin": None, **record})


def _record(result: PluginVersion, findings: Sequence[Finding], failed: bool) -> dict[str, Any]:
    return {
        "plugin": result.name,
        "path": str(result.source.path),
        "version": result.version,
        "ok": not failed,
        "tools": [{"name": d.name, "input_schema": d.input_schema} for d in result.definitions],
        "problems": [error.as_dict() for error in result.definition_errors],
        "warnings": list(result.warnings),
        "findings": [
            {"severity": f.severity, "provider": f.provider, "tool": f.tool,
             "message": f.message, "file": f.file, "line": f.line}
            for f in findings
        ],
    }  # fmt: skip


def _report(result: PluginVersion, findings: Sequence[Finding], failed: bool) -> None:
    definitions = result.definitions
    count = f"{len(definitions)} tool{'s' if len(definitions) != 1 else ''}"
    print(f"plugin {result.name} {result.version or ''}".rstrip() + f": {count}")
    for definition in definitions:
        parameters = ", ".join(definition.input_schema.get("properties") or {}) or "no parameters"
        print(f"  {definition.name}({parameters}): {definition.description or '(no description)'}")
    for problem in result.problems:
        print(f"error: {problem}")
    for warning in result.warnings:
        print(f"warning: {warning}")
    for finding in findings:
        print(finding)
    print("FAILED" if failed else "OK")


def _weighed(findings: list[Finding], providers: Sequence[str]) -> list[Finding]:
    """Findings for the providers asked about; without any, one provider's refusal warns.

    A plugin written for Claude should not fail its check because Gemini alone
    cannot take a ``dict`` parameter; ``--provider gemini`` makes it fail.
    """
    if providers:
        return [f for f in findings if f.provider in providers]
    refusing: dict[str, set[str]] = {}
    for finding in findings:
        if finding.severity == "error":
            refusing.setdefault(finding.tool, set()).add(finding.provider)
    weighed = []
    for finding in findings:
        if finding.severity == "error" and len(refusing[finding.tool]) == 1:
            finding = dataclasses.replace(
                finding,
                severity="warning",
                message=f"{finding.message} (only {finding.provider} refuses it; "
                f"--provider {finding.provider} makes this fail)",
            )
        weighed.append(finding)
    return weighed
