"""Leave-one-out kernels from one eigendecomposition: the calibration's refits without refitting (docs/math.md §4.3).

The ``non_euclidean`` flag's calibration places landmark i against the
classical MDS of the other n − 1 (``calibration``). Refitting costs a full
eigendecomposition of (n − 1)² per landmark; here one eigendecomposition of
the whole kernel B = V diag(w) Vᵀ serves them all.

**The left-out kernel is a compression of B.** Double centring over the
other n − 1 objects is B compressed to the hyperplane orthogonal to
q = (e_i − e/n) / ‖e_i − e/n‖: for any centring weights s and t (summing to
1), (I − e sᵀ)(I − e tᵀ) = I − e sᵀ, so the kernel centred on the others is
(I − e sᵀ) B (I − s eᵀ) with s uniform on them; on their coordinates that is
C B C with C the projector orthogonal to e_i and e, and since Be = 0,
C B C = (I − qqᵀ) B (I − qqᵀ). Its eigenvalues μ other than the two zeros
of q and e are the roots of the secular equation

    f(μ) = Σ_j c_j² / (w_j − μ) = 0,      c = Vᵀ q,                            (L.1)

one strictly between each pair of consecutive eigenvalues w_{k+1} < μ_k < w_k
(interlacing), with eigenvector x_k = V (diag(w) − μ_k)⁻¹ c / ‖·‖; pairs with
c_j = 0 stay eigenpairs (deflation; equal w_j are first rotated so that
only one of them has c_j ≠ 0). Landmark i's projection on the left-out map
needs only x_kᵀ b = Σ_j c_j g_j / (w_j − μ_k) / ‖(diag(w) − μ_k)⁻¹ c‖ with
g = Vᵀ b: O(n²) per landmark (two products with V) plus O(n r) per root
iteration, against O(n³) for a refit.

**What a refit would decide is decided the same way.** The monitored rank
of the left-out spectrum (``cmds.monitored_rank``) needs its largest
eigenvalue, how many exceed the round-off tolerance and the floor (each a
count of roots above a level t: all roots between poles above t, and the one
in the interval holding t exactly when f(t) < 0, f increasing there), and
whether its negative share exceeds ``NEGATIVE_SHARE_TOL``: true when its most
negative eigenvalue alone exceeds that share of Σ|w| (the compression cannot
raise the trace norm), false when no eigenvalue is below −tol. In between,
or when a root does not converge, the landmark is refitted as before (None).

Roots are found by the "middle way" of Li (1993), as LAPACK's ``dlaed4``:
each step solves a two-pole rational model that matches f and f′ at the
iterate, safeguarded by bisection; the unknown is the offset from the
nearer pole, so roots next to a pole keep their relative accuracy.
"""

from __future__ import annotations

import numpy as np

from ..fit.cmds import NEGATIVE_SHARE_TOL, SPECTRUM_FLOOR, positive_tolerance

__all__ = ["LeaveOneOut"]

_EPS = float(np.finfo(np.float64).eps)
#: Root iterations before a landmark falls back to a refit (quadratic convergence: 4–8 are usual).
MAX_ROOT_ITERATIONS = 60


