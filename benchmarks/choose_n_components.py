"""Which d does ``GridSearchCV`` over ``n_components`` pick, per candidate score? (``LandmarkMDS.score``)

Candidates, each scoring held-out objects (test × train dissimilarities) against a map fitted on the
training objects (train × train), mean over shuffled K folds:

- ``ppca``: the held-out log-likelihood under probabilistic PCA of the landmark kernel (``core.fit.likelihood``,
  docs/math.md §4.7; ``LandmarkMDS.score``);
- ``ppca_n1``: the same with the ambient dimension n − 1 instead of the kernel's rank r;
- ``energy``: the share of energy the map explains (``explained_energy``, the score before);
- ``trust``: held-out trustworthiness (k = 10) of the map: each test object's nearest landmarks on the map
  against its nearest landmarks by dissimilarity (Venna & Kaski);
- for feature datasets, ``PCA.score`` of scikit-learn on the features (the same model as ``ppca`` for Euclidean
  distances) and Minka's ``PCA(n_components="mle")`` fitted on all objects, as references.

Datasets with a known dimension: ``flat3`` (a 3-D subspace of R¹⁰ plus isotropic noise), ``curved3`` (a curved
3-D manifold in R¹⁰ plus noise: 3 intrinsic, more linear dimensions), ``swissroll10`` (the 2-D swiss roll in R³
plus 7 noise dimensions; ``swissroll10-isomap``: through geodesic distances, 10 neighbours), and the real
scikit-learn sets digits, iris, wine, breast_cancer, and the stdlib-docstring edit distances.

    python3 -m benchmarks.choose_n_components [--datasets flat3,digits] [--grid 1,2,...] [--n 600] [--folds 5]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.spatial.distance import cdist


from streamembed import LandmarkMDS
from streamembed.core.fit.likelihood import ppca_loglik
from benchmarks.datasets import load_dataset

#: swissroll10-isomap is not in the default run: each geodesic fit calibrates its non-Euclidean flag with ~50
#: eigendecompositions (core.monitor.calibration), minutes per fold on this machine.
DEFAULT = ("flat3", "curved3", "swissroll10", "digits", "iris", "wine", "breast_cancer", "stdlib_docstrings")


def synthetic(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """(D (n, n), X (n, p) or None) of the synthetic datasets with a known dimension."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    if name == "flat3":
        U = rng.uniform(-1, 1, size=(n, 3)) * np.array([3.0, 2.0, 1.5])
        X = np.hstack([U, np.zeros((n, 7))]) @ Q.T + 0.1 * rng.normal(size=(n, 10))
    elif name == "curved3":
        U = rng.uniform(-1, 1, size=(n, 3))
        core = np.column_stack([2 * U[:, 0], 2 * U[:, 1], 2 * U[:, 2], 0.6 * np.sin(2 * U[:, 0]),
                                0.4 * U[:, 1] * U[:, 2]])
        X = np.hstack([core, np.zeros((n, 5))]) @ Q.T + 0.05 * rng.normal(size=(n, 10))
    elif name.startswith("swissroll10"):
        from sklearn.datasets import make_swiss_roll

        S, _ = make_swiss_roll(n, noise=0.2, random_state=seed)
        X = np.hstack([S, 0.5 * rng.normal(size=(n, 7))])
    else:
        raise KeyError(name)
    return cdist(X, X), X


