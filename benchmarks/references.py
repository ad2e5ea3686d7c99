"""Full classical-MDS refits as references for out-of-sample placements.

A *refit reference* is classical MDS (docs/math.md §1, same d) of the landmarks
together with a group of held-out objects, for every group of a partition of
the held-out set. Three partitions answer three questions:

* groups of 1 (landmarks + one object): the refit that each single new object
  would cause. For one object the top eigenvector equation of the augmented
  kernel gives y_j ≈ √λ_j c_j / (λ_j - β), i.e. the restricted-reconstruction
  family y(t) of docs/math.md §3 with t ≈ -β, on the RR side of projection (t = 0):
  RR is the out-of-sample method built to approximate this refit (Trosset et al. 2025, §4).
* groups of k (landmarks + one block): the refit block RR approximates with
  the block's mutual dissimilarities (Trosset et al. 2025, §6).
* one group of all m held-out objects: "refit everything". When m is
  comparable to n the objects themselves shape the refit's d axes, and each
  object's refit coordinates are its projection onto them, so this reference
  favours projection-type placements.

Each map is compared with a reference after an orthogonal Procrustes
alignment (translation, no scaling) fitted on the landmarks (docs/math.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamembed.core.refit.procrustes import apply_alignment, orthogonal_procrustes_align
from streamembed.estimator import LandmarkMDS

__all__ = ["RefitGroup", "refit_reference", "reference_error"]


@dataclass(frozen=True)
class RefitGroup:
    """One refit: rows ``rows`` (indices into the held-out set) and their refit coordinates.

    Attributes:
        rows: (g,) indices into the held-out objects.
        landmarks: (n, d) the landmarks in this refit.
        objects: (g, d) the group's objects in this refit.
    """

    rows: np.ndarray
    landmarks: np.ndarray
    objects: np.ndarray


def refit_reference(D: np.ndarray, L: np.ndarray, H: np.ndarray, n_components: int,
                    group_size: int | None) -> list[RefitGroup]:
    """Classical MDS of the landmarks plus each consecutive group of held-out objects.

    Args:
        D: (N, N) dissimilarities among all objects.
        L: (n,) landmark indices into D.
        H: (m,) held-out indices into D.
        n_components: d.
        group_size: objects per refit (None: all m in one refit).
    """
    m = H.size
    size = m if group_size is None else int(group_size)
    groups = []
    for start in range(0, m, size):
        rows = np.arange(start, min(start + size, m))
        S = np.concatenate([L, H[rows]])
        full = LandmarkMDS(n_components=n_components).fit(D[np.ix_(S, S)]).embedding_
        groups.append(RefitGroup(rows=rows, landmarks=full[: L.size], objects=full[L.size :]))
    return groups


def reference_error(landmarks: np.ndarray, Y: np.ndarray, reference: list[RefitGroup]) -> tuple[float, float]:
    """(RMS object error, RMS landmark residual) of a map against a refit reference.

    Args:
        landmarks: (n, d) the landmarks in the map being judged.
        Y: (m, d) the held-out objects in that map.
        reference: groups from ``refit_reference`` covering all m rows.

    For each group the map is aligned to the refit on the landmarks and the
    group's objects are compared (distance units).
    """
    obj_sq = 0.0
    lm_sq = 0.0
    for g in reference:
        fit = orthogonal_procrustes_align(landmarks, g.landmarks)
        diff = apply_alignment(Y[g.rows], fit) - g.objects
        obj_sq += float(np.einsum("ij,ij->", diff, diff))
        lm_sq += fit.residual**2
    return float(np.sqrt(obj_sq / max(Y.shape[0], 1))), float(np.sqrt(lm_sq / max(len(reference), 1)))
