"""Block RR problems with known structure, and a brute-force global minimiser."""

from __future__ import annotations

import numpy as np
import scipy.optimize

from streamembed import LandmarkMDS
from streamembed.core.runtime import single_blas_thread
from streamembed.core.place.block.solve import block_objective
from streamembed.core.inputs.centering import center_block

from ...conftest import euclidean

KINDS = ("normal", "near_hard", "off_span", "in_span")


def block_problem(rng: np.random.Generator, k: int, d: int, kind: str = "normal", n: int | None = None,
                  p: int | None = None):
    """A block of k objects against n landmarks in R^p, d kept axes.

    Objects have an in-span part (the landmarks' R^p) and 1–3 extra dimensions
    the landmarks do not reach:
      normal     in-span part like the landmarks', off-span part of size 0–3;
      near_hard  in-span part shrunk by 0.01–0.3: the block lies mostly off the kept span;
      off_span   no in-span part at all (C = 0 up to round-off: the hard case, docs/math.md §3);
      in_span    no off-span part and d = p (recovered exactly by every method).
    Returns (C (k, d), Beta (k, k), lam (d,), ‖B‖²_F, model, A, cross).
    """
    p = (d if kind == "in_span" else d + int(rng.integers(0, 4))) if p is None else p
    n = int(rng.integers(p + 2, 3 * p + 10)) if n is None else n
    extra = int(rng.integers(1, 4))
    L = rng.normal(size=(n, p))
    Z = rng.normal(size=(k, p))
    off = rng.normal(size=(k, extra)) * rng.uniform(0.0, 3.0)
    if kind == "near_hard":
        Z *= rng.uniform(0.01, 0.3)
        off *= 2.0
    elif kind == "off_span":
        Z[:] = L.mean(axis=0)
        off = rng.normal(size=(k, extra)) * rng.uniform(1.0, 3.0)
    elif kind == "in_span":
        off[:] = 0.0
    Lx = np.hstack([L, np.zeros((n, extra))])
    Zx = np.hstack([Z, off])
    model = LandmarkMDS(n_components=d).fit(euclidean(L, L))
    A, cross = euclidean(Zx, Lx), euclidean(Zx, Zx)
    B, Beta = center_block(A**2, cross**2, model.spectrum_.row_means, model.spectrum_.grand_mean)
    C = B @ model.spectrum_.eigenvectors[:, :d]
    return C, Beta, model.eigenvalues_[:d].copy(), float((B**2).sum()), model, A, cross


def brute_force(C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, b_norm2: float, rng: np.random.Generator,
                n_starts: int = 30) -> float:
    """Smallest F over n_starts independent L-BFGS runs from random configurations.

    Starts are normal at the block's own scale times e^U(-1, 1); each run
    stops at a gradient of 1e-10 (SciPy's L-BFGS-B, the analytic gradient).
    """
    k, d = C.shape
    sl = np.sqrt(lam)

    def fg(flat):
        Y = flat.reshape(k, d)
        R = Y @ Y.T - Beta
        f = 2.0 * (np.square(Y * sl - C)).sum() + (R * R).sum()
        return f, (4.0 * (Y * lam - C * sl) + 4.0 * R @ Y).ravel()

    scale = np.sqrt(np.abs(np.diagonal(Beta)).mean() / d) + 1e-300
    best = np.inf
    with single_blas_thread():
        for _ in range(n_starts):
            y0 = rng.normal(size=k * d) * scale * np.exp(rng.uniform(-1.0, 1.0))
            res = scipy.optimize.minimize(fg, y0, jac=True, method="L-BFGS-B",
                                          options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 20000, "maxcor": 20})
            best = min(best, block_objective(res.x.reshape(k, d), C, Beta, lam, b_norm2))
    return best
