"""Roy (2021)'s Tables 1 and 2 (normalised trustability and tractable consistency indices) beside ours.

    nice -n 10 python -m benchmarks.roy_tables [--datasets S1,S2,S3,S4,WBCD] [--centres 10] [--d 2]
        [--methods pca,kpca,cmds,isomap,lle,le,lsdr,landmarks,landmarks-maxmin,skeleton] [--json out.json]

For each dataset and method: n⁻¹TI of the method asked for d = p outputs (Table 1), the relative TI and
n⁻¹TCI at d (Table 2; Roy does not state d: 2 here), the number of TCI candidates (M farthest-point
centres × p coordinates with ``--centres M``; ``--centres 0``: all n·p), the max / median of the
candidates' S (how much the maximum stands out) and the seconds spent. The indices are
those of ``streamembed.consistency_index.evaluate_indices`` (docs/math.md §8). Progress goes to stderr, Markdown
tables to stdout.

Our choices where the paper gives none (n = 200 for S1–S4, as the paper says):

* S1: three clusters of 10-D Gaussians N(μ_k, I), μ_k = 4·e_k, sizes 67, 67, 66 (seed 0).
* S2: uniform on [0, 1]^10 (seed 0).
* S3: directions uniform on the unit sphere in R³, radius 1 + N(0, 0.05²) (seed 0).
* S4: scikit-learn's ``make_swiss_roll`` with noise 0.5 (seed 0).
* WBCD: scikit-learn's breast cancer data, the 30 raw features of 569 patients (Roy's 32 attributes less
  the id and the class).
* kPCA: R kernlab's ``kpca`` defaults (Gaussian kernel exp(−0.1‖x − y‖²), its output scaling: the centred
  kernel times the eigenvectors of K_c/n divided by the square roots of their eigenvalues).
* LLE: scikit-learn, max(12, p + 2) neighbours, dense solver, columns rescaled to unit variance (Roy's
  LLE values near p suggest unit-variance outputs). LE: scikit-learn's ``SpectralEmbedding``, 10
  neighbours, its own scale. Isomap: scikit-learn, 10 neighbours.
* LSDR: ``core.fit.skeleton.lsdr_embedding`` (α = 0.95, k = 3); p ≤ 6 only. "skeleton": the estimator's
  ``landmark_selection="skeleton"`` map with arrivals projected (no kernel placement).
* landmarks: ``LandmarkMDS(n_landmarks=50)`` (max-variance, seed 0) and its maxmin variant, projection.
* HLLE, t-SNE and UMAP are not run: UMAP is no dependency, and t-SNE's and HLLE's refits (one per
  candidate) would not fit in minutes; their paper values are listed for reference.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np

from streamembed.consistency_index import landmark_pipeline
from streamembed.quality import cmds_pipeline
from streamembed.core.errors import InputError

#: Roy (2021), Table 1 (n⁻¹TI) and Table 2 (n⁻¹TCI): dataset -> method -> value (None: "NA").
PAPER_COLUMNS = ("PCA", "kPCA", "LLE", "HLLE", "LE", "tSNE", "UMAP", "LSDR")
PAPER_TI = {
    "S1": (0, 138.727, 10.112, 0.084, 0.083, 128.366, 91.807, 0.995),
    "S2": (0, 168.667, 9.997, 0.822, 0.018, 32.007, 4.885, 1.037),
    "S3": (0, 32.781, 2.991, 0.011, 0.014, 4.917, 11.701, 0.012),
    "S4": (0, 112.678, 3, 0.021, 0.034, 142.131, 60.023, 0.159),
    "WBCD": (0, 30.867, 30.021, 33.309, 0.052, 39.205, 64.206, 1.746),
}
PAPER_TCI = {
    "S1": (58434.22, 9.31, 232.511, 203.115, 153.313, 23.963, 11.818, 6.93),
    "S2": (143.233, 2.946, 6.305, 8.818, 8.003, 3.116, 2.291, 2.445),
    "S3": (67.414, 10.065, 15.337, 29.212, 29.252, 13.535, 2.904, 4.196),
    "S4": (72.212, 5.193, 34.611, 31.995, 27.212, 3.998, 3.184, 1.008),
    "WBCD": (1.234e6, 3.214, 48.913, 74.227, 70.212, 2.105, 2.816, None),
}
#: Our method -> the paper's column it is compared with.
PAPER_OF = {"pca": "PCA", "kpca": "kPCA", "lle": "LLE", "le": "LE", "lsdr": "LSDR"}
DATASETS = ("S1", "S2", "S3", "S4", "WBCD")


def load(name: str) -> np.ndarray:
    """The dataset's features (n, p) (module docstring)."""
    rng = np.random.default_rng(0)
    if name == "S1":
        sizes = (67, 67, 66)
        return np.vstack([rng.normal(size=(m, 10)) + 4.0 * np.eye(10)[k] for k, m in enumerate(sizes)])
    if name == "S2":
        return rng.uniform(size=(200, 10))
    if name == "S3":
        Z = rng.normal(size=(200, 3))
        return Z / np.linalg.norm(Z, axis=1, keepdims=True) * (1.0 + 0.05 * rng.normal(size=(200, 1)))
    if name == "S4":
        from sklearn.datasets import make_swiss_roll

        return np.asarray(make_swiss_roll(200, noise=0.5, random_state=0)[0])
    if name == "WBCD":
        from sklearn.datasets import load_breast_cancer

        return np.asarray(load_breast_cancer().data, dtype=np.float64)
    raise SystemExit(f"unknown dataset {name!r}; choose among {', '.join(DATASETS)}")


