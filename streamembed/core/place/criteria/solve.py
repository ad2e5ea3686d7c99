"""Other out-of-sample criteria: raw stress and squared-distance L1 (docs/math.md §3 "Other criteria").

With the landmark configuration X (n, d) held fixed, an object with
dissimilarities δ (n,) to the landmarks is placed at a minimiser of

    stress  σ(y) = Σ_i (‖y - x_i‖ - δ_i)²        Trosset, Tan, Tang & Priebe (2025), end of §4
                                                 (σ_out): restricted reconstruction for a stress-built map;
                                                 weighted, Σ_i w_i (...)², with w_i = 1/δ_i: Sammon's
                                                 criterion, for arrivals on a Sammon map (``solve_sammon``)
    L1      ℓ(y) = Σ_i |δ_i² - ‖y - x_i‖²|       the note comparing five out-of-sample criteria
                                                 (criterion 1 and §3)

Units: y and X in distance units, σ and ℓ in squared distance units.

What is guaranteed (``CriterionSolution.optimality``):

* d = 1: the global minimum, found exactly by visiting every piece of the
  piecewise-quadratic criterion (``criteria_line``).
* d ≥ 2: a certified local minimum (``criteria_checks``: stationary with a
  positive-definite Hessian for stress; subgradient optimality and the
  isotropic second-order condition for L1), never a saddle or a maximum, and
  never worse than the start ŷ. When the descent from ŷ stops at a point that
  is not a minimum (ŷ itself in Trosset et al.'s Example 2, where the
  gradient vanishes and both curvatures are negative), it is left along
  each direction the check returns (the Hessian's eigenvectors, both signs,
  for stress; the edges of the vertex or the tangents and normals of the
  active circles for L1): a line search over a geometric ladder of step
  lengths picks a start per direction, the descent runs again from each,
  and the lowest certified result is kept (``escaped``); at most
  ``ESCAPE_ROUNDS`` times. Equally low, distinct minima are reported as
  ``ambiguous`` (the first found is kept). A row left without a certificate
  has ``converged`` False.
* A zero criterion is reported as a global minimum at any d.
* Stress, d ≥ 2: a certified local minimum need not be global (from ŷ alone,
  7.4 % of 720 real arrivals stopped above the global minimum, on digits up to
  47 % above), so stress also descends from ``ring_starts``: 2d points around
  the landmarks' centroid at the distance the object's dissimilarities imply,
  along the map's principal axes, then, for rows whose lowest minimum was
  reached by one descent while another minimum exists, 32 more (16 directions
  at two radii). The lowest certified minimum is kept; a row still in that
  state is ``possibly_nonglobal``. Measured against brute force
  (``benchmarks/criteria_starts.py``): raw stress global on 720 of 720 real
  arrivals, Sammon's criterion on 717 of 720, none flagged; the starts cost
  2.8–15× the descent from ŷ alone. L1 descends from ŷ only.

Descent. Stress: Guttman-transform majorisation (SMACOF with one free point,
Ghojogh et al. tutorial §2.2), y ← x̄ + (1/n) Σ_i δ_i (y - x_i)/‖y - x_i‖,
never increases σ; after it has settled, damped Newton steps (analytic
Hessian, eigenvalues replaced by their absolute values, backtracking) polish
to full precision. L1: ℓ is piecewise quadratic with kinks on the circles
‖y - x_i‖ = δ_i, and its minima sit where d of the residuals vanish at once
(why L1 "snaps" objects onto a few points). It is approached through the
smooth surrogate Σ_i √(e_i² + ε²), e_i = ‖y - x_i‖² - δ_i², by damped Newton
with continuation ε → 10⁻¹²·scale, then snapped exactly: onto the vertex
where d residuals vanish (Newton on those d equations), or, with no residual
at zero, onto the centre W/K of the isotropic quadratic piece
K‖y‖² - 2Wᵀy + C it lies on. The certificate is checked at the snapped point.

Cost: the certificate is one gradient, Hessian and d×d eigendecomposition
per object (about one Newton iteration); escapes cost 2d line searches of
``len(ESCAPE_STEPS)`` criterion evaluations and 2d descents, for the rows
that need them only. Everything is vectorised over the m objects of a batch
(rows processed in chunks that bound the (m, n, d) work arrays); no
per-object Python loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import runtime
from .checks import GLOBAL, NOT_MINIMUM, WEAK, l1_check, stress_check
from .l1 import l1_chunk, l1_objective, l1_snap
from .line import l1_line, stress_line
from .newton import CHUNK_ELEMENTS, map_length, row_chunks
from .stress import ring_starts, stress_chunk, stress_objective

#: Rounds of further starts: the ring (every row), then the dense ring (rows still ``possibly_nonglobal``).
ROUNDS = 2
#: Rounds of leaving a non-minimum (each: line searches, then descents from the new starts).
ESCAPE_ROUNDS = 3
#: Step lengths tried along each escape direction, relative to the map's length scale.
ESCAPE_STEPS = 2.0 ** np.arange(-12, 3)
#: Two certified minima whose criteria differ by less than this share of the criterion count as tied.
TIE_RTOL = 1e-9

#: How a placement was reached (``CriterionSolution.route``).
ROUTE_DESCENT, ROUTE_ESCAPED, ROUTE_ENUMERATED, ROUTE_OTHER_START = 0, 1, 2, 3


@dataclass
class CriterionSolution:
    """Placements of m objects under one criterion.

    Attributes:
        y: (m, d) coordinates (distance units), in X's frame.
        objective: (m,) criterion value at y.
        start_objective: (m,) criterion value at the start (the projection).
        converged: (m,) bool; True where the placement is certified
            (``optimality`` ≥ WEAK): a global minimum for d = 1 or a zero
            criterion, else a local minimum.
        optimality: (m,) int8 status from ``criteria_checks``: NOT_MINIMUM (0),
            WEAK (1: necessary conditions only), STRICT (2: strict local
            minimum), GLOBAL (3).
        route: (m,) int8: ROUTE_DESCENT (the descent from the start ended at
            a certified point), ROUTE_ESCAPED (it ended at a non-minimum, which
            was left; see the module docstring), ROUTE_ENUMERATED (d = 1: exact),
            ROUTE_OTHER_START (stress: the descent from one of the further starts
            reached a lower minimum than the one from the projection).
        ambiguous: (m,) bool; another, distinct point was found with the same
            criterion (within ``TIE_RTOL``); the first found is returned.
        multimodal: (m,) bool; another certified minimum, higher than the one
            returned, was found elsewhere: the criterion has several local minima.
        reached: (m,) int; how many of the row's descents (from its starts and
            escapes) ended at the point returned.
    """

    y: np.ndarray
    objective: np.ndarray
    start_objective: np.ndarray
    converged: np.ndarray
    optimality: np.ndarray
    route: np.ndarray
    ambiguous: np.ndarray
    multimodal: np.ndarray
    reached: np.ndarray

    @property
    def escaped(self) -> np.ndarray:
        """(m,) bool: the placement was reached by leaving a non-minimum."""
        return self.route == ROUTE_ESCAPED

    @property
    def possibly_nonglobal(self) -> np.ndarray:
        """(m,) bool: several minima, and only one descent reached the kept one: a narrow basin, so a lower
        minimum in another narrow basin may have been missed (``FLAG_POSSIBLY_NONGLOBAL``, docs/math.md §3.4)."""
        return self.multimodal & (self.reached <= 1)


def _by_chunks(fn: Callable[..., Any], Y: np.ndarray, X: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, ...]:
    """Apply ``fn(Y_rows, X, data_rows) -> tuple of row arrays`` over cache-sized row chunks."""
    parts = [fn(Y[s], X, data[s]) for s in row_chunks(Y.shape[0], X.shape)]
    if not parts:
        probe = fn(Y[:0], X, data[:0])
        return tuple(probe)
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(len(parts[0])))


def _solve(descend: Callable[..., Any], objective: Callable[..., Any], check: Callable[..., Any], Y0: np.ndarray,
           X: np.ndarray, data: np.ndarray, starts: Callable[..., Any] | None = None) -> CriterionSolution:
    """Descend from Y0 (and further starts), certify, leave non-minima (module docstring).

    ``starts(rows, dense) -> (owner rows (q,), starts (q, d))``: further starts for the rows
    ``rows``, first the few (``dense`` False) for every row, then the many for the rows still
    ``possibly_nonglobal`` (several minima, the lowest reached by one descent). Every row keeps
    the lowest certified point reached from any of its starts, so never worse than its Y0.
    """
    X = np.asarray(X, dtype=np.float64)
    Y0 = np.asarray(Y0, dtype=np.float64)
    data = np.asarray(data, dtype=np.float64)
    m = Y0.shape[0]
    length = map_length(X)
    start = objective(Y0, X, data)

    def descend_guarded(S: np.ndarray, f_start: np.ndarray, rows: np.ndarray, local: bool) -> tuple[np.ndarray, ...]:
        """(Y, criterion, status, directions) of the descents from the starts S of the rows ``rows``."""
        Y, = _by_chunks(lambda a, b, c: (descend(a, b, c, local),), S, X, data[rows])
        f = objective(Y, X, data[rows])
        worse = ~(f <= f_start)  # descent cannot be worse; NaN-safe guard
        Y[worse], f[worse] = S[worse], f_start[worse]
        status, dirs = _by_chunks(lambda a, b, c: check(a, b, c, length), Y, X, data[rows])
        return Y, f, status, dirs

    rows = np.arange(m)
    Y, f, status, dirs = descend_guarded(Y0, start, rows, False)
    # every candidate: (owner row, point, criterion, status, route); and every descent's end, to leave non-minima
    pool = [(rows, Y, f, status, np.full(m, ROUTE_DESCENT, dtype=np.int8))]
    ends = [(rows, Y, f, dirs, status)]
    if starts is not None:
        todo = rows
        for dense in (False, True)[:ROUNDS]:
            if todo.size == 0 or runtime.spent():
                break
            q_owner, S = starts(todo, dense)
            Yq, fq, stq, dq = descend_guarded(S, objective(S, X, data[q_owner]), q_owner, False)
            pool.append((q_owner, Yq, fq, stq, np.full(q_owner.size, ROUTE_OTHER_START, dtype=np.int8)))
            ends.append((q_owner, Yq, fq, dq, stq))
            todo = np.flatnonzero(_select(pool, start, length).possibly_nonglobal)
    owner, P, fP, dP, st = (np.concatenate([e[k] for e in ends]) for k in range(5))
    frontier = np.flatnonzero(st <= WEAK)
    owner, P, fP, dP = owner[frontier], P[frontier], fP[frontier], dP[frontier]
    for _rnd in range(1, ESCAPE_ROUNDS + 1):
        if owner.size == 0 or runtime.spent():
            break
        S, fS, src = _escape_starts(P, fP, dP, X, data[owner], objective, length)
        if src.size == 0:
            break
        owner = owner[src]
        P, fP, st, dP = descend_guarded(S, fS, owner, True)
        pool.append((owner, P, fP, st, np.full(owner.size, ROUTE_ESCAPED, dtype=np.int8)))
        keep = st <= WEAK
        owner, P, fP, dP = owner[keep], P[keep], fP[keep], dP[keep]
    return _select(pool, start, length)


def _select(pool: list[tuple[Any, ...]], start: np.ndarray, length: float) -> CriterionSolution:
    """Per row, the lowest certified candidate (else the lowest), first among ties."""
    owner, Y, f, st, route = (np.concatenate([p[k] for p in pool]) for k in range(5))
    m = start.size
    order = np.arange(owner.size)  # generation order: the tie-break
    cert = st >= WEAK
    row_best = np.full(m, np.inf)
    np.minimum.at(row_best, owner[cert], f[cert])
    has_cert = np.isfinite(row_best)
    fallback = np.full(m, np.inf)
    np.minimum.at(fallback, owner, f)
    best = np.where(has_cert, row_best, fallback)
    eligible = np.where(has_cert[owner], cert, True)
    tol = TIE_RTOL * np.abs(best[owner]) + 1e-300
    tied = eligible & (f <= best[owner] + tol)
    first = np.full(m, owner.size)
    np.minimum.at(first, owner[tied], order[tied])
    y = Y[first]
    far = np.zeros(m)
    np.maximum.at(far, owner[tied], np.linalg.norm(Y[tied] - y[owner[tied]], axis=1))
    certified = st[first] >= WEAK
    # another certified minimum, higher and elsewhere: the criterion has several local minima;
    # and how many descents ended at the kept point
    dist = np.linalg.norm(Y - y[owner], axis=1)
    higher = cert & (f > best[owner] + tol) & (dist > 1e-6 * length)
    multimodal = np.zeros(m, dtype=bool)
    multimodal[owner[higher]] = True
    reached = np.bincount(owner[tied & (dist <= 1e-6 * length)], minlength=m)
    return CriterionSolution(
        y=y, objective=f[first], start_objective=start, converged=certified, optimality=st[first].astype(np.int8),
        route=route[first], ambiguous=(far > 1e-6 * length) & certified, multimodal=multimodal & certified,
        reached=reached,
    )


def _escape_starts(P: np.ndarray, fP: np.ndarray, dirs: np.ndarray, X: np.ndarray, data: np.ndarray,
                   objective: Callable[..., Any], length: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """New starts leaving the points P (k, d): per direction of ``dirs`` (k, p, d), the lowest of the ladder.

    Returns (starts (q, d), their criteria (q,), index into P (q,)), only starts strictly below
    their point's criterion.
    """
    k, p, d = dirs.shape
    steps = ESCAPE_STEPS * length
    h = steps.size
    starts, values, src = [], [], []
    rows = max(1, CHUNK_ELEMENTS // max(1, p * h * X.shape[0] * d))
    for a in range(0, k, rows):
        b = min(a + rows, k)
        T = P[a:b, None, None, :] + steps[None, None, :, None] * dirs[a:b, :, None, :]  # (r, p, h, d)
        ok = np.isfinite(T).all(axis=3)
        T = np.where(ok[..., None], T, P[a:b, None, None, :])
        fT = objective(T.reshape(-1, d), X, np.repeat(data[a:b], p * h, axis=0)).reshape(b - a, p, h)
        fT = np.where(ok, fT, np.inf)
        j = np.argmin(fT, axis=2)
        fbest = np.take_along_axis(fT, j[:, :, None], axis=2)[:, :, 0]
        better = fbest < fP[a:b, None] * (1 - 1e-12)
        r, q = np.nonzero(better)
        starts.append(T[r, q, j[r, q]])
        values.append(fbest[r, q])
        src.append(r + a)
    if not starts:
        return np.empty((0, d)), np.empty(0), np.empty(0, dtype=np.int64)
    return np.concatenate(starts), np.concatenate(values), np.concatenate(src)


# ------------------------------------------------------------------ stress


def solve_stress(Y0: np.ndarray, X: np.ndarray, delta: np.ndarray, weights: np.ndarray | None = None,
                 starts: bool = True) -> CriterionSolution:
    """Minimise σ for m objects from the starts Y0 (m, d); X (n, d); delta (m, n) ≥ 0.

    Args:
        weights: (m, n) ≥ 0, or None (all 1): minimise Σ_i w_i (‖y - x_i‖ - δ_i)² instead.
        starts: for d ≥ 2, also descend from the ``ring_starts`` and keep the lowest minimum
            (docs/math.md §3.4); False: from Y0 only.
    """
    delta = np.asarray(delta, dtype=np.float64)
    data = delta if weights is None else np.stack([delta, np.asarray(weights, dtype=np.float64)], axis=-1)
    if np.shape(X)[1] == 1:
        return _on_a_line(stress_line, stress_objective, Y0, X, data)
    X = np.asarray(X, dtype=np.float64)
    further = (lambda rows, dense: ring_starts(X, delta[rows], dense, rows)) if starts else None
    with runtime.single_blas_thread():  # descents of many small products: extra BLAS threads only contend
        return _solve(lambda Y, X_, dl, local: stress_chunk(Y, X_, dl)[0], stress_objective, stress_check, Y0, X,
                      data, further)


def solve_sammon(Y0: np.ndarray, X: np.ndarray, delta: np.ndarray) -> CriterionSolution:
    """Minimise Sammon's criterion Σ_i (‖y - x_i‖ - δ_i)² / δ_i for m objects: stress with weights 1/δ_i.

    How a Sammon map weighs its landmarks (``metric_map``), for one arrival: the same descents,
    further starts and certificates as ``solve_stress``. A zero δ_i puts the object on landmark i,
    where the criterion alone is finite: the placement is x_i, a global minimum (with several zero
    δ_i, the mean of their landmarks: certified only when they coincide).
    """
    delta = np.asarray(delta, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    zero = delta <= 0
    with np.errstate(divide="ignore"):
        w = np.where(zero, 0.0, 1.0 / delta)
    sol = solve_stress(Y0, X, delta, weights=w)
    pinned = np.flatnonzero(zero.any(axis=1))
    if pinned.size:
        Z = zero[pinned]
        y = (Z @ X) / Z.sum(axis=1, keepdims=True)
        spread = np.sqrt((Z[:, :, None] * np.square(X[None] - y[:, None])).sum(axis=2).max(axis=1))
        single = spread <= 1e-12 * map_length(X)
        sol.y[pinned] = y
        sol.objective[pinned] = stress_objective(y, X, np.stack([delta[pinned], w[pinned]], axis=-1))
        sol.converged[pinned] = single
        sol.optimality[pinned] = np.where(single, GLOBAL, NOT_MINIMUM)
        sol.route[pinned] = ROUTE_ENUMERATED
        sol.ambiguous[pinned] = False
        sol.multimodal[pinned] = False
    return sol


# ------------------------------------------------------------------ L1


def solve_l1(Y0: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> CriterionSolution:
    """Minimise ℓ for m objects from the starts Y0 (m, d); X (n, d); delta2 (m, n) squared dissimilarities."""
    if np.shape(X)[1] == 1:
        return _on_a_line(l1_line, l1_objective, Y0, X, delta2)

    def descend(Y: np.ndarray, X_: np.ndarray, d2: np.ndarray, local: bool) -> np.ndarray:
        return l1_snap(l1_chunk(Y, X_, d2, local)[0], X_, d2)

    with runtime.single_blas_thread():  # descents of many small products: extra BLAS threads only contend
        return _solve(descend, l1_objective, l1_check, Y0, X, delta2)


def _on_a_line(line: Callable[..., Any], objective: Callable[..., Any], Y0: np.ndarray, X: np.ndarray,
               data: np.ndarray) -> CriterionSolution:
    """d = 1: the exact global minimiser (``criteria_line``)."""
    X = np.asarray(X, dtype=np.float64)
    data = np.asarray(data, dtype=np.float64)
    m = data.shape[0]
    y, amb = line(X[:, 0], data) if data.ndim == 2 else line(X[:, 0], data[..., 0], data[..., 1])
    Y = y[:, None]
    return CriterionSolution(
        y=Y, objective=objective(Y, X, data), start_objective=objective(np.asarray(Y0, dtype=np.float64), X, data),
        converged=np.ones(m, dtype=bool), optimality=np.full(m, GLOBAL, dtype=np.int8),
        route=np.full(m, ROUTE_ENUMERATED, dtype=np.int8), ambiguous=amb, multimodal=np.zeros(m, dtype=bool),
        reached=np.ones(m, dtype=np.int64),
    )


# ------------------------------------------------------------------ Newton

