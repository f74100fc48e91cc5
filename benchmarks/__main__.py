"""`python -m benchmarks [NAME ...]` runs benchmarks/bench_NAME.py (all when none given)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from benchmarks._harness import machine


def main(argv: list[str]) -> int:
    available = sorted(p.stem[len("bench_") :] for p in Path(__file__).parent.glob("bench_*.py"))
    wanted = argv or available
    unknown = set(wanted) - set(available)
    if unknown:
        print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have: {', '.join(available)}")
        return 2
    print(f"# agenthost benchmarks on {machine()}")
    for name in wanted:
        importlib.import_module(f"benchmarks.bench_{name}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
