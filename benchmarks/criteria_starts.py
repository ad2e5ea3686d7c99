"""Do stress placements reach the global minimum? Multi-start brute force on real data (docs/math.md §3.4).

    python -m benchmarks.criteria_starts [--objects 100] [--landmarks 50 100] [--dims 2 3] [--seed 0]

For each real dataset (digits, wine, breast_cancer: Euclidean; stdlib_docstrings:
normalised edit distance), random landmarks and random other objects as arrivals,
each arrival is placed by

- ``stress`` on the classical map (raw stress), and
- ``sammon`` on a Sammon map (Sammon's criterion, weights 1/δ),

from the projection alone (``starts=False``, the former rule) and with the
further ring starts (the default), and compared with a brute force that knows
nothing of the solver: a grid over a box holding every landmark and the
object's largest dissimilarity (201² points in d = 2, 41³ in d = 3), its 8
best points polished by BFGS. Printed per case: how often each rule reaches
the brute-force minimum (within 1e-7 relative), the share flagged
``possibly_nonglobal`` (several certified minima seen and the lowest reached
by one descent only), how many flagged and unflagged rows are not global, the
share with several minima, and the time per object of each rule (noisy on a
shared machine).

Not a test: it takes minutes. The figures quoted in ``core/place/criteria/solve.py`` and
docs/math.md §3.4 come from it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.optimize


from streamembed import LandmarkMDS
from streamembed.core.place.criteria.solve import solve_sammon, solve_stress
from streamembed.core.place.criteria.stress import stress_objective
from benchmarks.datasets import DatasetUnavailable, load_dataset

DATASETS = ("digits", "wine", "breast_cancer", "stdlib_docstrings")


def brute_force(X: np.ndarray, delta: np.ndarray, w: np.ndarray | None) -> float:
    """The lowest weighted stress found by a dense grid and 8 BFGS polishes (independent of the solver)."""
    d = X.shape[1]
    radius = float(np.abs(X).max() + 1.5 * delta.max() + 1e-12)
    g = np.linspace(-radius, radius, {2: 201, 3: 41}[d])
    G = np.stack(np.meshgrid(*[g] * d), axis=-1).reshape(-1, d)
    wt = np.ones_like(delta) if w is None else w
    values = np.concatenate([(wt * np.square(np.sqrt(np.square(G[s:s + 4096, None, :] - X[None]).sum(-1))
                                             - delta)).sum(1)
                             for s in range(0, G.shape[0], 4096)])
    best = float(values.min())

    def f(y: np.ndarray) -> float:
        return float((wt * np.square(np.linalg.norm(y - X, axis=1) - delta)).sum())

    for start in G[np.argsort(values)[:8]]:
        best = min(best, float(scipy.optimize.minimize(f, start, method="BFGS", options={"gtol": 1e-11}).fun))
    return best


def run_case(name: str, D: np.ndarray, n: int, d: int, m: int, criterion: str, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    perm = rng.permutation(D.shape[0])
    L, Z = perm[:n], perm[n:n + m]
    est = LandmarkMDS(d, method="stress", landmark_map="sammon" if criterion == "sammon" else "cmds")
    est.fit(D[np.ix_(L, L)])
    X, A = est.model_.natural_embedding, D[np.ix_(Z, L)]
    y0 = est.model_.place(A).y if criterion == "stress" else np.zeros((m, d))
    if criterion == "sammon":
        from streamembed.core.fit.metric_map import map_start

        y0 = map_start(X, A, est.model_.spectrum.row_means)
    solve = solve_stress if criterion == "stress" else (lambda Y, X_, a, starts=True: solve_sammon(Y, X_, a)
                                                        if starts else _sammon_no_starts(Y, X_, a))
    t0 = time.perf_counter()
    one = solve(y0, X, A, starts=False)
    t1 = time.perf_counter()
    many = solve(y0, X, A, starts=True)
    t2 = time.perf_counter()
    w = None if criterion == "stress" else 1.0 / np.where(A > 0, A, np.inf)
    best = np.array([brute_force(X, A[i], None if w is None else w[i]) for i in range(m)])
    data = A if w is None else np.stack([A, w], axis=-1)
    f_one, f_many = stress_objective(one.y, X, data), stress_objective(many.y, X, data)
    glob = lambda f: f <= best + 1e-7 * (1 + best)  # noqa: E731
    flagged = many.possibly_nonglobal
    return {"dataset": name, "criterion": criterion, "n": n, "d": d, "m": m,
            "several_minima": float(many.multimodal.mean()),
            "global_projection_start": float(glob(f_one).mean()), "global_with_starts": float(glob(f_many).mean()),
            "flagged": float(flagged.mean()),
            "nonglobal_flagged": f"{int((~glob(f_many) & flagged).sum())}/{int(flagged.sum())}",
            "nonglobal_unflagged": f"{int((~glob(f_many) & ~flagged).sum())}/{int((~flagged).sum())}",
            "ms_per_object_projection_start": 1e3 * (t1 - t0) / m, "ms_per_object_with_starts": 1e3 * (t2 - t1) / m}


def _sammon_no_starts(Y0: np.ndarray, X: np.ndarray, A: np.ndarray):
    with np.errstate(divide="ignore"):
        w = np.where(A > 0, 1.0 / A, 0.0)
    return solve_stress(Y0, X, A, weights=w, starts=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=100)
    ap.add_argument("--landmarks", type=int, nargs="+", default=[50, 100])
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--criteria", nargs="+", default=["stress", "sammon"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cols = ["dataset", "criterion", "n", "d", "m", "global_projection_start", "global_with_starts", "flagged",
            "nonglobal_flagged", "nonglobal_unflagged", "several_minima",
            "ms_per_object_projection_start", "ms_per_object_with_starts"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for name in args.datasets:
        try:
            D = load_dataset(name).dissimilarities()
        except DatasetUnavailable as exc:
            print(f"{name}: skipped ({exc})")
            continue
        for d in args.dims:
            for n in args.landmarks:
                m = min(args.objects if d == 2 else max(args.objects // 2, 1), D.shape[0] - n)
                for criterion in args.criteria:
                    row = run_case(name, D, n, d, m, criterion, args.seed)
                    print("| " + " | ".join(f"{row[c]:.3g}" if isinstance(row[c], float) else str(row[c])
                                            for c in cols) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
