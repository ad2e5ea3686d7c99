"""Throughput of the core hot paths against the memory-read ceiling, in one run.

    python -m benchmarks.bench_core [--n 500] [--d 10] [--m 100000] [--repeat 7]

For float32 and float64 it prints objects/s of projection and single-object
RR (``LandmarkMDS.embed``) and the ratio of each to the read ceiling: the
time numpy needs merely to read the same (m, n) input array (``A.sum()``).
The last column is the projection kernel alone on its numpy path (what runs
where no C compiler built ``streamembed.core._native``), for comparison.
Timings are the best of ``--repeat`` runs; compare only ratios taken in one
run (the machine is shared and noisy, docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from streamembed import LandmarkMDS
from streamembed.core.place import projection
from streamembed.core.place.projection import ProjectionKernel


def best_time(fn, repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def make_problem(n: int, d: int, m: int, seed: int = 0):
    """n landmarks and m off-span objects in R^(2d) (Euclidean, so k0 ≥ 0)."""
    rng = np.random.default_rng(seed)
    p = 2 * d
    L = rng.normal(size=(n, p))
    Z = rng.normal(size=(m, p))
    sq = lambda P, Q: np.maximum((P**2).sum(1)[:, None] + (Q**2).sum(1)[None] - 2 * P @ Q.T, 0)  # noqa: E731
    D = np.sqrt(sq(L, L))
    np.fill_diagonal(D, 0.0)
    A = np.sqrt(sq(Z, L))
    return D, A


def run(n: int, d: int, m: int, repeat: int) -> list[dict]:
    D, A64 = make_problem(n, d, m)
    est = LandmarkMDS(n_components=d).fit(D)
    rows = []
    for dtype in (np.float32, np.float64):
        A = np.ascontiguousarray(A64, dtype=dtype)
        est.embed(A[:1000], method="restricted")  # warm up kernels and thread pool
        t_read = best_time(lambda A=A: A.sum(), repeat)
        t_proj = best_time(lambda A=A: est.embed(A, method="projection"), repeat)
        t_rr = best_time(lambda A=A: est.embed(A, method="restricted"), repeat)
        numpy_kernel = ProjectionKernel(est.spectrum_, d, A.dtype, backend="numpy")
        t_numpy = best_time(lambda numpy_kernel=numpy_kernel, A=A: numpy_kernel(A), repeat)
        rows.append(
            {
                "dtype": np.dtype(dtype).name,
                "n": n,
                "d": d,
                "m": m,
                "read_objects_per_s": m / t_read,
                "projection_objects_per_s": m / t_proj,
                "restricted_objects_per_s": m / t_rr,
                "projection_over_read": t_read / t_proj,
                "restricted_over_read": t_read / t_rr,
                "restricted_over_projection": t_proj / t_rr,
                "numpy_projection_kernel_over_read": t_read / t_numpy,
                "backend": est.model_.kernel(d, A.dtype).backend,
                "isa": projection._native.isa() if projection._native is not None else None,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--m", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    rows = run(args.n, args.d, args.m, args.repeat)
    print(f"projection kernel: {rows[0]['backend']}" + (f" ({rows[0]['isa']})" if rows[0]["isa"] else ""))
    print(f"{'dtype':8} {'read M/s':>9} {'proj M/s':>9} {'RR M/s':>8} {'proj/read':>10} {'RR/read':>8} {'RR/proj':>8}"
          f" {'numpy proj/read':>16}")
    for r in rows:
        print(
            f"{r['dtype']:8} {r['read_objects_per_s'] / 1e6:9.2f} {r['projection_objects_per_s'] / 1e6:9.2f} "
            f"{r['restricted_objects_per_s'] / 1e6:8.2f} {r['projection_over_read']:10.2f} "
            f"{r['restricted_over_read']:8.2f} {r['restricted_over_projection']:8.2f}"
            f" {r['numpy_projection_kernel_over_read']:16.2f}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
