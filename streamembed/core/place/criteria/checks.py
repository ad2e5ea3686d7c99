"""Is a stress or L1 placement a minimum? Certificates and the directions that leave it (docs/math.md §3).

A descent method stops where it finds no descent step; that can be a saddle
or a maximum when it starts there (the projection of Trosset et al. (2025),
Example 2, is a stationary point of both criteria at which both have negative
curvature). These checks decide, per object, from the criterion's local
structure at y:

stress  σ is smooth except where y meets a landmark x_i with δ_i > 0, which
        is never a minimum (the term -2 δ_i ‖y - x_i‖ falls linearly in every
        direction). Elsewhere: gradient g = 2 Σ_i (1 - δ_i/r_i)(y - x_i) and
        Hessian H = 2 [(n - Σ_i δ_i/r_i) I + Σ_i (δ_i/r_i³)(y - x_i)(y - x_i)ᵀ],
        r_i = ‖y - x_i‖. g = 0 and H positive definite: strict local minimum;
        a negative eigenvalue: not a minimum, and its eigenvector descends.
L1      ℓ = Σ_i |e_i|, e_i = ‖y - x_i‖² - δ_i², ∇e_i = 2(y - x_i), ∇²e_i = 2I.
        With the active set Z = {i : e_i = 0} and signs s_i of the others,
        g0 = Σ_{i∉Z} s_i ∇e_i and k0 = Σ_{i∉Z} s_i:
        * |Z| < d: y is a minimum iff g0 + Σ_{i∈Z} λ_i ∇e_i = 0 with
          |λ_i| ≤ 1 and the Lagrangian's Hessian 2 (k0 + Σ λ_i) I is
          positive semidefinite on the tangent space of the active circles:
          every piece of ℓ is an isotropic quadratic, so the second-order
          condition is the sign of one number, k0 + Σ λ_i.
        * the ∇e_i (i ∈ Z) span R^d (a vertex, the usual L1 placement): the
          directional derivative ℓ'(y; u) = g0ᵀu + Σ_{i∈Z} |∇e_iᵀu| is linear
          on each cone cut out by the hyperplanes ∇e_iᵀu = 0, so ℓ' ≥ 0
          everywhere iff ℓ' ≥ 0 on the cones' edges, the lines orthogonal to
          d - 1 of the ∇e_i. ℓ' > 0 on every edge: strict (sharp) local
          minimum; an edge with ℓ' < 0 descends. With |Z| = d this is |λ_i| < 1.
A zero criterion is a global minimum (both are ≥ 0).

Status per object: ``NOT_MINIMUM`` (a descent direction exists, up to the
tolerances below), ``WEAK`` (necessary conditions hold but not strictly, or the
active set is degenerate), ``STRICT`` (sufficient conditions hold), ``GLOBAL``
(criterion zero). Directions come back as (m, p, d) unit vectors, NaN-padded.
"""

from __future__ import annotations

import itertools

import numpy as np

from .newton import differences

NOT_MINIMUM, WEAK, STRICT, GLOBAL = 0, 1, 2, 3

#: |gradient| below this share of Σ_i ‖∇ of term i‖ counts as stationary.
GRAD_RTOL = 1e-6
#: Hessian eigenvalue (relative to 2n) / L1 curvature k0 + Σλ (relative to n) below -this: not a minimum.
CURV_RTOL = 1e-8
#: |e_i| below this share of δ_i² + ‖y - x_i‖² counts as an active (zero) L1 residual.
ACTIVE_RTOL = 1e-8
#: Multiplier bound |λ_i| ≤ 1 and edge derivatives ℓ' ≥ 0 are tested to this relative tolerance.
MULT_TOL = 1e-7
#: Residuals below this share of their scale count as zero: σ ≤ ZERO_RTOL²·(Σ δ² + n·length²) and
#: ℓ ≤ ZERO_RTOL·(Σ δ² + n·length²) are global minima (both criteria are ≥ 0).
ZERO_RTOL = 1e-12
#: Vertices with more active residuals than this are not certified (status WEAK).
MAX_ACTIVE = 10


