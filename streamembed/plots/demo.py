"""Both plots from a synthetic stream whose novel cluster drifts off the map (``streamembed plot demo``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .drift import plot_drift
from .map import plot_map


def novel_cluster_points(n: int = 800, dim: int = 10, offset: float = 8.0, novel_share: float = 0.2,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Four clusters in a 2-D plane of R^dim, plus a novel cluster off the plane that no landmark comes from.

    Returns ``(X, labels)``: X (n, dim) points, labels (n,) in 0..4; the first
    ``n - round(novel_share * n)`` rows (labels 0-3) are the old clusters
    (centres (±6, ±6), sd 1.5, exactly in the plane), the landmark pool, so the
    landmarks span exactly the plane. The novel cluster (label 4) sits
    ``offset`` units off the plane with unit-variance noise in every direction:
    its objects lie off the landmarks' span (k0 > 0, docs/math.md §4), the
    situation drift monitoring and restricted reconstruction are for
    (Trosset et al. 2025, §4-6).
    """
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    n_new = int(round(novel_share * n))
    centres = np.array([[6.0, 6.0], [-6.0, 6.0], [-6.0, -6.0], [6.0, -6.0]])
    labels_old = rng.integers(4, size=n - n_new)
    old = (centres[labels_old] + 1.5 * rng.normal(size=(n - n_new, 2))) @ Q[:, :2].T
    new_coords = rng.normal(size=(n_new, dim))
    new_coords[:, 2] += offset
    new = new_coords @ Q.T
    return np.vstack([old, new]), np.concatenate([labels_old, np.full(n_new, 4)])


def demo(outdir: str | os.PathLike, seed: int = 0) -> tuple[Path, Path]:
    """Both plots from a synthetic stream whose novel cluster drifts off the map (``novel_cluster_points``)."""
    from scipy.spatial.distance import pdist, squareform

    from ..core.refit.strategies import maxmin_select
    from ..estimator import LandmarkMDS

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    X, labels = novel_cluster_points(n=1200, seed=seed)
    D = squareform(pdist(X, metric="euclidean"))
    pool = np.flatnonzero(labels < 4)

    L = pool[maxmin_select(60, D=D[np.ix_(pool, pool)])]
    est = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)])
    rest = np.setdiff1d(np.arange(X.shape[0]), L)
    rng = np.random.default_rng(seed)
    old = rng.permutation(np.intersect1d(rest, pool))
    new = rng.permutation(np.setdiff1d(rest, pool))
    # A stream: old clusters only at first, then the novel cluster mixes in more and more.
    first = list(old[:300])
    mix = list(old[300:]) + list(new)
    rng.shuffle(mix)
    first += sorted(mix, key=lambda i: (i in set(old)) * rng.random() + (i not in set(old)) * rng.random() ** 0.5)
    stream = np.asarray(first)
    res = est.embed(D[np.ix_(stream, L)], k0_rows="all")
    map_path = plot_map(est, res.y, res.relative_unexplained, outdir / "map.png",
                        color_label="relative unexplained (1 - ||y||²/β)",
                        title="Novel cluster off the landmark map: colour = share of β the map does not explain")
    records = []
    window, refit_at = 60, 12
    version = 1
    for w, start in enumerate(range(0, stream.size - window + 1, window)):
        if w == refit_at:  # refit on old landmarks + everything seen so far (docs/math.md §5)
            seen = np.union1d(L, stream[:start])
            L = seen[maxmin_select(80, D=D[np.ix_(seen, seen)])]
            est = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)])
            version = 2
        rows = stream[start : start + window]
        _, b = est.residuals(D[np.ix_(rows, L)], k0_rows="all")
        records.append({"time": start + window, "trace_k0": b.trace_k0,
                        "kernel_distance_bound": b.kernel_distance_bound,
                        "gap_ratio": b.gap_ratio, "model_version": version})
    drift_path = plot_drift(records, outdir / "drift.png", thresholds={"gap_ratio": 1.0},
                            title="Residual kernel k0 over a stream with a novel cluster", time_label="objects seen")
    return map_path, drift_path