def _pca(X: np.ndarray, d: int) -> np.ndarray:
    Xt = X - X.mean(axis=0)
    return Xt @ np.linalg.svd(Xt, full_matrices=False)[2][:d].T


def _kpca(X: np.ndarray, d: int) -> np.ndarray:
    """R kernlab's kpca(x, kernel = "rbfdot", kpar = list(sigma = 0.1), features = d)$rotated."""
    import scipy.linalg
    import scipy.spatial.distance

    n = X.shape[0]
    K = np.exp(-0.1 * scipy.spatial.distance.cdist(X, X, "sqeuclidean"))
    Kc = K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()
    w, V = scipy.linalg.eigh(Kc / n, subset_by_index=[n - d, n - 1])
    w, V = w[::-1], V[:, ::-1]
    if (w <= 1e-12 * w[0]).any():
        raise InputError(f"kernel PCA has fewer than d = {d} positive eigenvalues")
    return Kc @ (V / np.sqrt(w))


def _sklearn(make: Callable[[int, int], object],
             unit_variance: bool = False) -> Callable[[np.ndarray, int], np.ndarray]:
    def run(X: np.ndarray, d: int) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Y = np.asarray(make(d, X.shape[1]).fit_transform(X), dtype=np.float64)  # type: ignore[attr-defined]
        return Y / Y.std(axis=0) if unit_variance else Y

    return run


def _lsdr(X: np.ndarray, d: int) -> np.ndarray:
    from streamembed.core.fit.skeleton import lsdr_embedding

    return lsdr_embedding(X, d).Y


def methods() -> dict[str, Callable[[np.ndarray, int], np.ndarray]]:
    from sklearn.manifold import Isomap, LocallyLinearEmbedding, SpectralEmbedding

    return {
        "pca": _pca,
        "kpca": _kpca,
        "cmds": cmds_pipeline(),
        "isomap": _sklearn(lambda d, p: Isomap(n_neighbors=10, n_components=d)),
        "lle": _sklearn(lambda d, p: LocallyLinearEmbedding(n_neighbors=max(12, p + 2), n_components=d,
                                                            eigen_solver="dense", random_state=0), unit_variance=True),
        "le": _sklearn(lambda d, p: SpectralEmbedding(n_components=d, n_neighbors=10, random_state=0)),
        "lsdr": _lsdr,
        "landmarks": landmark_pipeline(n_landmarks=50),
        "landmarks-maxmin": landmark_pipeline(n_landmarks=50, landmark_selection="maxmin"),
        "skeleton": landmark_pipeline(landmark_selection="skeleton"),
    }


def run_one(X: np.ndarray, pipeline: Callable[[np.ndarray, int], np.ndarray], d: int,
            centres: int | None) -> dict[str, object]:
    """``evaluate_indices``' block (computed by the same functions, keeping the candidates' scores), the max / median
    of the candidates' S and the seconds, or the reason the method cannot run."""
    from streamembed.consistency_index import consistency_index
    from streamembed.trustability import relative_trustability, trustability_index

    n, p = X.shape
    t0 = time.perf_counter()
    try:
        Yd = pipeline(X, d)
        tci = consistency_index(X, lambda Z: pipeline(Z, d), centres=centres, Y=Yd)
    except (InputError, ValueError) as exc:
        return {"error": str(exc).split(":")[0][:90], "seconds": time.perf_counter() - t0}
    try:
        ti_p: float | None = trustability_index(X, pipeline(X, p)) / n
    except (InputError, ValueError):
        ti_p = None
    med = float(np.median(tci.scores))
    return {"trustability": ti_p, "trustability_d": trustability_index(X, Yd) / n,
            "relative_trustability": relative_trustability(X, Yd), "consistency": tci.value / n,
            "consistency_argmax": list(tci.argmax), "consistency_candidates": tci.candidates,
            "max_over_median": float(tci.value / med) if med > 0 else None, "seconds": time.perf_counter() - t0}


def _fmt(v: object) -> str:
    if v is None:
        return "NA"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"
    return str(v)


