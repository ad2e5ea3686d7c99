"""The directory daemon's start-up: ``streamembed run`` on an empty directory, with metrics off and on.

    python -m benchmarks.bench_daemon_startup [--repeat 5] [--tree PATH ...] [--json OUT.json]

Each command is a whole process (``python -m streamembed run``, this
interpreter, ``PYTHONPATH`` = the tree) in batch mode
(``directory.exit_when_idle``) on an empty input directory: it loads the
model, builds the source, sinks, drift monitor (and with metrics on the
Prometheus metrics and the ops server on port 0, which serves ``/map``), finds
nothing to read and exits 0. CPU time is user + system of the child
(``getrusage``, microseconds, not ``/usr/bin/time``'s hundredths). Rounds run
every (tree, metrics) pair once in a rotating order; one unrecorded round
first compiles the bytecode (``PYTHONPYCACHEPREFIX`` in the run's directory,
as an installed package has it). The machine is shared: compare within a
round; the table gives the median and range over rounds, and each tree's CPU
time as a ratio to the first tree's in the same round.

Issue 27: with metrics off the daemon imports neither ``prometheus_client``
nor the ops server (``ops/no_metrics.py``); ``--tree OLD --tree NEW`` measures
what that saves.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _model(path: Path) -> None:
    from streamembed import LandmarkMDS

    rng = np.random.default_rng(0)
    L = rng.standard_normal((50, 5))
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1))
    LandmarkMDS(n_components=3).fit(D).save(path)


def run_once(tree: Path, base: Path, model: Path, metrics: bool, tag: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``streamembed run`` on an empty directory."""
    empty = base / "empty"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")
           and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=str(base / "pycache"),
               STREAMEMBED_MODEL__PATH=str(model), STREAMEMBED_SOURCE__KIND="directory",
               STREAMEMBED_DIRECTORY__PATH=str(empty), STREAMEMBED_OUTPUT__ROOT=str(base / f"root-{tag}"),
               STREAMEMBED_DIRECTORY__SETTLE_SECONDS="0", STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE="true",
               STREAMEMBED_METRICS__ENABLED="true" if metrics else "false", STREAMEMBED_METRICS__PORT="0",
               STREAMEMBED_LOGGING__LEVEL="WARNING")
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "streamembed", "run"], env=env, cwd=base, capture_output=True,
                       text=True, timeout=300)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"streamembed run ({tree}, metrics {metrics}) exited {r.returncode}:\n{r.stderr[-3000:]}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _cell(v: list[float], digits: int = 3) -> str:
    return f"{statistics.median(v):.{digits}f} ({min(v):.{digits}f}-{max(v):.{digits}f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="recorded rounds")
    ap.add_argument("--tree", action="append", type=Path, help="checkout to run (repeat; default: this one)")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    args = ap.parse_args(argv)
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    pairs = [(i, metrics) for metrics in (False, True) for i in range(len(trees))]
    cpu: dict[tuple[int, bool], list[float]] = {p: [] for p in pairs}
    wall: dict[tuple[int, bool], list[float]] = {p: [] for p in pairs}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        base = Path(tmp)
        model = base / "model.npz"
        _model(model)
        for rnd in range(-1, args.repeat):  # round -1 compiles the bytecode and is not recorded
            k = rnd % len(pairs)
            for i, metrics in pairs[k:] + pairs[:k]:
                w, c = run_once(trees[i], base, model, metrics, f"{rnd}-{i}-{int(metrics)}")
                if rnd >= 0:
                    wall[(i, metrics)].append(w)
                    cpu[(i, metrics)].append(c)
    print(f"streamembed run on an empty directory, {args.repeat} rounds (median (range)); load "
          f"{os.getloadavg()[0]:.1f}")
    print("| tree | metrics | CPU s | wall s | CPU / first tree's, same round |")
    print("| --- | --- | ---: | ---: | ---: |")
    for i, metrics in pairs:
        ratio = [a / b for a, b in zip(cpu[(i, metrics)], cpu[(0, metrics)], strict=True)]
        print(f"| {trees[i]} | {'on' if metrics else 'off'} | {_cell(cpu[(i, metrics)])} | "
              f"{_cell(wall[(i, metrics)])} | {_cell(ratio, 2)} |")
    if args.json:
        args.json.write_text(json.dumps({f"{trees[i]} metrics={'on' if m else 'off'}": {"cpu": cpu[(i, m)],
                                         "wall": wall[(i, m)]} for i, m in pairs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
