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

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import numpy as np

from . import runtime
from .criteria_checks import GLOBAL, NOT_MINIMUM, WEAK, l1_check, stress_check
from .criteria_line import l1_line, stress_line

#: (rows × landmarks × d) elements per chunk of work arrays (16 MB of float64).
CHUNK_ELEMENTS = 2_000_000
#: Majorisation sweeps before the Newton polish (stress).
MAJORIZATION_ITER = 60
#: Newton iterations per stage (stress polish, each L1 continuation stage).
NEWTON_ITER = 40
#: Relative step size at which a row counts as converged.
STEP_RTOL = 1e-12
#: Backtracking halvings before a row counts as converged (no decrease found).
MAX_HALVINGS = 30
#: Final smoothing of the L1 surrogate, relative to the row's squared-distance scale.
L1_EPS_FINAL = 1e-12
#: Factor between successive smoothing levels.
L1_EPS_FACTOR = 0.1
#: Most smoothing levels of one continuation (from the start's median residual down to L1_EPS_FINAL: ~15 suffice).
L1_MAX_STAGES = 40
#: First smoothing level of a descent from an escape start: small, so that the
#: descent stays in the basin the start was chosen in (a large ε pulls towards
#: the minimum of the smoothed criterion, possibly the point just left).
L1_EPS_LOCAL = 1e-6
#: |e_i| below this share of δ_i² + ‖y - x_i‖² marks a residual the L1 snap sets exactly to zero.
SNAP_RTOL = 1e-6
#: Newton iterations of the L1 vertex snap (it starts within ~1e-12 of the vertex).
SNAP_ITER = 3


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


# ------------------------------------------------------------------ objectives