def tables(results: dict[str, dict[str, dict[str, object]]], d: int) -> str:
    """Markdown: Table 1 (ours / paper), Table 2 (ours / paper), then relative TI, candidates and times."""
    names = list(next(iter(results.values())))
    out = []
    for title, key, paper in (("Table 1: n⁻¹TI at d = p (ours / Roy's)", "trustability", PAPER_TI),
                              (f"Table 2: n⁻¹TCI at d = {d} (ours / Roy's)", "consistency", PAPER_TCI)):
        out += [f"#### {title}", "", "| dataset | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
        for ds, row in results.items():
            cells = []
            for m in names:
                r = row[m]
                ours = f"({_cell_error(str(r['error']))})" if "error" in r else _fmt(r[key])
                if m in PAPER_OF:
                    ours += f" / {_fmt(paper[ds][PAPER_COLUMNS.index(PAPER_OF[m])])}"
                cells.append(ours)
            out.append(f"| {ds} | " + " | ".join(cells) + " |")
        out.append("")
    out += [f"#### Relative TI at d = {d}; TCI candidates, max/median of S over them, seconds per method", "",
            "| dataset | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for ds, row in results.items():
        cells = []
        for m in names:
            r = row[m]
            cells.append("—" if "error" in r else f"{_fmt(r['relative_trustability'])}; "
                         f"{r['consistency_candidates']}, ×{_fmt(r['max_over_median'])}, {r['seconds']:.0f} s")
        out.append(f"| {ds} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Roy's other columns, for reference (n⁻¹TI; n⁻¹TCI): " + "; ".join(
        f"{ds}: HLLE {_fmt(PAPER_TI[ds][3])}, tSNE {_fmt(PAPER_TI[ds][5])}, UMAP {_fmt(PAPER_TI[ds][6])}; "
        f"{_fmt(PAPER_TCI[ds][3])}, {_fmt(PAPER_TCI[ds][5])}, {_fmt(PAPER_TCI[ds][6])}" for ds in results))
    return "\n".join(out)


def _cell_error(error: str) -> str:
    return "p > 6" if "Delaunay" in error else error[:60]


def timing(centres: int, d: int) -> str:
    """Seconds of ``evaluate_indices`` on breast cancer (569 × 30) for the pipelines ``evaluate`` runs: the full
    classical MDS and a landmark map, with M centres, and the refit time that all n·p candidates would take;
    PCA (the cheapest refit) with all of them. The estimate scales the measured time per candidate."""
    from streamembed.consistency_index import evaluate_indices

    X = load("WBCD")
    n, p = X.shape
    rows = ["| pipeline | one fit (s) | candidates | evaluate_indices (s) | all n·p = "
            f"{n * p} candidates (s) |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, pipe, M in (("full classical MDS", cmds_pipeline(), centres),
                          ("LandmarkMDS(n_landmarks=100)", landmark_pipeline(n_landmarks=100), centres),
                          ("PCA", _pca, 0)):
        reps = []
        for _ in range(3):
            t0 = time.perf_counter()
            pipe(X, d)
            reps.append(time.perf_counter() - t0)
        one = float(np.median(reps))
        t0 = time.perf_counter()
        block = evaluate_indices(X, pipe, d, centres=M or None)
        secs = time.perf_counter() - t0
        print(f"timing {name}: {block}, {secs:.1f} s", file=sys.stderr, flush=True)
        full = secs if not M else secs / block["consistency_candidates"] * n * p
        rows.append(f"| {name} | {one:.3f} | {block['consistency_candidates']} | {secs:.1f} | "
                    f"{full:.0f}{'' if not M else ' (estimated)'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--methods", default=",".join(methods()))
    ap.add_argument("--centres", type=int, default=10, help="M farthest-point centres of the TCI (0: all n·p)")
    ap.add_argument("--d", type=int, default=2, help="the output dimension of Table 2 and the relative TI")
    ap.add_argument("--json", metavar="PATH", help="also write every value as JSON")
    ap.add_argument("--timing", action="store_true", help="only time evaluate_indices on breast cancer (569 × 30)")
    args = ap.parse_args(argv)
    if args.timing:
        print(timing(args.centres, args.d))
        return 0
    all_methods = methods()
    chosen = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in all_methods]
    if unknown:
        raise SystemExit(f"unknown methods {unknown}; choose among {', '.join(all_methods)}")
    results: dict[str, dict[str, dict[str, object]]] = {}
    t_all = time.perf_counter()
    for ds in [s.strip() for s in args.datasets.split(",") if s.strip()]:
        X = load(ds)
        results[ds] = {}
        for m in chosen:
            r = run_one(X, all_methods[m], args.d, args.centres or None)
            results[ds][m] = r
            print(f"{ds} {m}: {r}", file=sys.stderr, flush=True)
    print(tables(results, args.d))
    print(f"\n(centres {args.centres or 'all'}, d = {args.d}; {time.perf_counter() - t_all:.0f} s in all)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