def stress_check(Y: np.ndarray, X: np.ndarray, delta: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """Certify stress placements.

    Args:
        Y: (m, d) placements; X: (n, d) landmarks; delta: (m, n) dissimilarities, or (m, n, 2)
            (δ_i, w_i) pairs for the weighted criterion Σ_i w_i (‖y - x_i‖ - δ_i)² (each term's
            gradient and Hessian scale by w_i: n becomes Σ w_i, δ_i becomes w_i δ_i below).
        length: the landmark map's length scale (RMS radius).
    Returns:
        status: (m,) int8 (NOT_MINIMUM, WEAK, STRICT, GLOBAL).
        directions: (m, 2d, d) ± the Hessian's eigenvectors, most negative first.
    """
    m, d = Y.shape
    n = X.shape[0]
    if delta.ndim == 3:
        delta, wt = delta[..., 0], delta[..., 1]
        wsum, wx, wdelta = wt.sum(axis=1), wt @ X, wt * delta
    else:
        wt, wsum, wx, wdelta = None, np.full(m, float(n)), X.sum(axis=0), delta
    D = differences(Y, X)
    r = np.sqrt(np.einsum("mnd,mnd->mn", D, D))
    on_landmark = r <= 1e-12 * length
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(on_landmark, 0.0, wdelta / r)
        w3 = np.where(on_landmark, 0.0, w / np.square(r))
    g = 2.0 * (wsum[:, None] * Y - wx - np.matmul(w[:, None, :], D)[:, 0, :])
    H = 2.0 * ((wsum - w.sum(axis=1))[:, None, None] * np.eye(d)
               + np.matmul((w3[:, :, None] * D).transpose(0, 2, 1), D))
    lam, V = np.linalg.eigh(H)
    weight = 1.0 if wt is None else wt
    gscale = 2.0 * (weight * (r + delta)).sum(axis=1) + 1e-300
    stationary = np.linalg.norm(g, axis=1) <= GRAD_RTOL * gscale
    kink = (on_landmark & (wdelta > 1e-12 * length)).any(axis=1)
    status = np.full(m, WEAK, dtype=np.int8)
    status[lam[:, 0] > CURV_RTOL * 2 * wsum] = STRICT
    status[(lam[:, 0] < -CURV_RTOL * 2 * wsum) | ~stationary | kink] = NOT_MINIMUM
    value = (weight * np.square(r - delta)).sum(axis=1)
    status[value <= ZERO_RTOL**2 * ((weight * np.square(delta)).sum(axis=1) + wsum * length**2)] = GLOBAL
    U = V.transpose(0, 2, 1)  # rows: eigenvectors, ascending eigenvalue
    return status, np.concatenate([U, -U], axis=1).reshape(m, 2, d, d).transpose(0, 2, 1, 3).reshape(m, 2 * d, d)


def _null_vector(G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors orthogonal to the d - 1 columns of G (k, d, d - 1) and whether they are unique."""
    k, d, _ = G.shape
    if d == 1:
        return np.ones((k, 1)), np.ones(k, dtype=bool)
    U, s, _ = np.linalg.svd(G, full_matrices=True)
    unique = s[:, -1] > 1e-8 * s[:, 0]
    return U[:, :, -1], unique


def l1_check(Y: np.ndarray, X: np.ndarray, delta2: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """Certify L1 placements.

    Args:
        Y: (m, d) placements; X: (n, d) landmarks; delta2: (m, n) squared dissimilarities.
        length: the landmark map's length scale (RMS radius).
    Returns:
        status: (m,) int8 (NOT_MINIMUM, WEAK, STRICT, GLOBAL).
        directions: (m, p, d) unit vectors to try when leaving a non-minimum
            (NaN-padded): the edges of a vertex, or the tangent and normal
            directions of the active circles and the negative stationarity residual.
    """
    m, d = Y.shape
    n = X.shape[0]
    D = differences(Y, X)
    sq = np.einsum("mnd,mnd->mn", D, D)
    e = sq - delta2
    active = np.abs(e) <= ACTIVE_RTOL * (delta2 + sq) + 1e-300
    s = np.where(active, 0.0, np.sign(e))
    grads = 2.0 * D  # (m, n, d)
    g0 = np.matmul(s[:, None, :], grads)[:, 0, :]
    k0 = s.sum(axis=1)
    gscale = 2.0 * np.sqrt(sq).sum(axis=1) + 1e-300
    a = active.sum(axis=1)
    status = np.full(m, WEAK, dtype=np.int8)
    blocks: list[tuple[np.ndarray, np.ndarray]] = []
    for count in np.unique(a):
        rows = np.flatnonzero(a == count)
        if count > MAX_ACTIVE:
            blocks.append((rows, np.eye(d)[None].repeat(rows.size, 0)))
            continue
        idx = np.argsort(~active[rows], axis=1, kind="stable")[:, :count]  # the active landmarks
        G = np.take_along_axis(grads[rows], idx[:, :, None], axis=1).transpose(0, 2, 1)  # (k, d, a)
        gz, kz, gs = g0[rows], k0[rows], gscale[rows]
        if count == 0:
            station = np.linalg.norm(gz, axis=1) <= GRAD_RTOL * gs
            st = np.where(kz > 0, STRICT, np.where(kz == 0, WEAK, NOT_MINIMUM))
            st[~station] = NOT_MINIMUM
            status[rows] = st
            res = -gz / np.maximum(np.linalg.norm(gz, axis=1, keepdims=True), 1e-300)
            axes = np.eye(d)[None].repeat(rows.size, 0)
            blocks.append((rows, np.concatenate([axes, -axes, res[:, None]], axis=1)))
            continue
        if count < d:
            status[rows], dirs = _l1_manifold(G, gz, kz, gs, n)
        else:
            status[rows], dirs = _l1_vertex(G, gz, gs)
        blocks.append((rows, dirs))
    value = np.abs(e).sum(axis=1)
    status[value <= ZERO_RTOL * (delta2.sum(axis=1) + n * length**2)] = GLOBAL
    p = max(b.shape[1] for _, b in blocks)
    out = np.full((m, p, d), np.nan)
    for rows, b in blocks:
        out[rows, : b.shape[1]] = b
    return status, out


def _l1_manifold(G: np.ndarray, g0: np.ndarray, k0: np.ndarray, gscale: np.ndarray,
                 n: int) -> tuple[np.ndarray, np.ndarray]:
    """0 < |Z| < d: multipliers, stationarity, isotropic second-order condition; directions."""
    k, d, a = G.shape
    GtG = np.matmul(G.transpose(0, 2, 1), G)
    ok_rank = np.linalg.cond(GtG) < 1e12
    GtG = np.where(ok_rank[:, None, None], GtG, np.eye(a))
    lam = -np.linalg.solve(GtG, np.matmul(G.transpose(0, 2, 1), g0[:, :, None]))[:, :, 0]
    resid = g0 + np.matmul(G, lam[:, :, None])[:, :, 0]
    station = np.linalg.norm(resid, axis=1) <= GRAD_RTOL * gscale
    big = np.abs(lam).max(axis=1)
    curv = k0 + lam.sum(axis=1)
    st = np.full(k, WEAK, dtype=np.int8)
    st[(big < 1 - MULT_TOL) & (curv > CURV_RTOL * n)] = STRICT
    st[~station | (big > 1 + MULT_TOL) | (curv < -CURV_RTOL * n)] = NOT_MINIMUM
    st[~ok_rank] = WEAK
    U, _, _ = np.linalg.svd(G, full_matrices=True)
    tangent = U[:, :, a:].transpose(0, 2, 1)  # (k, d - a, d)
    normal = np.matmul(G, np.linalg.inv(GtG)).transpose(0, 2, 1)  # row j: leaves circle j only
    normal /= np.maximum(np.linalg.norm(normal, axis=2, keepdims=True), 1e-300)
    res = -resid / np.maximum(np.linalg.norm(resid, axis=1, keepdims=True), 1e-300)
    dirs = np.concatenate([tangent, -tangent, normal, -normal, res[:, None]], axis=1)
    return st, dirs


def _l1_vertex(G: np.ndarray, g0: np.ndarray, gscale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|Z| ≥ d: ℓ' on every edge of the arrangement of the active hyperplanes; the edges as directions."""
    k, d, a = G.shape
    rays, unique = [], []
    for S in itertools.combinations(range(a), d - 1):
        u, ok = _null_vector(G[:, :, list(S)])
        rays.append(u)
        unique.append(ok)
    R = np.stack(rays, axis=1)  # (k, q, d)
    R = np.concatenate([R, -R], axis=1)
    valid = np.concatenate([np.stack(unique, axis=1)] * 2, axis=1)
    slope = np.einsum("kqd,kd->kq", R, g0) + np.abs(np.einsum("kqd,kda->kqa", R, G)).sum(axis=2)
    slope = np.where(valid, slope, np.inf) / gscale[:, None]
    low = slope.min(axis=1)
    spans = np.linalg.matrix_rank(G) == d
    st = np.full(k, WEAK, dtype=np.int8)
    st[low > MULT_TOL] = STRICT
    st[low < -MULT_TOL] = NOT_MINIMUM
    st[~spans] = WEAK
    R = np.where(valid[:, :, None], R, np.nan)
    order = np.argsort(slope, axis=1, kind="stable")  # steepest descent edges first
    return st, np.take_along_axis(R, order[:, :, None], axis=1)
