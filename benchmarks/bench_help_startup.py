"""CPU time of ``streamembed --help`` against the interpreter's own start-up and ``import numpy, pyarrow.parquet``.

    python -m benchmarks.bench_help_startup [--rounds 10]

Each command is a whole process (this interpreter, ``PYTHONPATH`` = the tree, bytecode compiled by one
unrecorded round first); CPU time is user + system of the child (``getrusage``). Rounds run the commands in a
rotating order; the table gives the median and min over rounds. Issue 36's target: ``--help`` ≤ 0.15 CPU-s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "streamembed --help": [sys.executable, "-m", "streamembed", "--help"],
    "import numpy, pyarrow.parquet": [sys.executable, "-c", "import numpy, pyarrow.parquet"],
}


def cpu_seconds(cmd: list[str]) -> float:
    """User + system CPU seconds of one child process running ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=os.environ | {"PYTHONPATH": str(ROOT)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args(argv)
    names = list(COMMANDS)
    for name in names:  # compile the bytecode
        cpu_seconds(COMMANDS[name])
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(cpu_seconds(COMMANDS[name]))
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds; CPU-s (user + system)")
    print("| command | CPU-s median | CPU-s min | median over `python -c pass` |")
    print("| --- | ---: | ---: | ---: |")
    floor = statistics.median(times["python -c pass"])
    for name in names:
        med = statistics.median(times[name])
        print(f"| `{name}` | {med:.3f} | {min(times[name]):.3f} | +{med - floor:.3f} |")


if __name__ == "__main__":
    main()
