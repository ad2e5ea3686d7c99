"""Ordinal landmark maps against scikit-learn's non-metric SMACOF on real data (core/fit/ordinal_map.py, docs/math.md §3.6).

Both start from the same configuration (the classical MDS of the ranks, ``rank_start``) and run to a tight
tolerance; the table gives Kruskal's stress-1 of each final map by one formula (``kruskal_stress1``), their
relative difference, our sweeps and both wall times (one run each: repeat for timings).

    python3 -m benchmarks.nonmetric_vs_sklearn [--datasets iris,wine,stdlib_docstrings] [--n 150] [--d 2]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


from streamembed.core.fit.metric_map import refine_map
from streamembed.core.fit.ordinal_map import kruskal_stress1, rank_start
from benchmarks.datasets import load_dataset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="iris,wine,stdlib_docstrings")
    ap.add_argument("--n", type=int, default=150, help="objects per dataset (evenly spaced subset)")
    ap.add_argument("--d", type=int, default=2)
    args = ap.parse_args(argv)
    from sklearn.manifold import smacof

    warnings.simplefilter("ignore")
    print("| dataset | n | stress-1 (streamembed) | stress-1 (scikit-learn) | relative difference | sweeps | "
          "time s (ours) | time s (scikit-learn) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for name in args.datasets.split(","):
        D = load_dataset(name).dissimilarities()
        idx = np.linspace(0, D.shape[0] - 1, min(args.n, D.shape[0])).round().astype(int)
        D = D[np.ix_(idx, idx)]
        X0 = rank_start(D, args.d)
        t0 = time.perf_counter()
        ours = refine_map(X0, D, "nonmetric")
        t1 = time.perf_counter()
        Xs, _ = smacof(D, metric=False, n_components=args.d, init=X0, n_init=1, max_iter=100_000, eps=1e-12,
                       normalized_stress=True)
        t2 = time.perf_counter()
        theirs = kruskal_stress1(Xs, D)
        rel = (ours.criterion - theirs) / theirs
        worst = max(worst, abs(rel))
        print(f"| {name} | {D.shape[0]} | {ours.criterion:.5f} | {theirs:.5f} | {rel:+.1e} | {ours.iterations} | "
              f"{t1 - t0:.2f} | {t2 - t1:.2f} |", flush=True)
    print(f"\nLargest relative difference: {worst:.1e} (within 1 %: {'yes' if worst <= 0.01 else 'NO'})")
    return 0 if worst <= 0.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
