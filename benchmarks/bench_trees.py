"""This checkout against an older one, end to end and in memory, interleaved in one run.

    python -m benchmarks.bench_trees --before /path/to/an/older/checkout [--objects 300000] [--landmarks 500]
                                     [--repeat 3]

Each tree runs its own CLI (``PYTHONPATH`` = the tree, working directory
outside both, so ``python -m`` cannot pick up the wrong one) on the same
inputs, one after the other, ``--repeat`` rounds, and the best rate of each
is reported with the after/before ratio:

* ``streamembed embed`` of an Arrow IPC stream file and of a Parquet file
  (``fixed_size_list<float32>``), projection, d = 10;
* ``streamembed run`` on a directory holding that Arrow file, and on one
  holding the same objects as 8 files, batch mode
  (``directory.exit_when_idle``), drift monitoring on, wall time of the
  whole process minus the same command on an empty directory (one file is
  the worst case for a tree that copies files into memory instead of
  mapping them: every byte lands in fresh pages; with 8 files read buffers
  are reused, as in a daemon that runs for hours);
* the in-memory core: ``LandmarkMDS(n_components=10).fit(D).embed(A)``
  (projection and restricted reconstruction), timed inside each tree.

A tree fits its own model file (``streamembed fit``): model files are not
comparable across schema versions. Compare only the ratios (the machine is
shared and noisy, docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parents[1]

IN_MEMORY = """
import json, sys, time, numpy as np
from streamembed import LandmarkMDS
D = np.load(sys.argv[1]); A = np.load(sys.argv[2])
est = LandmarkMDS(n_components=10).fit(D)
out = {}
for method in ("projection", "restricted"):
    est.embed(A[:1000], method=method)
    best = min((lambda t0: (est.embed(A, method=method), time.perf_counter() - t0)[1])(time.perf_counter())
               for _ in range(3))
    out[method] = A.shape[0] / best
print(json.dumps(out))
"""


def _env(tree: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    env["PYTHONPATH"] = str(tree)
    env.update(more)
    return env


def _timed(tree: Path, args: list[str], cwd: Path, **env: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, *args], env=_env(tree, **env), cwd=cwd, capture_output=True, text=True,
                       timeout=1800)
    seconds = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise RuntimeError(f"{tree}: {' '.join(args)} exited {r.returncode}:\n{r.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--objects", type=int, default=300_000)
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": HERE}
    rng = np.random.default_rng(0)
    n, m = args.landmarks, args.objects
    L = rng.standard_normal((n, 20))
    Z = rng.standard_normal((m, 20))
    sq = (Z * Z).sum(1)[:, None] + (L * L).sum(1)[None] - 2 * Z @ L.T
    A = np.sqrt(np.maximum(sq, 0)).astype(np.float32)
    D = np.sqrt(np.maximum((L * L).sum(1)[:, None] + (L * L).sum(1)[None] - 2 * L @ L.T, 0))
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    best: dict[tuple[str, str], float] = {}

    def keep(tree: str, what: str, rate: float) -> None:
        best[(tree, what)] = max(best.get((tree, what), 0.0), rate)

    with tempfile.TemporaryDirectory(prefix="bench-trees-") as tmp:
        base = Path(tmp)
        np.save(base / "D.npy", D)
        np.save(base / "A.npy", A.astype(np.float32))
        table = pa.table({"id": pa.array([f"o{i}" for i in range(m)]),
                          "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A.reshape(-1)), n)})
        with pa.OSFile(str(base / "in.arrows"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
            for b in table.to_batches(max_chunksize=65536):
                w.write_batch(b)
        pq.write_table(table, base / "in.parquet", row_group_size=65536)
        (base / "dir").mkdir()
        os.link(base / "in.arrows", base / "dir" / "in.arrows")
        (base / "dir8").mkdir()  # the same objects as 8 files: a daemon's steady state, read buffers reused
        for i, part in enumerate(np.array_split(np.arange(m), 8)):
            with pa.OSFile(str(base / "dir8" / f"in-{i}.arrows"), "wb") as sink, \
                    pa.ipc.new_stream(sink, table.schema) as w:
                for b in table.slice(int(part[0]), len(part)).to_batches(max_chunksize=65536):
                    w.write_batch(b)
        (base / "empty").mkdir()
        for name, tree in trees.items():
            work = base / name
            work.mkdir()
            r = subprocess.run([sys.executable, "-m", "streamembed", "fit", "--dissimilarities", str(base / "D.npy"),
                                "--n-components", "10", "-o", str(work / "model.npz")], env=_env(tree), cwd=work,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(r.stderr)
        for rnd in range(args.repeat):
            for name, tree in trees.items():
                work = base / name
                model = str(work / "model.npz")
                for fmt in ("arrows", "parquet"):
                    out = work / f"out-{fmt}-{rnd}.parquet"
                    s = _timed(tree, ["-m", "streamembed", "embed", str(base / f"in.{fmt}"), "-m", model, "-o",
                                      str(out), "--progress", "never"] if name == "after" else
                               ["-m", "streamembed", "embed", str(base / f"in.{fmt}"), "-m", model, "-o", str(out)],
                               work)
                    keep(name, f"embed {fmt}", m / s)
                daemon = {"STREAMEMBED_MODEL__PATH": model, "STREAMEMBED_SOURCE__KIND": "directory",
                          "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0", "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true",
                          "STREAMEMBED_METRICS__ENABLED": "false"}
                empty = _timed(tree, ["-m", "streamembed", "run"], work,
                               STREAMEMBED_DIRECTORY__PATH=str(base / "empty"),
                               STREAMEMBED_OUTPUT__ROOT=str(work / f"empty-{rnd}"), **daemon)
                for directory, what in (("dir", "daemon directory, 1 file"), ("dir8", "daemon directory, 8 files")):
                    full = _timed(tree, ["-m", "streamembed", "run"], work,
                                  STREAMEMBED_DIRECTORY__PATH=str(base / directory),
                                  STREAMEMBED_OUTPUT__ROOT=str(work / f"root-{directory}-{rnd}"), **daemon)
                    keep(name, what, m / max(full - empty, 1e-3))
                r = subprocess.run([sys.executable, "-c", IN_MEMORY, str(base / "D.npy"), str(base / "A.npy")],
                                   env=_env(tree), cwd=work, capture_output=True, text=True, timeout=600)
                for method, rate in json.loads(r.stdout).items():
                    keep(name, f"in memory {method}", rate)
                print(f"round {rnd + 1}: {name} done", file=sys.stderr, flush=True)
    whats = sorted({w for _, w in best})
    print(f"{args.objects:,} objects x {args.landmarks} landmarks, float32, d = 10; best of {args.repeat} rounds\n")
    print("| path | before obj/s | after obj/s | after/before |")
    print("| --- | ---: | ---: | ---: |")
    for w in whats:
        b, a = best[("before", w)], best[("after", w)]
        print(f"| {w} | {b:,.0f} | {a:,.0f} | {a / b:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({f"{t}:{w}": v for (t, w), v in best.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