class LeaveOneOut:
    """The leave-one-out projections of landmarks, from the eigendecomposition of their whole kernel.

    Args:
        D: (n, n) the dissimilarities the kernel was built on.
        w: (n,) every eigenvalue of B = −½ J D² J, descending; V: (n, n) the eigenvectors.
    """

    def __init__(self, D: np.ndarray, w: np.ndarray, V: np.ndarray):
        self.n = int(D.shape[0])
        self.D2 = np.square(np.asarray(D, dtype=np.float64))
        self.m = self.D2.mean(axis=1)
        self.w = np.asarray(w, dtype=np.float64)
        self.V = np.asarray(V, dtype=np.float64)
        self.col_mean = self.V.mean(axis=0)
        self.trace_norm = float(np.abs(self.w).sum())
        self.scale = float(np.abs(self.w).max(initial=0.0))

    def ratio(self, i: int, n_components: int, n_residual: int | None) -> list[float] | None:
        """[−k0(l_i)/β(l_i)] of landmark i against the map of the others ([] when β ≤ 0), or None: refit it."""
        n = self.n
        c = (self.V[i] - self.col_mean) / np.sqrt(1.0 - 1.0 / n)
        keep = np.arange(n) != i
        m_other = (n * self.m - self.D2[:, i]) / (n - 1)  # row means of D² over the others
        g_other = float(m_other[keep].mean())
        a2 = self.D2[i]
        b = np.where(keep, a2 - m_other, 0.0)
        beta = float(a2[keep].mean()) - 0.5 * g_other
        g = self.V.T @ b
        found = self._top_projection(c, g, n_components, n_residual)
        if found is None:
            return None
        k0 = beta - found
        return [-k0 / beta] if beta > 0 else []

    def _top_projection(self, c: np.ndarray, g: np.ndarray, n_components: int,
                        n_residual: int | None) -> float | None:
        """Σ z_k² over the left-out map's monitored eigenpairs (module docstring), or None."""
        n = self.n
        w = self.w
        tiny = 8.0 * _EPS
        alive = np.abs(c) > tiny
        # equal eigenvalues: rotate their (c, g) so that one of them carries the whole c
        c, g, alive = c.copy(), g.copy(), alive.copy()
        idx = np.flatnonzero(alive)
        for a, b in zip(idx[:-1], idx[1:], strict=True):
            if w[a] - w[b] <= tiny * self.scale and alive[a]:
                r = float(np.hypot(c[a], c[b]))
                cs, sn = c[b] / r, c[a] / r
                c[b], c[a] = r, 0.0
                g[a], g[b] = cs * g[a] - sn * g[b], sn * g[a] + cs * g[b]
                alive[a] = False
        poles, zeta, cg = w[alive], np.square(c[alive]), c[alive] * g[alive]
        fixed_w, fixed_g = w[~alive], g[~alive]  # deflated: still eigenpairs of the compression
        p = poles.size
        if p < 2:
            return None
        secular = _Secular(poles, zeta)
        top_root = secular.roots(np.array([0]))
        if top_root is None:
            return None
        lam1 = max(float(top_root[0]), float(fixed_w.max(initial=-np.inf)))
        tol = positive_tolerance(lam1, n - 1, np.dtype(np.float64))
        last = secular.roots(np.array([p - 2]))
        if last is None:
            return None
        lam_min = min(float(last[0]), float(fixed_w.min(initial=np.inf)))
        positive = secular.count_above(tol) + int((fixed_w > tol).sum())
        if positive == 0:
            return None
        d = min(int(n_components), n - 2)
        if lam_min >= -tol:
            r = positive  # no negative eigenvalue beyond round-off: Euclidean, every positive eigenpair kept
        elif -lam_min > NEGATIVE_SHARE_TOL * self.trace_norm:
            kept = secular.count_above(SPECTRUM_FLOOR * lam1, inclusive=True) + int(
                (fixed_w >= SPECTRUM_FLOOR * lam1).sum())
            r = min(positive, max(min(kept, positive), d))
        else:
            return None  # a negative share too close to the threshold to decide without every eigenvalue
        if n_residual is not None:
            r = min(int(n_residual), r)
        n_roots = min(r, p - 1)
        mu = secular.roots(np.arange(n_roots))
        if mu is None:
            return None
        # the r largest of roots and deflated eigenvalues, with their squared projections
        values = np.concatenate([mu, fixed_w])
        diffs = secular.offsets()  # (n_roots, p): w_j − μ_k, accurate next to the poles
        num = (cg / diffs).sum(axis=1)
        den = (zeta / np.square(diffs)).sum(axis=1)
        proj2 = np.concatenate([np.square(num) / den, np.square(fixed_g)])
        top = np.argsort(-values, kind="stable")[:r]
        if not (values[top] > 0).all():
            return None
        return float((0.25 * proj2[top] / values[top]).sum())


