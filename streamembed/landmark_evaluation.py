"""How close each landmark choice comes to a full classical MDS of *your* data (``streamembed evaluate``).

For an (N, N) dissimilarity matrix, or N feature vectors with a metric,
``evaluate_landmarks`` fits a landmark map for every selection × landmark
count × seed, places a reference set of objects with every method, and
compares the placements with the classical MDS of the reference set itself
(docs/landmarks.md):

* **Procrustes**: RMS distance after the best rotation/reflection and
  translation, as a share of the full map's RMS radius (0 = the same map;
  ``quality.procrustes_share``);
* **trustworthiness** (k nearest neighbours, ``quality.trustworthiness_continuity``),
  against the full map's own;
* **Spearman** ρ of map distances with the input dissimilarities.

The reference set is every object when N ≤ ``reference_objects``, else a
seeded random sample of that many (its full classical MDS costs O(N²)
memory); landmarks are always chosen among all N objects. Medians and
ranges are over the seeds. ``LandmarkEvaluation.recommendation`` names the
setting with the lowest median Procrustes share.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np
import scipy.spatial.distance

from .core.errors import InputError
from .core.landmarks import LANDMARK_SELECTIONS, select_landmarks
from .estimator import LandmarkMDS
from .quality import classical_mds, procrustes_share, spearman_agreement, trustworthiness_continuity

__all__ = ["LandmarkScore", "LandmarkEvaluation", "evaluate_landmarks", "REFERENCE_OBJECTS"]

#: Largest reference set whose full classical MDS is computed (a random sample above).
REFERENCE_OBJECTS = 3000


@dataclass(frozen=True)
class LandmarkScore:
    """One selection × landmark count × method, over the seeds: (median, min, max) of each figure."""

    selection: str
    n_landmarks: int
    method: str
    procrustes: tuple[float, float, float]
    trustworthiness: tuple[float, float, float]
    spearman: tuple[float, float, float]
    seconds: float


@dataclass
class LandmarkEvaluation:
    """The table of ``evaluate_landmarks`` and the full classical MDS it was measured against."""

    n_objects: int
    n_reference: int
    n_components: int
    knn: int
    seeds: int
    reference_trustworthiness: float
    reference_spearman: float
    rows: list[LandmarkScore] = field(default_factory=list)

    def best(self, n_landmarks: int | None = None) -> LandmarkScore:
        """The row with the lowest median Procrustes share (at ``n_landmarks`` when given)."""
        rows = [r for r in self.rows if n_landmarks is None or r.n_landmarks == n_landmarks]
        if not rows:
            raise InputError(f"no rows with {n_landmarks} landmarks")
        return min(rows, key=lambda r: (r.procrustes[0], -r.trustworthiness[0]))

    def recommendation(self) -> str:
        """One line: the best setting at the largest landmark count, and what max–min would give there."""
        n = max(r.n_landmarks for r in self.rows)
        b = self.best(n)
        gap = self.reference_trustworthiness - b.trustworthiness[0]
        line = (f"{n} landmarks by {b.selection} ({b.method}): Procrustes {b.procrustes[0]:.2f} of the full map's "
                f"radius, trustworthiness {b.trustworthiness[0]:.3f} ({'within' if gap <= 0.02 else 'short by'} "
                f"{abs(gap):.3f} of the full classical MDS's {self.reference_trustworthiness:.3f})")
        mm = [r for r in self.rows if r.n_landmarks == n and r.selection == "maxmin" and r.method == b.method]
        if mm and b.selection != "maxmin":
            line += f"; max–min would give {mm[0].procrustes[0]:.2f}"
        return line

    def to_markdown(self) -> str:
        """The table (median [min–max] over seeds)."""
        def cell(t: tuple[float, float, float], digits: int) -> str:
            return f"{t[0]:.{digits}f} [{t[1]:.{digits}f}–{t[2]:.{digits}f}]"

        lines = [f"full classical MDS of {self.n_reference} objects (of {self.n_objects}), d = {self.n_components}: "
                 f"trustworthiness (k = {self.knn}) {self.reference_trustworthiness:.3f}, Spearman "
                 f"{self.reference_spearman:.3f}; median [min–max] over {self.seeds} seeds", "",
                 "| landmarks | selection | method | Procrustes to full CMDS | trustworthiness | Spearman |",
                 "| ---: | --- | --- | ---: | ---: | ---: |"]
        for r in self.rows:
            lines.append(f"| {r.n_landmarks} | {r.selection} | {r.method} | {cell(r.procrustes, 3)} | "
                         f"{cell(r.trustworthiness, 3)} | {cell(r.spearman, 3)} |")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)


def _summary(values: Sequence[float]) -> tuple[float, float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(np.median(a)), float(a.min()), float(a.max())


def evaluate_landmarks(
    D: np.ndarray | None = None,
    X: np.ndarray | None = None,
    *,
    metric: str = "euclidean",
    n_landmarks: Sequence[int] = (100, 200),
    selections: Sequence[str] = LANDMARK_SELECTIONS,
    methods: Sequence[str] = ("projection", "restricted"),
    seeds: int = 5,
    n_components: int = 2,
    knn: int = 10,
    reference_objects: int = REFERENCE_OBJECTS,
    progress: Callable[[str], None] | None = None,
) -> LandmarkEvaluation:
    """The module docstring's table for dissimilarities D (N, N) or features X (N, p) with a scipy ``metric``.

    Landmark counts above N // 2 are skipped (a map of most objects says little about landmarks).
    ``progress`` receives one line per selection and count as it finishes.
    Raises:
        InputError: not exactly one of D and X, a non-square D, an unknown selection, or too few objects.
    """
    if (D is None) == (X is None):
        raise InputError("evaluate_landmarks needs exactly one of D (dissimilarities) or X (features)")
    bad = [s for s in selections if s not in LANDMARK_SELECTIONS]
    if bad:
        raise InputError(f"unknown selections {bad}; choose from {LANDMARK_SELECTIONS}")
    M = np.asarray(D if D is not None else X, dtype=np.float64)
    N = M.shape[0]
    if D is not None and M.shape != (N, N):
        raise InputError(f"dissimilarities must be square, got {M.shape}")
    counts = sorted({int(n) for n in n_landmarks if n_components + 2 <= int(n) <= N // 2})
    if not counts:
        raise InputError(f"no landmark count in {list(n_landmarks)} fits {N} objects (between d + 2 and N / 2)")
    if N <= reference_objects:
        ref = np.arange(N)
    else:
        ref = np.sort(np.random.default_rng(0).choice(N, size=reference_objects, replace=False))
    D_ref = M[np.ix_(ref, ref)] if D is not None else scipy.spatial.distance.squareform(
        scipy.spatial.distance.pdist(M[ref], metric=metric))
    Y_ref = classical_mds(D_ref, n_components)
    out = LandmarkEvaluation(N, ref.size, n_components, knn, seeds,
                             trustworthiness_continuity(D_ref, Y_ref, knn)[0], spearman_agreement(D_ref, Y_ref))
    for n in counts:
        for selection in selections:
            t0 = time.perf_counter()
            scores: dict[str, list[tuple[float, float, float]]] = {m: [] for m in methods}
            for seed in range(seeds if selection != "maxmin" else min(seeds, 3)):
                L = select_landmarks(selection, n, D=M if D is not None else None, X=M if X is not None else None,
                                     metric=metric, seed=seed, n_components=n_components)
                est = LandmarkMDS(n_components=n_components, random_state=seed)
                if D is not None:
                    est.fit(M[np.ix_(L, L)])
                    A = M[np.ix_(ref, L)]
                else:
                    est.fit_features(M[L], metric=metric)
                    A = scipy.spatial.distance.cdist(M[ref], M[L], metric=metric)
                for method in methods:
                    Y = est.embed(A, method=method).y
                    scores[method].append((procrustes_share(Y, Y_ref), trustworthiness_continuity(D_ref, Y, knn)[0],
                                           spearman_agreement(D_ref, Y)))
            seconds = time.perf_counter() - t0
            for method, rows in scores.items():
                a = np.asarray(rows)
                out.rows.append(LandmarkScore(selection, n, method, _summary(a[:, 0]), _summary(a[:, 1]),
                                              _summary(a[:, 2]), seconds))
            if progress is not None:
                p = scores[methods[0]]
                progress(f"{n} landmarks, {selection}: Procrustes {np.median([x[0] for x in p]):.3f}, "
                         f"trustworthiness {np.median([x[1] for x in p]):.3f} ({seconds:.1f} s)")
    return out

