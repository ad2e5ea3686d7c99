"""How much of its fit population a map explains, said everywhere a map is shown (docs/math.md §4.9).

A d-dimensional map shows Σ‖ŷ‖² of the objects' energy Σβ about the
landmarks' centre (docs/math.md §4: u = β − ‖ŷ‖² is what it leaves out); on
edit distances between texts a 2-D map typically shows a few percent of it,
and nothing else says so. ``explained(model)`` gives

* ``share``: 1 − Σu/Σβ over the model's fit baseline objects (its
  non-landmark fit objects, ``core.monitor.baseline``), or, for a model
  without one, over its landmarks: Σ_{j≤d} λ_j / Σ_l β_l (the top-d
  eigenvalues over the landmark kernel's trace);
* ``median_unexplained``: the median object's u/β over the same objects;
* ``half_dimension``: the smallest d' whose landmark eigenvalues reach half
  of that trace (None when no monitored d' does): what to try instead.

``WARN_BELOW`` is the documented level below which ``fit``, ``model info``,
``embed``, ``plot map`` and the daemon warn. No I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..model import LandmarkModel

__all__ = ["WARN_BELOW", "Explained", "explained", "explained_of", "warning_text"]

#: A map explaining less than this share of its fit population's energy gets a WARNING.
WARN_BELOW = 0.25


@dataclass(frozen=True)
class Explained:
    """What a map explains of a set of objects (module doc)."""

    share: float
    median_unexplained: float
    objects: int
    of: str  # "fit objects", "landmarks", "objects embedded"
    n_components: int
    half_dimension: int | None

    @property
    def low(self) -> bool:
        return math.isfinite(self.share) and self.share < WARN_BELOW

    def line(self) -> str:
        """One line for summaries: "the 2-D map explains 18% of its fit objects' energy (median object 85%
        unexplained)"."""
        if not math.isfinite(self.share):
            return f"the {self.n_components}-D map's explained share is unknown ({self.objects} {self.of})"
        return (f"the {self.n_components}-D map explains {100 * self.share:.0f}% of the energy of {self.objects:,} "
                f"{self.of} (the median object is {100 * self.median_unexplained:.0f}% unexplained)")


def _half_dimension(model: LandmarkModel) -> int | None:
    sp = model.spectrum
    trace = float((sp.row_means - 0.5 * sp.grand_mean).sum())
    if not trace > 0:
        return None
    reach = np.flatnonzero(np.cumsum(sp.eigenvalues) >= 0.5 * trace)
    return int(reach[0]) + 1 if reach.size else None


def _median(x: np.ndarray) -> float:
    """``np.median`` of finite values (x (k,), k ≥ 1) without its NaN check, which imports numpy.ma (0.02 s) at
    the end of every ``streamembed embed``."""
    r = np.sort(x)
    mid = r.size // 2
    return float(r[mid]) if r.size % 2 else float((r[mid - 1] + r[mid]) / 2.0)


def explained_of(beta: np.ndarray, unexplained: np.ndarray, model: LandmarkModel, of: str) -> Explained:
    """What ``model`` explains of objects with centred self-similarities β (m,) and unexplained energies u (m,)."""
    beta = np.asarray(beta, dtype=np.float64)
    u = np.asarray(unexplained, dtype=np.float64)
    ok = np.isfinite(beta) & np.isfinite(u) & (beta > 0)
    share = 1.0 - float(u[ok].sum() / beta[ok].sum()) if ok.any() else math.nan
    median = _median(u[ok] / beta[ok]) if ok.any() else math.nan
    return Explained(share, median, int(ok.sum()), of, int(model.n_components), _half_dimension(model))


def explained(model: LandmarkModel) -> Explained:
    """What ``model`` explains of its fit population (module doc)."""
    b = model.fit_baseline
    if b is not None and math.isfinite(b.explained_share):
        return Explained(float(b.explained_share), float(b.median_unexplained_share), b.n_objects, "fit objects",
                         int(model.n_components), _half_dimension(model))
    sp = model.spectrum
    d = int(model.n_components)
    beta = sp.row_means - 0.5 * sp.grand_mean
    X = sp.eigenvectors[:, :d] * np.sqrt(sp.eigenvalues[:d])
    return explained_of(beta, beta - np.square(X).sum(axis=1), model, "landmarks")


def warning_text(e: Explained) -> str | None:
    """The WARNING for a map that explains little (``Explained.low``), else None."""
    if not e.low:
        return None
    consider = (f"consider d = {e.half_dimension} (half of the energy)" if e.half_dimension is not None
                else "no map of the monitored dimensions reaches half of it")
    return (f"{e.line()}: positions show a small part of the structure; {consider} or `streamembed evaluate` "
            f"(docs/math.md §4.9)")