class _Secular:
    """Roots of f(μ) = Σ_j ζ_j / (ω_j − μ) for poles ω descending, weights ζ > 0 (root k lies in (ω_{k+1}, ω_k))."""

    def __init__(self, poles: np.ndarray, zeta: np.ndarray):
        self.w, self.z = poles, zeta
        self._last: tuple[np.ndarray, np.ndarray] = (np.empty((0, poles.size)), np.empty(0))  # (δ, τ) of the last roots

    def f(self, mu: float) -> float:
        return float((self.z / (self.w - mu)).sum())

    def count_above(self, t: float, inclusive: bool = False) -> int:
        """How many roots exceed t (``inclusive``: are at least t)."""
        w = self.w
        poles_above = int((w > t).sum())
        if poles_above == 0:
            return 0
        if poles_above == w.size:
            return w.size - 1
        value = self.f(t)
        return poles_above - 1 + int(value < 0 or (inclusive and value == 0))

    def roots(self, ks: np.ndarray) -> np.ndarray | None:
        """μ_k for root indices ``ks`` (0-based), or None when one does not converge."""
        w, z = self.w, self.z
        k = np.asarray(ks, dtype=np.int64)
        hi_pole, lo_pole = k, k + 1
        mid = 0.5 * (w[hi_pole] + w[lo_pole])
        f_mid = (z[None, :] / (w[None, :] - mid[:, None])).sum(axis=1)
        # the root lies on the side of the midpoint where f changes sign: measure from the pole on that side
        origin = np.where(f_mid >= 0, lo_pole, hi_pole)
        delta = w[None, :] - w[origin][:, None]  # (K, p): ω_j − ω_origin, exact at the origin
        lo = np.where(origin == lo_pole, 0.0, mid - w[hi_pole])  # bracket of τ = μ − ω_origin
        hi = np.where(origin == lo_pole, mid - w[lo_pole], 0.0)
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        tau = 0.5 * (lo + hi)
        rows = np.arange(k.size)
        d_lo, d_hi = delta[rows, lo_pole], delta[rows, hi_pole]
        above = np.arange(w.size)[None, :] <= k[:, None]  # the poles at or above the interval
        done = np.zeros(k.size, dtype=bool)
        for _ in range(MAX_ROOT_ITERATIONS):
            diff = delta - tau[:, None]
            terms = z[None, :] / diff
            fval = terms.sum(axis=1)
            deriv = terms / diff
            s_up = np.where(above, deriv, 0.0).sum(axis=1)
            s_low = deriv.sum(axis=1) - s_up
            lo = np.where(fval < 0, np.maximum(lo, tau), lo)
            hi = np.where(fval > 0, np.minimum(hi, tau), hi)
            # the two-pole model a + s/(Δ1 − η) + S/(Δ2 − η) matching f and f′ at τ
            D1, D2 = d_lo - tau, d_hi - tau
            s, S = s_low * D1 * D1, s_up * D2 * D2
            a = fval - s / D1 - S / D2
            eta = _model_step(a, s, S, D1, D2, fval)
            # converged: f is at its own round-off (a sum of p terms), the model's step at that of the offset,
            # or the bracket has closed
            small = 4.0 * _EPS * np.abs(tau)
            noise = 16.0 * _EPS * np.abs(terms).sum(axis=1)
            done = (np.abs(fval) <= noise) | (np.abs(eta) <= small) | (hi - lo <= small)
            if done.all():
                break
            new = tau + eta
            bad = ~np.isfinite(new) | (new <= lo) | (new >= hi)
            tau = np.where(done, tau, np.where(bad, 0.5 * (lo + hi), new))
        if not done.all():
            return None
        self._last = (delta, tau)
        return w[origin] + tau

    def offsets(self) -> np.ndarray:
        """(K, p) ω_j − μ_k for the K roots of the last ``roots`` call, from their offsets (no cancellation)."""
        delta, tau = self._last
        return delta - tau[:, None]


def _model_step(a: np.ndarray, s: np.ndarray, S: np.ndarray, D1: np.ndarray, D2: np.ndarray,
                fval: np.ndarray) -> np.ndarray:
    """η with a + s/(D1 − η) + S/(D2 − η) = 0 and D1 < η < D2 (the model's one root there).

    Multiplied out: a η² − (a (D1 + D2) + s + S) η + D1 D2 f = 0, f = a + s/D1 + S/D2 the value at η = 0.
    """
    B = a * (D1 + D2) + s + S
    C = D1 * D2 * fval
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = np.sqrt(np.maximum(B * B - 4.0 * a * C, 0.0))
        q = -0.5 * (-B - np.where(B >= 0, 1.0, -1.0) * disc)  # the larger-magnitude root's numerator
        r1 = np.where(q != 0, C / q, 0.0)  # product of the roots = C / a: the smaller one
        r2 = np.where(a != 0, q / a, np.inf)
        linear = np.where(B != 0, C / B, 0.0)
    inside1 = (r1 > D1) & (r1 < D2)
    eta = np.where(inside1, r1, r2)
    return np.where(a == 0, linear, eta)
