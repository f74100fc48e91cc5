"""`python -m benchmarks [NAME ...]` runs benchmarks/bench_NAME.py (all when none given).

Each benchmark runs in a fresh interpreter, so what one leaves behind (10,000
loaded tools, a warm allocator, threads) cannot skew the next one's figures.
"""

from __future__ import annotations

import importlib
import subprocess
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
    if len(wanted) == 1:
        importlib.import_module(f"benchmarks.bench_{wanted[0]}").main()
        return 0
    print(f"# agenthost benchmarks on {machine()}", flush=True)
    failed = 0
    for name in wanted:
        print(f"\n# {name}", flush=True)
        failed |= subprocess.call([sys.executable, "-m", "benchmarks", name])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