def data(name: str, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    if name in ("flat3", "curved3", "swissroll10", "swissroll10-isomap"):
        return synthetic(name, n)
    ds = load_dataset(name)
    D = ds.dissimilarities()
    idx = np.linspace(0, D.shape[0] - 1, min(n, D.shape[0])).round().astype(int)
    return D[np.ix_(idx, idx)], None if ds.X is None else ds.X[idx]


def trust(est: LandmarkMDS, A: np.ndarray, k: int = 10) -> float:
    """Held-out trustworthiness: test objects' k nearest landmarks on the map vs by dissimilarity."""
    Y = est.transform(A)
    X = est.embedding_
    n = X.shape[0]
    rank_in = np.argsort(np.argsort(A, axis=1), axis=1)  # rank of each landmark by dissimilarity
    near_map = np.argsort(cdist(Y, X), axis=1)[:, :k]
    r = np.take_along_axis(rank_in, near_map, axis=1)
    penalty = np.maximum(r - k + 1, 0).sum()  # ranks 0..k-1 are the true k nearest
    m = A.shape[0]
    return float(1.0 - 2.0 / (m * k * (2 * n - 3 * k - 1)) * penalty)


def ppca_n1(est: LandmarkMDS, A: np.ndarray) -> float:
    model = est.model_
    core, _ = model.core_dissimilarities(A)
    y_r, beta = model.project_r(core)
    d = int(model.n_components)
    y = y_r[:, :d]
    e = beta - np.einsum("ij,ij->i", y, y)
    n = model.n_landmarks
    lam = np.concatenate([model.spectrum.eigenvalues, np.zeros(max(n - 1 - model.spectrum.eigenvalues.size, 0))])
    lam = np.maximum(lam, 1e-300)
    return float(ppca_loglik(y, e, lam, n).mean())


def cv_scores(D: np.ndarray, X: np.ndarray | None, grid: list[int], folds: int, geodesic: int | None) -> dict:
    from sklearn.model_selection import KFold

    kf = KFold(folds, shuffle=True, random_state=0)
    out: dict[str, np.ndarray] = {k: np.zeros(len(grid)) for k in ("ppca", "ppca_n1", "energy", "trust", "pca")}
    for train, test in kf.split(D):
        for gi, d in enumerate(grid):
            est = LandmarkMDS(n_components=d, geodesic_neighbors=geodesic)
            try:
                est.fit(D[np.ix_(train, train)])
            except ValueError:
                for scores in out.values():
                    scores[gi] = np.nan
                continue
            A = D[np.ix_(test, train)]
            out["ppca"][gi] += est.score(A) / folds
            out["ppca_n1"][gi] += ppca_n1(est, A) / folds
            out["energy"][gi] += est.explained_energy(A) / folds
            out["trust"][gi] += trust(est, A) / folds
            if X is not None and geodesic is None:
                from sklearn.decomposition import PCA

                out["pca"][gi] += PCA(d).fit(X[train]).score(X[test]) / folds
    if X is None or geodesic is not None:
        del out["pca"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DEFAULT))
    ap.add_argument("--grid", default="1,2,3,4,5,6,8,10,12,16")
    ap.add_argument("--n", type=int, default=600, help="objects per dataset (evenly spaced subset of real sets)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--details", action="store_true", help="print every score curve")
    args = ap.parse_args(argv)
    grid = [int(x) for x in args.grid.split(",")]
    warnings.simplefilter("ignore")
    print(f"grid d = {grid}; {args.folds}-fold shuffled CV; chosen d per candidate (argmax of the mean held-out "
          f"score)\n")
    print("| dataset | n | known dim | ppca (score) | ppca, ambient n−1 | energy | trust | PCA.score (features) | "
          "PCA mle | time s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    known = {"flat3": "3", "curved3": "3 (5 linear)", "swissroll10": "2 (3 linear)", "swissroll10-isomap": "2"}
    curves = []
    for name in args.datasets.split(","):
        t0 = time.perf_counter()
        D, X = data(name, args.n)
        geo = 10 if name.endswith("-isomap") else None
        sc = cv_scores(D, X, grid, args.folds, geo)

        def pick(key: str, sc: dict = sc) -> str:
            if key not in sc:
                return "—"
            v = sc[key]
            return str(grid[int(np.nanargmax(v))]) if np.isfinite(v).any() else "—"

        mle = "—"
        if X is not None and geo is None:
            from sklearn.decomposition import PCA

            mle = str(PCA(n_components="mle").fit(X).n_components_)
        print(f"| {name} | {D.shape[0]} | {known.get(name, '—')} | {pick('ppca')} | {pick('ppca_n1')} | "
              f"{pick('energy')} | {pick('trust')} | {pick('pca')} | {mle} | {time.perf_counter() - t0:.0f} |",
              flush=True)
        curves.append((name, sc))
    if args.details:
        for name, sc in curves:
            print(f"\n{name}:")
            for key, v in sc.items():
                print(f"  {key:8s} " + " ".join(f"{x:9.4g}" for x in v))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
