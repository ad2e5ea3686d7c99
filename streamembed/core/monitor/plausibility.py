"""Rows that cannot be right: a scale far outside the fit population's, or a negative unexplained energy no real
object gives (docs/math.md §4.8).

A row of dissimilarities in other units than the landmarks' (multiplied by
10, squared) is finite, non-negative and of the right length, and projection
places it: far off the map (×10 rows land about 100 map radii away) with an
unexplained energy u = β − ‖ŷ‖² that is negative (the projection grows with
the square of the scale, β only linearly). Two flags say so:

* ``implausible_scale``: the row's mean squared dissimilarity ā = β + g/2
  (docs/math.md §2; g the landmarks' mean squared dissimilarity) lies outside
  [low / ``SCALE_MARGIN``, ``SCALE_MARGIN`` · high], where [low, high] is the
  range of ā over the fit population: the landmarks' own rows and, when the
  model has a fit baseline, its non-landmark objects;
* ``negative_unexplained``: u / β lies below ``floor``: −``ROUND_OFF`` when
  no fit object has u < 0 (Euclidean data, and most edit distances at small
  d), else ``FLOOR_MARGIN`` times the most negative u / β of the fit
  population (non-metric dissimilarities such as DTW give negative u on
  real rows).

The margins are measured (docs/drift.md, "Rows that cannot be right"): at a
margin of 3 no correct row of the six real pools is flagged and ×10 and
squared rows are flagged on 99–100 % of rows, except squared dissimilarities
already in [0, 1] (normalised edit distances), whose scale stays in range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fit.cmds import LandmarkSpectrum
from ..flags import FLAG_IMPLAUSIBLE_SCALE, FLAG_NEGATIVE_UNEXPLAINED
from .baseline import FitBaseline

__all__ = ["SCALE_MARGIN", "FLOOR_MARGIN", "ROUND_OFF", "RowLimits", "row_limits", "implausible_flags"]

#: How far outside the fit population's range of mean squared dissimilarities a row's may lie (a factor).
SCALE_MARGIN = 3.0
#: The floor of u / β is this many times the fit population's most negative u / β (when it has one).
FLOOR_MARGIN = 2.0
#: u / β below −this is negative beyond round-off.
ROUND_OFF = 1e-6


@dataclass(frozen=True)
class RowLimits:
    """The plausible range of a row's mean squared dissimilarity [low, high] (before the margin) and the floor
    of u / β (module doc)."""

    low: float
    high: float
    floor: float
    grand_mean: float


def row_limits(spectrum: LandmarkSpectrum, n_components: int, baseline: FitBaseline | None = None) -> RowLimits:
    """The limits of a map with landmark ``spectrum`` (their rows' mean squares ``row_means``, their own u / β)
    and, when given, its fit baseline's objects (``FitBaseline.info``'s ``mean_square_*`` and
    ``relative_unexplained_min``)."""
    d = int(n_components)
    beta = spectrum.row_means - 0.5 * spectrum.grand_mean
    X = spectrum.eigenvectors[:, :d] * np.sqrt(spectrum.eigenvalues[:d])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(beta > 0, (beta - np.square(X).sum(axis=1)) / beta, np.nan)
    low, high = float(spectrum.row_means.min()), float(spectrum.row_means.max())
    worst = float(np.nanmin(rel)) if np.isfinite(rel).any() else 0.0
    if baseline is not None:
        info = baseline.info
        low = min(low, float(info.get("mean_square_low", low)))
        high = max(high, float(info.get("mean_square_high", high)))
        worst = min(worst, float(info.get("relative_unexplained_min", worst)))
    floor = FLOOR_MARGIN * worst if worst < -ROUND_OFF else -ROUND_OFF
    return RowLimits(low=low, high=high, floor=floor, grand_mean=float(spectrum.grand_mean))


def implausible_flags(beta: np.ndarray, unexplained: np.ndarray, limits: RowLimits) -> np.ndarray:
    """(m,) uint32 flags of placements with centred self-similarities β (m,) and unexplained energies u (m,):
    ``FLAG_IMPLAUSIBLE_SCALE`` and ``FLAG_NEGATIVE_UNEXPLAINED`` where they hold (NaN rows: none)."""
    beta = np.asarray(beta, dtype=np.float64)
    u = np.asarray(unexplained, dtype=np.float64)
    mean_sq = beta + 0.5 * limits.grand_mean
    flags = np.zeros(beta.shape, dtype=np.uint32)
    scale = (mean_sq > SCALE_MARGIN * limits.high) | (mean_sq < limits.low / SCALE_MARGIN)
    flags[scale] |= FLAG_IMPLAUSIBLE_SCALE
    with np.errstate(divide="ignore", invalid="ignore"):
        negative = (beta > 0) & (u < limits.floor * beta)
    flags[negative] |= FLAG_NEGATIVE_UNEXPLAINED
    return flags
