"""Input mix-ups on real data: rows whose columns follow another landmark order (docs/math.md §4.5).

A model is fitted on n landmarks of a dataset; the other objects arrive as
rows of dissimilarities to them. Besides the rows in model order, every
mix-up a producer can make without breaking a row's validity is built:

* ``ascending ids``: columns in ascending landmark index (the natural
  ``D[~mask][:, mask]``) instead of the model's order;
* ``shuffled``: one fixed random permutation of the columns;
* ``reversed``: the model's order backwards;
* ``other landmarks``: rows computed for another model of the same width
  (n other objects of the same dataset as landmarks);
* ``other dataset``: rows of another dataset against its own n landmarks.

Used by the tests of ``core.monitor.consistency`` and ``stream.consistency`` and by
``benchmarks/bench_consistency.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from streamembed.core.refit.strategies import maxmin_select, random_select
from streamembed.core.model import LandmarkModel, fit_model

__all__ = ["MIXUPS", "MixupSetting", "mixup_setting"]

#: The mix-ups built by :func:`mixup_setting` (``other dataset`` only with ``other``).
MIXUPS = ("ascending ids", "shuffled", "reversed", "other landmarks", "other dataset")


@dataclass
class MixupSetting:
    """A fitted model, its arrivals in model order (``rows["model order"]``), and the mixed-up rows.

    ``landmarks`` (n,) are the dataset indices of the landmarks in model
    order, ``arrivals`` (m,) those of the arriving objects.
    """

    model: LandmarkModel
    landmarks: np.ndarray
    arrivals: np.ndarray
    rows: dict[str, np.ndarray] = field(default_factory=dict)


def _choose(D: np.ndarray, n: int, selection: str, rng: np.random.Generator,
            among: np.ndarray | None = None) -> np.ndarray:
    pool = np.arange(D.shape[0]) if among is None else np.asarray(among)
    if selection == "maxmin":
        sub = D[np.ix_(pool, pool)]
        return pool[maxmin_select(n, D=sub, first=int(rng.integers(pool.size)))]
    if selection == "random":
        return pool[rng.permutation(random_select(n, pool.size, rng))]  # model order: the order of choice
    raise ValueError(f"selection must be 'random' or 'maxmin', got {selection!r}")


def mixup_setting(D: np.ndarray, n: int, *, selection: str = "random", seed: int = 0,
                  other: np.ndarray | None = None, n_components: int = 2) -> MixupSetting:
    """Model and rows of every mix-up for the dissimilarity matrix D (N, N) of one dataset.

    Args:
        n: landmarks (also the width of the ``other`` rows).
        selection: "random" (model order = order of choice) or "maxmin".
        other: (N', N') dissimilarities of another dataset for ``other dataset`` rows (N' > n).
    """
    rng = np.random.default_rng(seed)
    N = D.shape[0]
    L = _choose(D, n, selection, rng)
    rest = np.setdiff1d(np.arange(N), L)
    model = fit_model(D[np.ix_(L, L)], n_components=n_components, landmark_ids=[str(i) for i in L])
    A = D[np.ix_(rest, L)]
    out = MixupSetting(model, L, rest)
    out.rows["model order"] = A
    out.rows["ascending ids"] = D[np.ix_(rest, np.sort(L))]
    out.rows["shuffled"] = A[:, rng.permutation(n)]
    out.rows["reversed"] = A[:, ::-1]
    if rest.size > n:
        L2 = _choose(D, n, selection, rng, among=rest)
        out.rows["other landmarks"] = D[np.ix_(np.setdiff1d(rest, L2), L2)]
    if other is not None and other.shape[0] > n:
        L3 = _choose(other, n, selection, rng)
        out.rows["other dataset"] = other[np.ix_(np.setdiff1d(np.arange(other.shape[0]), L3), L3)]
    return out
