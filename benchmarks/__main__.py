"""`python -m benchmarks [--smoke] [NAME ...]` runs benchmarks/bench_NAME.py (all when none given).

Each benchmark runs in a fresh interpreter, so what one leaves behind (10,000
loaded tools, a warm allocator, threads) cannot skew the next one's figures.
``--smoke`` runs each once with a few iterations (``make test`` does, to notice
a benchmark that no longer runs); peers that are not installed are left out.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from benchmarks._harness import machine, start_smoke_run

SMOKE = "--smoke"


def main(argv: list[str]) -> int:
    available = sorted(p.stem[len("bench_") :] for p in Path(__file__).parent.glob("bench_*.py"))
    usage = f"usage: python -m benchmarks [{SMOKE}] [NAME ...]; have: {', '.join(available)}"
    if {"-h", "--help"} & set(argv):
        print(usage)
        return 0
    smoke = SMOKE in argv
    wanted = [arg for arg in argv if arg != SMOKE] or available
    unknown = set(wanted) - set(available)
    if unknown:
        print(f"unknown benchmark(s): {', '.join(sorted(unknown))}\n{usage}", file=sys.stderr)
        return 2
    if len(wanted) == 1:
        return _run(wanted[0], smoke)
    print(f"# agenthost benchmarks on {machine()}", flush=True)
    failed = []
    for name in wanted:
        print(f"\n# {name}", flush=True)
        if subprocess.call([sys.executable, "-m", "benchmarks", *[SMOKE] * smoke, name]):
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


def _run(name: str, smoke: bool) -> int:
    """One benchmark, in this interpreter."""
    if smoke:
        start_smoke_run()
        print(f"# smoke run of {name}: a few iterations each, the figures mean nothing", flush=True)
    importlib.import_module(f"benchmarks.bench_{name}").main()
    if smoke:
        print(f"# smoke run of {name}: done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
