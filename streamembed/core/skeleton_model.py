"""The LSDR skeleton map of feature vectors (Roy 2021; docs/math.md §8.4): landmarks and map from the skeleton."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from .errors import InputError
from .fit.skeleton import Skeleton, fit_skeleton
from .model import LandmarkModel, fit_model

__all__ = ["fit_skeleton_model"]


def fit_skeleton_model(F: object, *, skeleton_alpha: float, skeleton_neighbors: int,
                       landmark_ids: Iterable[Any] | None = None, **fit_kwargs: Any) -> tuple[LandmarkModel, Skeleton]:
    """(the skeleton map, the skeleton) of feature vectors F (N, p) under the Euclidean metric (docs/math.md §8.4).

    The landmarks are the LSDR skeleton (``core.fit.skeleton.fit_skeleton``) of F with level ``skeleton_alpha``
    and ``skeleton_neighbors`` neighbours, in index order; the map is ``fit_model`` of the geodesics between them
    (``fit_kwargs``: its other options), in feature mode (Euclidean distances to the skeleton points are the
    input rows). ``landmark_ids`` (N,) names every object (default: the row numbers), the skeleton's are kept.
    The kernel bandwidth is the skeleton's σ (``Skeleton.bandwidth``) unless ``kernel_bandwidth`` is given.
    """
    sk = fit_skeleton(F, skeleton_alpha, skeleton_neighbors)
    d = int(fit_kwargs.get("n_components", 2))
    if sk.size <= d:
        raise InputError(f"the skeleton of the {sk.graph.n_points} points has {sk.size} point(s) "
                         f"({sk.n_boundary} boundary points): a map of n_components = {d} needs at least {d + 1}")
    N = sk.graph.n_points
    ids = [str(i) for i in range(N)] if landmark_ids is None else [str(x) for x in landmark_ids]
    if len(ids) != N:
        raise InputError(f"landmark_ids has {len(ids)} entries for {N} objects")
    model = fit_model(sk.geodesics, **fit_kwargs, landmark_ids=[ids[i] for i in sk.indices],
                      features=np.asarray(F, dtype=np.float64)[sk.indices], metric="euclidean")
    if model.kernel_bandwidth is None:
        model = replace(model, bandwidth=sk.bandwidth)
    return model, sk
