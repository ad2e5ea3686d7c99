"""What the radius costs on the hot path: placing a batch with and without it, as a ratio (docs/math.md §9).

    python -m benchmarks.bench_radius [--rows 50000] [--landmarks 100,200,500] [--dims 2,10] [--repeat 5]

A model is fitted on Gaussian points in R^(2d) with ``n_landmarks`` of
N = n + 1000 objects (so that it has a calibration); a batch of ``--rows``
rows (float32 and float64) is placed by projection with the calibration and
with the same model stripped of it (``with_radius_calibration(None)``). The
table gives both times per row and their ratio, measured in the same run
(best of ``--repeat``), and the radius alone (``RadiusCalibration.radius``).
The radius is one (m, n)·(n, d(B + 1)) product on the rows' squares and a
row minimum: vectorised, no per-object Python.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from streamembed import LandmarkMDS

    from benchmarks.timing import best_time, euclidean

    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--landmarks", default="100,200,500")
    p.add_argument("--dims", default="2,10")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.rows} rows per batch")
    print("| n | d | dtype | projection µs/row | projection + radius µs/row | ratio | radius alone µs/row |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for n in (int(x) for x in args.landmarks.split(",")):
        for d in (int(x) for x in args.dims.split(",")):
            X = rng.standard_normal((n + 1000, 2 * d))
            est = LandmarkMDS(n_components=d, n_landmarks=n).fit(euclidean(X, X))
            L = X[est.landmark_indices_]
            with_r = est.model_
            cal = with_r.radius_calibration
            assert cal is not None
            without = with_r.with_radius_calibration(None)
            Z = rng.standard_normal((args.rows, 2 * d))
            for dtype in (np.float32, np.float64):
                A = np.ascontiguousarray(euclidean(Z, L), dtype=dtype)
                t_bare = best_time(lambda m=without, a=A: m.place(a), args.repeat)
                t_full = best_time(lambda m=with_r, a=A: m.place(a), args.repeat)
                t_rad = best_time(lambda c=cal, a=A: c.radius(a, "projection"), args.repeat)
                us = 1e6 / args.rows
                print(f"| {n} | {d} | {np.dtype(dtype).name} | {t_bare * us:.3f} | {t_full * us:.3f} | "
                      f"{t_full / t_bare:.2f} | {t_rad * us:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