def _diff(Y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """(m, n, d) differences y - x_i (exact, no ‖y‖² - 2y·x + ‖x‖² cancellation)."""
    return Y[:, None, :] - X[None, :, :]


def _sq(D: np.ndarray) -> np.ndarray:
    """(m, n) squared lengths of the (m, n, d) differences."""
    return np.einsum("mnd,mnd->mn", D, D)


def _wsum(w: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Σ_i w_i (y - x_i) per object: (m, d) from weights (m, n) and differences (m, n, d)."""
    return np.matmul(w[:, None, :], D)[:, 0, :]


def _wouter(w: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Σ_i w_i (y - x_i)(y - x_i)ᵀ per object: (m, d, d)."""
    return np.matmul((w[:, :, None] * D).transpose(0, 2, 1), D)


def stress_objective(Y: np.ndarray, X: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """σ(y) per object: Y (m, d), X (n, d), delta (m, n) -> (m,).

    ``delta`` (m, n, 2) holds (δ_i, w_i) pairs instead: the weighted σ_w(y) = Σ_i w_i (‖y - x_i‖ - δ_i)²
    (Sammon's criterion for w_i = 1/δ_i, ``solve_stress``).
    """
    delta, w = _split(delta)
    out = np.empty(Y.shape[0])
    for s in _chunks(Y.shape[0], X.shape):
        r = np.sqrt(_sq(_diff(Y[s], X)))
        sq = np.square(r - delta[s])
        out[s] = (sq if w is None else sq * w[s]).sum(axis=1)
    return out


def _split(data: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(δ (m, n), weights (m, n) or None) of stress data: (m, n) unweighted, (m, n, 2) with weights."""
    return (data[..., 0], data[..., 1]) if data.ndim == 3 else (data, None)


def l1_objective(Y: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> np.ndarray:
    """ℓ(y) per object: Y (m, d), X (n, d), delta2 (m, n) squared dissimilarities -> (m,)."""
    out = np.empty(Y.shape[0])
    for s in _chunks(Y.shape[0], X.shape):
        out[s] = np.abs(delta2[s] - _sq(_diff(Y[s], X))).sum(axis=1)
    return out


def _chunks(m: int, xshape: tuple[int, int]) -> list[slice]:
    rows = max(1, CHUNK_ELEMENTS // max(1, xshape[0] * xshape[1]))
    return [slice(i, min(i + rows, m)) for i in range(0, m, rows)]


def _by_chunks(fn: Callable[..., Any], Y: np.ndarray, X: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, ...]:
    """Apply ``fn(Y_rows, X, data_rows) -> tuple of row arrays`` over cache-sized row chunks."""
    parts = [fn(Y[s], X, data[s]) for s in _chunks(Y.shape[0], X.shape)]
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
    length = _length(X)
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
    return _solve(lambda Y, X_, dl, local: _stress_chunk(Y, X_, dl)[0], stress_objective, stress_check, Y0, X, data,
                  further)


#: Radius of the ring starts where an object's distances put it at the centre, in map radii.
RING_MIN_RADIUS = 0.5
#: Rounds of further starts: the ring (every row), then the dense ring (rows still ``possibly_nonglobal``).
ROUNDS = 2
#: Directions of the dense ring (d = 2: evenly spaced; d ≥ 3: fixed, seeded), each at radii ρ and ρ/2.
DENSE_DIRECTIONS = 16


def ring_starts(X: np.ndarray, delta: np.ndarray, dense: bool = False,
                rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Further stress starts on a ring of radius ρ around the landmarks' centroid x̄ (docs/math.md §3.4).

    ρ² = mean_i δ_i² - mean_i ‖x_i - x̄‖² is the squared distance from the centroid that the
    object's dissimilarities imply (exact for a Euclidean object in the map's space; β for a
    classical map), at least ``RING_MIN_RADIUS`` map radii. The ring: x̄ ± ρ v_j along the map's
    d principal axes (2d starts); dense: ``DENSE_DIRECTIONS`` directions at ρ and ρ/2.

    Args:
        X: (n, d) landmark map; delta: (k, n) the objects' dissimilarities.
        rows: the objects' row numbers (default 0..k-1), returned as owners.
    Returns: (owner rows (q,), starts (q, d)).
    """
    k, d = delta.shape[0], X.shape[1]
    centre = X.mean(axis=0)
    Xc = X - centre
    rho2 = np.square(delta).mean(axis=1) - np.square(Xc).sum(axis=1).mean()
    rho = np.maximum(np.sqrt(np.maximum(rho2, 0.0)), RING_MIN_RADIUS * _length(X))
    if not dense:
        _, _, Vt = np.linalg.svd(Xc, full_matrices=False)  # rows: principal axes
        U, radii = np.concatenate([Vt, -Vt]), np.ones(1)
    elif d == 2:
        th = 2.0 * np.pi * (np.arange(DENSE_DIRECTIONS) + 0.5) / DENSE_DIRECTIONS  # between the axes
        U, radii = np.column_stack([np.cos(th), np.sin(th)]), np.array([1.0, 0.5])
    else:
        U = np.random.default_rng(0).normal(size=(DENSE_DIRECTIONS, d))
        U, radii = U / np.linalg.norm(U, axis=1, keepdims=True), np.array([1.0, 0.5])
    S = centre + (rho[:, None, None, None] * radii[None, :, None, None]) * U[None, None]  # (k, radii, dirs, d)
    owners = np.arange(k) if rows is None else np.asarray(rows)
    return np.repeat(owners, radii.size * U.shape[0]), S.reshape(-1, d)


def _stress_chunk(Y0: np.ndarray, X: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    delta, wt = _split(data)
    n = X.shape[0]
    xbar = X.mean(axis=0)
    if wt is not None:
        wsum = wt.sum(axis=1)  # Σ w_i, (k,)
        wx = wt @ X  # Σ w_i x_i, (k, d)
        wdelta = wt * delta
    settle = 1e-4 * _length(X)
    Y = Y0.copy()
    active = np.arange(Y.shape[0])
    for _ in range(MAJORIZATION_ITER):  # Guttman transforms until the steps are small
        if runtime.spent():
            break
        if active.size == 0:
            break
        D = _diff(Y[active], X)
        r = np.sqrt(_sq(D))
        with np.errstate(divide="ignore", invalid="ignore"):
            if wt is None:
                w = np.where(r > 0, delta[active] / r, 0.0)
                new = xbar + _wsum(w, D) / n
            else:  # weighted Guttman transform: (Σ w_i x_i + Σ w_i δ_i (y - x_i)/r_i) / Σ w_i
                w = np.where(r > 0, wdelta[active] / r, 0.0)
                new = (wx[active] + _wsum(w, D)) / wsum[active, None]
        moved = np.sqrt(np.square(new - Y[active]).sum(axis=1))
        Y[active] = new
        active = active[moved > settle]

    sumX = X.sum(axis=0)
    eye = np.eye(X.shape[1])

    def fun(Yr: np.ndarray, rows: np.ndarray) -> np.ndarray:
        sq = np.square(np.sqrt(_sq(_diff(Yr, X))) - delta[rows])
        return (sq if wt is None else sq * wt[rows]).sum(axis=1)

    def derivs(Yr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        D = _diff(Yr, X)
        r = np.sqrt(_sq(D))
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(r > 0, (delta[rows] if wt is None else wdelta[rows]) / r, 0.0)
            w3 = np.where(r > 0, w / np.square(r), 0.0)
        if wt is None:
            g = 2.0 * (n * Yr - sumX - _wsum(w, D))
            H = 2.0 * ((n - w.sum(axis=1))[:, None, None] * eye + _wouter(w3, D))
        else:
            g = 2.0 * (wsum[rows, None] * Yr - wx[rows] - _wsum(w, D))
            H = 2.0 * ((wsum[rows] - w.sum(axis=1))[:, None, None] * eye + _wouter(w3, D))
        return g, H

    return _damped_newton(Y, fun, derivs, NEWTON_ITER, _length(X))


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
        single = spread <= 1e-12 * _length(X)
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
        return _l1_snap(_l1_chunk(Y, X_, d2, local)[0], X_, d2)

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


def _l1_chunk(Y0: np.ndarray, X: np.ndarray, delta2: np.ndarray, local: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Continuation from Y0 (k, d): smoothing from the median residual (or ``L1_EPS_LOCAL`` when ``local``) down."""
    eye = np.eye(X.shape[1])
    length = _length(X)
    scale = np.maximum(np.abs(delta2).mean(axis=1) + np.square(X).sum(axis=1).mean(), 1e-300)
    e0 = np.abs(_sq(_diff(Y0, X)) - delta2)
    eps_final = L1_EPS_FINAL * scale
    eps = L1_EPS_LOCAL * scale if local else np.maximum(np.median(e0, axis=1), 1e-3 * scale)
    Y = Y0.copy()
    conv = np.ones(Y.shape[0], dtype=bool)
    todo = np.arange(Y.shape[0])
    for _stage in range(L1_MAX_STAGES):  # each row runs its own sequence of smoothing levels
        if todo.size == 0 or runtime.spent():
            break
        d2, e2 = delta2[todo], np.square(eps[todo])

        def fun(Yr: np.ndarray, rows: np.ndarray, d2: np.ndarray = d2, e2: np.ndarray = e2) -> np.ndarray:
            e = _sq(_diff(Yr, X)) - d2[rows]
            return np.sqrt(np.square(e) + e2[rows, None]).sum(axis=1)

        def derivs(Yr: np.ndarray, rows: np.ndarray, d2: np.ndarray = d2,
                   e2: np.ndarray = e2) -> tuple[np.ndarray, np.ndarray]:
            D = _diff(Yr, X)
            e = _sq(D) - d2[rows]
            rho = np.sqrt(np.square(e) + e2[rows, None])
            g = 2.0 * _wsum(e / rho, D)
            H = _wouter(4.0 * e2[rows, None] / rho**3, D) + (2.0 * (e / rho).sum(axis=1))[:, None, None] * eye
            return g, H

        Y[todo], conv[todo] = _damped_newton(Y[todo], fun, derivs, NEWTON_ITER, length)
        todo = todo[eps[todo] > eps_final[todo]]
        eps[todo] = np.maximum(eps[todo] * L1_EPS_FACTOR, eps_final[todo])
    conv[todo] = False  # out of stages or of time before the last smoothing level
    return Y, conv


def _l1_snap(Y: np.ndarray, X: np.ndarray, delta2: np.ndarray) -> np.ndarray:
    """Snap near-exact L1 placements (m, d) onto their vertex or piece centre; keep a snap only if ℓ does not rise."""
    m, d = Y.shape
    D = _diff(Y, X)
    sq = _sq(D)
    e = sq - delta2
    near = np.abs(e) <= SNAP_RTOL * (delta2 + sq) + 1e-300
    a = near.sum(axis=1)
    new = Y.copy()
    vertex = np.flatnonzero(a == d)
    if vertex.size:
        idx = np.argsort(~near[vertex], axis=1, kind="stable")[:, :d]
        XZ, d2Z = X[idx], np.take_along_axis(delta2[vertex], idx, axis=1)  # (k, d, d), (k, d)
        Yv = Y[vertex].copy()
        for _ in range(SNAP_ITER):  # Newton on ‖y - x_i‖² = δ_i², i ∈ Z
            Dz = Yv[:, None, :] - XZ
            J = 2.0 * Dz
            ok = np.abs(np.linalg.det(J)) > 1e-300
            step = np.zeros_like(Yv)
            step[ok] = np.linalg.solve(J[ok], (np.einsum("kid,kid->ki", Dz, Dz) - d2Z)[ok][:, :, None])[:, :, 0]
            Yv -= step
        new[vertex] = Yv
    interior = np.flatnonzero(a == 0)
    if interior.size:
        s = np.sign(e[interior])
        K = s.sum(axis=1)
        pos = K > 0
        new[interior[pos]] = (s[pos] @ X) / K[pos, None]  # centre W / K of the piece K‖y‖² - 2Wᵀy + C
    changed = np.flatnonzero(np.isfinite(new).all(axis=1) & (new != Y).any(axis=1))
    if changed.size:
        f_old = l1_objective(Y[changed], X, delta2[changed])
        f_new = l1_objective(new[changed], X, delta2[changed])
        ok = f_new <= f_old * (1 + 1e-12)
        Y = Y.copy()
        Y[changed[ok]] = new[changed[ok]]
    return Y


def _length(X: np.ndarray) -> float:
    """RMS radius of the landmark map: the length scale of convergence tests."""
    return max(float(np.sqrt(np.square(X - X.mean(axis=0)).sum(axis=1).mean())), 1e-300)


# ------------------------------------------------------------------ Newton


def _damped_newton(
    Y: np.ndarray,
    fun: Callable[[np.ndarray, np.ndarray], np.ndarray],
    derivs: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    max_iter: int,
    length: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Newton with |eigenvalue| modification and backtracking, rows independent.

    ``fun(Y_rows, rows)`` and ``derivs(Y_rows, rows)`` evaluate the criterion
    (and gradient (k, d), Hessian (k, d, d)) for the rows ``rows`` of the chunk.
    A row stops when its step is below ``STEP_RTOL`` relative to max(‖y‖,
    ``length``) (a scale of the landmark map, the same for every row, so a
    row's result does not depend on the rest of the batch) or no step
    decreases it. Returns (Y, converged).
    """
    Y = Y.copy()
    active = np.arange(Y.shape[0])
    f = fun(Y, active)
    t_last = np.ones(Y.shape[0])  # each row starts its line search near its last accepted step length
    for _ in range(max_iter):
        if active.size == 0:
            return Y, np.ones(Y.shape[0], dtype=bool)
        if runtime.spent():
            break
        Ya = Y[active]
        g, H = derivs(Ya, active)
        w, V = np.linalg.eigh(H)
        wabs = np.abs(w)
        floor = 1e-12 * wabs.max(axis=1, keepdims=True) + 1e-300
        step = -np.einsum("mde,me->md", V, np.einsum("mde,md->me", V, g) / np.maximum(wabs, floor))
        size = np.maximum(np.linalg.norm(Ya, axis=1), length)
        tiny = np.linalg.norm(step, axis=1) <= STEP_RTOL * size
        if tiny.any():  # at a stationary point already: no line search
            active, Ya, step, g = active[~tiny], Ya[~tiny], step[~tiny], g[~tiny]
            if active.size == 0:
                continue
        fa = f[active]
        t = np.minimum(1.0, 4.0 * t_last[active])
        accepted = np.zeros(active.size, dtype=bool)
        todo = np.arange(active.size)
        for _ls in range(MAX_HALVINGS):
            Yt = Ya[todo] + t[todo, None] * step[todo]
            ft = fun(Yt, active[todo])
            ok = ft <= fa[todo]
            acc = todo[ok]
            Ya[acc] = Yt[ok]
            fa[acc] = ft[ok]
            accepted[acc] = True
            todo = todo[~ok]
            if todo.size == 0:
                break
            t[todo] *= 0.5
        moved = t * np.linalg.norm(step, axis=1)
        t_last[active] = np.where(accepted, t, 1.0)
        Y[active] = Ya
        f[active] = fa
        size = np.maximum(np.linalg.norm(Ya, axis=1), length)
        done = ~accepted | (moved <= STEP_RTOL * size)
        active = active[~done]
    converged = np.ones(Y.shape[0], dtype=bool)
    converged[active] = False
    return Y, converged

