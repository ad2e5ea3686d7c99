"""Do a block's mutual dissimilarities agree with its rows? The ``inconsistent_block`` flag (docs/math.md §4.3).

A block's rows place each member against the landmarks; its mutual matrix C
says how far apart the members are. For objects of one Euclidean space both
sides come from the same inner products, and the block residual

    K0 = β − Ŷ_r Ŷ_rᵀ        (k × k; docs/math.md §4, β from C by (2.3))

is the Gram matrix of the members' parts outside the landmarks' span:
positive semidefinite. A C that contradicts the rows (scaled, zeroed, rows
and columns in another order, another block's) gives K0 a negative
eigenvalue of the order of the block's own scale. The flag is raised when

    λ_min(K0) < −(ρ + ``INCONSISTENT_RTOL``) · s,    s = Σ_p (|β_pp| + ‖ŷ_r(p)‖²),

with ρ the model's calibrated non-Euclidean ratio (0 for Euclidean
landmarks, ``core.monitor.calibration``): the negative share a member may carry and
still not be flagged ``non_euclidean``, allowed for the block as a whole.
INCONSISTENT_RTOL covers round-off (K0 is a difference of terms of size s).

Measured (``benchmarks/block_consistency.py``: 100 random landmarks, 60
blocks per case, k = 2, 4, 8, 16): on digits and wine consistent blocks reach
λ_min(K0)/s ≥ −1.3·10⁻¹⁵ and are never flagged; C·10, C = 0 and another
block's C are flagged in every block, a shuffled C in 95–100 % at k ≥ 4 (the
rest are shuffles that leave C as it was). On edit distances (docstring
lines, random strings) a consistent block's K0 is already as indefinite as
a contradicted one's (λ_min/s from −0.3 to −0.9 for true, zeroed, shuffled
and foreign C alike) and ρ is large: only C·10 is caught (65–100 %), and no
consistent block is flagged.
"""

from __future__ import annotations

import numpy as np

from ...runtime import single_blas_thread
from .prepare import BlockBatch

try:
    from ... import _native
except ImportError:  # built without a C compiler (or off x86): the numpy path
    _native = None  # type: ignore[assignment]

_cholesky_lo: np.ufunc | None
try:  # numpy's stacked Cholesky, which marks a failed matrix with NaN instead of raising for the stack
    from numpy.linalg import _umath_linalg

    _cholesky_lo = _umath_linalg.cholesky_lo
except (ImportError, AttributeError):  # pragma: no cover
    _cholesky_lo = None

#: Round-off allowance on λ_min(K0), relative to the block's scale s, by input precision.
INCONSISTENT_RTOL = {np.dtype(np.float64): 1e-7, np.dtype(np.float32): 1e-3}


def block_min_eigenvalues(batch: BlockBatch, coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(λ_min(K0) (nb,), scale s (nb,)) per block of ``batch``; coords (m, r) the members' ŷ_r, in batch order.

    One batched eigvalsh per block size.
    """
    sizes = batch.sizes
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    beta_off = np.concatenate([[0], np.cumsum(sizes * sizes)])
    lam_min = np.empty(sizes.size)
    norm2 = np.einsum("ij,ij->i", coords, coords)
    scale = np.add.reduceat(np.abs(batch.beta_self) + norm2, row_off[:-1]) if sizes.size else np.empty(0)
    with single_blas_thread():  # one stacked product and eigvalsh per block size
        for k in np.unique(sizes).tolist():
            idx = np.flatnonzero(sizes == k)
            Y = coords[row_off[idx][:, None] + np.arange(k)]  # (s, k, r)
            Beta = batch.beta[beta_off[idx][:, None] + np.arange(k * k)].reshape(-1, k, k)
            K0 = Beta - Y @ Y.transpose(0, 2, 1)
            lam_min[idx] = np.linalg.eigvalsh(0.5 * (K0 + K0.transpose(0, 2, 1)))[:, 0]
    return lam_min, scale


def inconsistent_blocks(batch: BlockBatch, coords: np.ndarray, negative_ratio: float, dtype: np.dtype,
                        backend: str | None = None) -> np.ndarray:
    """(nb,) bool: blocks whose K0 has an eigenvalue below −(ρ + round-off)·s (module doc).

    ``backend``: "compiled" (``csrc/block.c``, one block at a time, the default where built) or "numpy" (the
    stacked factorisation below); both decide the same way except on round-off at the threshold.

    Decided by a batched Cholesky factorisation of K0 + (ρ + round-off)·s·I, which exists exactly when
    no eigenvalue is below the threshold (9× fewer operations than the eigenvalues at k = 32); a numpy
    without the stacked factorisation takes the eigenvalues (``block_min_eigenvalues``).
    """
    tol = INCONSISTENT_RTOL.get(np.dtype(dtype), 1e-7)
    if _native is not None and backend != "numpy":  # the same test one block at a time in L1 (csrc/block.c)
        sizes = batch.sizes
        row_off = np.concatenate([[0], np.cumsum(sizes)])
        norm2 = np.einsum("ij,ij->i", coords, coords)
        scale = np.add.reduceat(np.abs(batch.beta_self) + norm2, row_off[:-1]) if sizes.size else np.empty(0)
        flagged = np.zeros(sizes.size, dtype=np.uint8)
        _native.block_consistency(np.ascontiguousarray(coords, dtype=np.float64),
                                  np.ascontiguousarray(batch.beta, dtype=np.float64),
                                  np.ascontiguousarray(sizes, dtype=np.int64),
                                  np.ascontiguousarray((float(negative_ratio) + tol) * scale, dtype=np.float64),
                                  flagged)
        return flagged.view(bool)
    if _cholesky_lo is None:  # pragma: no cover - a numpy without it
        lam_min, scale = block_min_eigenvalues(batch, coords)
        return lam_min < -(float(negative_ratio) + tol) * scale
    sizes = batch.sizes
    out = np.zeros(sizes.size, dtype=bool)
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    beta_off = np.concatenate([[0], np.cumsum(sizes * sizes)])
    norm2 = np.einsum("ij,ij->i", coords, coords)
    scale = np.add.reduceat(np.abs(batch.beta_self) + norm2, row_off[:-1]) if sizes.size else np.empty(0)
    with single_blas_thread():  # one stacked product and factorisation per block size
        for k in np.unique(sizes).tolist():
            idx = np.flatnonzero(sizes == k)
            Y = coords[row_off[idx][:, None] + np.arange(k)]  # (s, k, r)
            Beta = batch.beta[beta_off[idx][:, None] + np.arange(k * k)].reshape(-1, k, k)
            K0 = Beta - Y @ Y.transpose(0, 2, 1)
            shifted = 0.5 * (K0 + K0.transpose(0, 2, 1)) + ((float(negative_ratio) + tol) * scale[idx])[:, None, None] \
                * np.eye(k)
            with np.errstate(invalid="ignore"):
                factor = _cholesky_lo(shifted, signature="d->d")
            out[idx] = ~np.isfinite(factor[:, -1, -1]) | ~np.isfinite(shifted).all(axis=(1, 2))
    return out
