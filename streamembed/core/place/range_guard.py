"""The range guard: how far from the landmarks a model can place a row in a given dtype (docs/math.md §2, §4.4).

A row whose mean squared dissimilarity E exceeds what the model can place
(its coordinates, β and ‖ŷ‖² must stay finite, and keep three significant
digits through the centring's cancellation) is refused as ``out_of_range``
before any iterative method sees it: never an output with inf, or one made
of round-off. ``core.place.placer.Placer`` computes the limit once per dtype.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PLACEMENT_RTOL", "energy_limit", "precision_limit", "range_limit", "range_detail"]

#: Relative precision a placement keeps at the edge of the placeable range (docs/math.md §4.4).
PLACEMENT_RTOL = 1e-3


def energy_limit(W: np.ndarray, n_components: int, dtype: np.dtype) -> float:
    """The largest mean squared dissimilarity of a row placed without overflow (squared units).

    With E that mean, every projected coordinate and β is at most
    n²·E·max|W| in magnitude (W (n, d + 1) the fused projection matrix,
    ``core.place.projection``), so E is limited by the dtype's range for those,
    and by float64's for ‖ŷ‖² (d of them squared), with a factor 16 of
    headroom each.
    """
    n, d = W.shape[0], int(n_components)
    bound = n * n * max(float(np.abs(W).max()), np.finfo(np.float64).tiny)
    big = min(float(np.finfo(dtype).max) / 16.0, float(np.sqrt(np.finfo(np.float64).max / (16.0 * d))))
    return big / bound


def precision_limit(grand_mean: float, dtype: np.dtype) -> float:
    """The largest mean squared dissimilarity E whose placement keeps ``PLACEMENT_RTOL`` relative precision.

    Centring cancels the part of a row common to all landmarks: values of
    size E leave a rounding error of about eps·E, while the coordinates of
    an object that far out are of size √(E·g) (g the landmarks' mean
    squared dissimilarity). Their relative error eps·√(E/g) stays below
    ``PLACEMENT_RTOL`` for E ≤ g·(PLACEMENT_RTOL/eps)²: about 7·10⁷·g in
    float32, 2·10²⁵·g in float64. Beyond it a placement is round-off.
    """
    g = max(float(grand_mean), float(np.finfo(np.float64).tiny))
    return g * (PLACEMENT_RTOL / float(np.finfo(dtype).eps)) ** 2


def range_limit(energy: float, precision: float) -> tuple[float, str]:
    """(the largest placeable mean squared dissimilarity, what sets it: "precision" or "overflow")."""
    return (precision, "precision") if precision <= energy else (energy, "overflow")


def range_detail(energy: float, limit: float, why: str, dtype: np.dtype, grand_mean: float) -> str:
    """The words of an ``out_of_range`` problem for a row of mean squared dissimilarity ``energy``."""
    name = np.dtype(dtype).name
    what = (f"beyond it a {name} placement keeps fewer than three significant digits" if why == "precision"
            else f"beyond it a {name} placement would overflow")
    return (f"the mean squared dissimilarity {energy:.3g} exceeds {limit:.3g}, the largest this model can place "
            f"({what}; its landmarks' is {grand_mean:.3g})")
