"""The routines of the built-in single-object methods (docs/math.md §3) and the map they place on.

A routine moves the projection ŷ of valid rows to its method's placement:
``project`` keeps ŷ, ``restricted_reconstruction`` solves the secular equation
(``core.place.restricted``), ``stress_placement`` and ``l1_placement`` minimise
their criteria (``core.place.criteria.solve``) on the map the model places with
(``MapGeometry``). Which method runs which routine is the method registry's
(``core.place.methods``); the checks, flags and residuals around the routine
are ``core.place.placer.Placer``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..fit.metric_map import map_start
from ..fit.ordinal_map import MonotoneTransform
from ..flags import FLAG_AMBIGUOUS, FLAG_ESCAPED, FLAG_NOT_CONVERGED, FLAG_POSSIBLY_NONGLOBAL
from .criteria.solve import solve_l1, solve_sammon, solve_stress
from .restricted import AMBIGUITY_RTOL, AMBIGUITY_RTOL_F32, solve_restricted

__all__ = ["MapGeometry", "Routine", "project", "restricted_reconstruction", "stress_placement", "l1_placement"]


@dataclass(frozen=True)
class MapGeometry:
    """The landmark map the criteria place objects on.

    Attributes:
        X: (n, d) natural-frame landmark configuration (U_d Λ_d^{1/2}, or the refined map).
        refined: True for a SMACOF / Sammon / non-metric map (starts from ``metric_map.map_start``).
        sammon: the map minimises Sammon's stress, so arrivals do too (docs/math.md §3.5).
        transform: a non-metric map's monotone transformation δ ↦ d̂, else None.
        row_means: (n,) the landmarks' mean squared dissimilarities m_Δ (the start's constant).
        bandwidth: σ of kernel placement (``core.place.kernel``, docs/math.md §8.6), in the units of the core
            dissimilarities; None when the model has none (``LandmarkModel.bandwidth``).
    """

    X: np.ndarray
    refined: bool
    sammon: bool
    transform: MonotoneTransform | None
    row_means: np.ndarray
    bandwidth: float | None = None

    def dissimilarities(self, A_rows: np.ndarray) -> np.ndarray:
        """(m, n) float64 what the criteria fit on this map: f(δ) on a non-metric map, δ itself otherwise."""
        if self.transform is None:
            return np.asarray(A_rows, dtype=np.float64)
        return self.transform(A_rows)


#: A routine: (A_rows (m, n) core dissimilarities, y (m, d) float64 the projections (updated in place),
#: beta (m,), lam (d,), valid (m,) bool, t (m,) NaN (updated), flags (m,) uint32 (updated), geometry)
#: -> (y, t, flags), possibly new arrays.
Routine = Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]


def project(A_rows: np.ndarray, y: np.ndarray, beta: np.ndarray, lam: np.ndarray, valid: np.ndarray,
            t: np.ndarray, flags: np.ndarray, geometry: MapGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Projection: ŷ itself (docs/math.md §3.1)."""
    return y, t, flags


def restricted_reconstruction(A_rows: np.ndarray, y: np.ndarray, beta: np.ndarray, lam: np.ndarray,
                              valid: np.ndarray, t: np.ndarray, flags: np.ndarray,
                              geometry: MapGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Restricted reconstruction: the secular equation from ŷ (docs/math.md §3.2)."""
    c = y * np.sqrt(lam)
    rtol = AMBIGUITY_RTOL_F32 if np.dtype(A_rows.dtype) == np.float32 else AMBIGUITY_RTOL
    if valid.all():
        sol = solve_restricted(c, beta, lam, rtol)
        return sol.y, sol.t, sol.flags
    rows = np.flatnonzero(valid)
    sol = solve_restricted(c[rows], beta[rows], lam, rtol)
    y[rows], t[rows], flags[rows] = sol.y, sol.t, sol.flags
    return y, t, flags


def _criterion(solve_named: str) -> Routine:
    def routine(A_rows: np.ndarray, y: np.ndarray, beta: np.ndarray, lam: np.ndarray, valid: np.ndarray,
                t: np.ndarray, flags: np.ndarray, geometry: MapGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = np.flatnonzero(valid)
        if not rows.size:
            return y, t, flags
        X = geometry.X
        delta = geometry.dissimilarities(A_rows[rows])  # f(δ) on a non-metric map (core.fit.ordinal_map)
        m_delta = geometry.row_means if geometry.transform is None else None
        y0 = map_start(X, delta, m_delta) if geometry.refined else y[rows]
        if solve_named == "l1":
            sol = solve_l1(y0, X, np.square(delta))
        elif geometry.sammon:  # the map's own criterion (docs/math.md §3.5)
            sol = solve_sammon(y0, X, delta)
        else:
            sol = solve_stress(y0, X, delta)
        y[rows] = sol.y
        flags[rows[~sol.converged]] |= FLAG_NOT_CONVERGED
        flags[rows[sol.escaped]] |= FLAG_ESCAPED
        flags[rows[sol.ambiguous]] |= FLAG_AMBIGUOUS
        flags[rows[sol.possibly_nonglobal]] |= FLAG_POSSIBLY_NONGLOBAL
        return y, t, flags

    return routine


#: Raw stress (Sammon's criterion on a Sammon map) from the projection start, certified (docs/math.md §3.4).
stress_placement: Routine = _criterion("stress")
#: Σ|δ² − ‖y − x‖²| from the projection start, certified (docs/math.md §3.4).
l1_placement: Routine = _criterion("l1")
