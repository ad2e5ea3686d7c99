"""Block RR through the public API against single-object RR, in rounds: the table of docs/performance.md ("Block RR").

    python -m benchmarks.bench_block_public [--configs 500:10,200:2,1000:10,100:5] [--ks 8,32] [--rows 8192]
                                            [--rounds 7] [--backend compiled|numpy] [--json OUT]

For n landmarks and d kept axes (landmarks and objects from N(0, I) in R^(2d), Euclidean, float32 rows, as
``python -m benchmarks bench``), per round and in a rotating order:

* ``single``: ``LandmarkMDS.embed(A, method="restricted")`` of ``--rows`` rows (single-object RR);
* ``block k``: ``LandmarkMDS.embed_blocks(A, cross)`` of the same rows cut into consecutive blocks of k with
  their mutual dissimilarities (the public path: validation, the range guard, centring, the solver, the
  certificate, the consistency flag, the output frame).

Each row gives objects/s, and block / single (objects/s ratio) min and median over the rounds, with the share
of certified blocks and the load average. ``--backend numpy`` runs the block solver's and the row centring's
numpy paths instead of the compiled ones (``core.place.block``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from streamembed import LandmarkMDS
from streamembed.core.place.block import newton, prepare

from benchmarks.timing import euclidean, landmark_matrix, make_points


def _best(fn, number: int = 3) -> float:
    """Seconds of one call: the best of ``number`` calls (one round's measurement)."""
    best = float("inf")
    for _ in range(number):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="500:10,200:2,1000:10,100:5", help="n:d pairs, comma-separated")
    ap.add_argument("--ks", default="8,32")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--backend", choices=("compiled", "numpy"), default=None)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.backend == "numpy":  # the numpy paths everywhere in the block solver and the row centring
        newton.available_backends = lambda: ("numpy",)  # type: ignore[assignment]
        prepare.available_backends = lambda: ("numpy",)  # type: ignore[assignment]
    ks = [int(k) for k in args.ks.split(",")]
    rows = []
    print(f"block RR through LandmarkMDS.embed_blocks, {args.rows} float32 rows, {args.rounds} rounds "
          f"(load average {', '.join(f'{x:.2f}' for x in os.getloadavg())})\n")
    print("| n | d | k | single RR obj/s (median) | block obj/s (median) | block / single (min, median) | "
          "certified | load |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for cfg in args.configs.split(","):
        n, d = (int(x) for x in cfg.split(":"))
        rng = np.random.default_rng(0)
        L, _ = make_points(n, 1, d, 0)
        Z = rng.standard_normal((args.rows, L.shape[1]))
        est = LandmarkMDS(n_components=d).fit(landmark_matrix(L))
        A = np.ascontiguousarray(euclidean(Z, L), dtype=np.float32)
        cases = {}
        for k in ks:
            m = args.rows // k * k
            cross = [euclidean(Z[s:s + k], Z[s:s + k]).astype(np.float32) for s in range(0, m, k)]
            for c in cross:
                np.fill_diagonal(c, 0.0)
            cases[k] = (A[:m], cross)
        contenders = {"single": lambda est=est, A=A: est.embed(A, method="restricted")}
        for k, (Ak, cross) in cases.items():
            contenders[f"block {k}"] = lambda est=est, Ak=Ak, cross=cross: est.embed_blocks(Ak, cross)
        for fn in contenders.values():
            fn()
        times: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                times[name].append(_best(contenders[name]))
        single = [args.rows / t for t in times["single"]]
        for k, (Ak, cross) in cases.items():
            rate = [Ak.shape[0] / t for t in times[f"block {k}"]]
            ratio = [b / s for b, s in zip(rate, single, strict=True)]
            certified = float(est.embed_blocks(Ak, cross).blocks["certified"].mean())
            load = os.getloadavg()[0]
            print(f"| {n} | {d} | {k} | {statistics.median(single):,.0f} | {statistics.median(rate):,.0f} | "
                  f"{min(ratio):.3f}, {statistics.median(ratio):.3f} | {certified:.3f} | {load:.2f} |", flush=True)
            rows.append({"n": n, "d": d, "k": k, "single_objects_per_s": single, "block_objects_per_s": rate,
                         "block_over_single": ratio, "certified": certified, "load": load})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
