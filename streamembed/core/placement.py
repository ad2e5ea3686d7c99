"""Placing a batch on a fitted map: method dispatch, residuals and flags (docs/math.md §2–4).

``place(model, A, C, method=...)`` is what ``LandmarkModel.place`` runs. Every
formula lives in its own module (``projection``, ``restricted``, ``block``,
``criteria``, ``residuals``, ``bounds``); this module only routes rows to them:

1. raw rows -> the input pipeline (``core.transforms``; nothing for a plain
   dissimilarity model, whose rows go straight to the fused kernel);
2. the fused projection kernel gives ŷ and β for every row and finds the
   rows that need a closer look (NaN, inf, negative entries);
3. the method: projection as is, restricted reconstruction through the
   secular equation, stress / L1 by their criteria, a block by block RR;
4. exact k0 on the requested sample of rows, flags, blanked invalid rows.

Two guards keep every number meaningful (docs/math.md §2, §4):

- **range**: a row whose mean squared dissimilarity exceeds what this model
  can place in the row's dtype (``range_limit``: its coordinates, β and ‖ŷ‖²
  must stay finite, and keep three significant digits through the
  centring's cancellation) is refused as ``out_of_range`` before any
  iterative method sees it — never an output with inf, or one made of
  round-off;
- **non-Euclidean flag**: a row is flagged ``non_euclidean`` when β < 0, or
  when −k0/β exceeds the model's ``negative_ratio`` (beyond round-off): the
  most negative −k0/β any landmark had when placed as an arrival against
  the others (``core.calibration``; 0 for Euclidean landmarks). So on
  non-Euclidean data (edit distances) the flag picks out the rows that are
  non-Euclidean *beyond* what the data set is, not every row.

All results are in the model's own frame; ``LandmarkModel.place`` aligns them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal
from collections.abc import Sequence

import numpy as np

from . import validation
from .block import solve_blocks
from .block_consistency import inconsistent_blocks
from .block_input import BlockBatch, BlockProblem, prepare_blocks
from .bounds import WindowBounds, window_bounds
from .centering import center_block
from .criteria import solve_l1, solve_sammon, solve_stress
from .errors import InputError
from .flags import (FLAG_AMBIGUOUS, FLAG_BLOCK, FLAG_ESCAPED, FLAG_INCONSISTENT_BLOCK, FLAG_NON_EUCLIDEAN,
                    FLAG_NOT_CONVERGED, FLAG_POSSIBLY_NONGLOBAL)
from .residuals import K0_RTOL, block_k0, k0_diagonal, landmark_trace, round_off, spectral_norm, unexplained
from .restricted import AMBIGUITY_RTOL, AMBIGUITY_RTOL_F32, restricted_arc, solve_restricted
from .result import EmbeddingResult
from .validation import Problem

if TYPE_CHECKING:
    from .model import LandmarkModel

__all__ = ["place", "place_blocks", "residuals", "arc", "core_dissimilarities", "block_residual", "K0_RTOL"]

#: ``k0_rows``: exact k0 for no rows (None), every row ("all"), or s rows evenly spread.
K0Rows = Literal["all"] | int | None

def place(model: LandmarkModel, A: object, C: object = None, *, method: str = "projection",
          k0_rows: None | Literal["all"] | int = None, errors: str = "raise",
          self_similarity: object = None) -> EmbeddingResult:
    """Embed a batch in the model's own frame.

    Args:
        A: (m, n) dissimilarities (not squared) to the landmarks, float32 or
           float64 (the hot path runs in that precision); for a similarity
           model (m, n) similarities, or (m, n + 1) with k(z, z) last.
        C: (m, m) mutual dissimilarities (similarities for a similarity model,
           whose diagonal then gives k(z, z)): the batch is one block (multi-point RR).
        method: one of ``model.METHODS`` for single objects.
        k0_rows: exact k0 for None (no rows), "all", or an int s (s evenly
           spaced rows: a deterministic sample).
        errors: "raise" (InputError on the first bad row) or "mask" (bad rows
           get valid=False, a Problem and NaN numbers).
        self_similarity: (m,) k(z, z) for a similarity model with (m, n) rows.
    """
    model.check_method(method, block=C is not None)
    if errors not in ("raise", "mask"):
        raise InputError(f"errors must be 'raise' or 'mask', got {errors!r}")
    if self_similarity is not None and model.pipeline.similarity is None:
        raise InputError("self_similarity is only for input='similarity' models")
    if not model.pipeline.identity:
        return _place_transformed(model, A, C, self_similarity, method, k0_rows, errors)
    A_arr = validation.check_rows(A, model.n_landmarks, "A")
    if C is not None:
        return _place_block(model, A_arr, C, k0_rows, errors)
    return _place_rows(model, A_arr, None, None, method, k0_rows, errors)


def _place_rows(model: LandmarkModel, A_arr: np.ndarray, valid: np.ndarray | None,
                reasons: list[Problem | None] | None, method: str, k0_rows: K0Rows, errors: str) -> EmbeddingResult:
    """Single objects from dissimilarities A_arr (m, n) the spectrum is built on."""
    d = int(model.n_components)
    Z, suspect = model.kernel(d, A_arr.dtype)(A_arr)
    m = A_arr.shape[0]
    valid = np.ones(m, dtype=bool) if valid is None else valid
    reasons = [None] * m if reasons is None else reasons
    for i in np.flatnonzero(suspect & valid):
        why = validation.describe_bad_row(A_arr[i], "A")
        if why is not None:
            if errors == "raise":
                raise InputError(f"row {i} of A is invalid: {why}")
            valid[i], reasons[i] = False, why
    with np.errstate(invalid="ignore", over="ignore"):
        # Z[:, d] = β = (mean squared dissimilarity) - g/2: compared in place, no copy of the column
        half_g = 0.5 * model.spectrum.grand_mean
        limit, why_limit = range_limit(model, A_arr.dtype)
        for i in np.flatnonzero(valid & ~(Z[:, d] <= limit - half_g)):
            why = Problem("out_of_range", _range_detail(model, float(Z[i, d]) + half_g, limit, why_limit,
                                                          A_arr.dtype))
            if errors == "raise":
                raise InputError(f"row {i} of A is invalid: {why}")
            valid[i], reasons[i] = False, why
        return _finish(model, A_arr, Z, valid, reasons, method, k0_rows)


def energy_limit(model: LandmarkModel, dtype: np.dtype) -> float:
    """The largest mean squared dissimilarity of a row this model places without overflow (squared units).

    With E that mean, every projected coordinate and β is at most
    n²·E·max|W| in magnitude (W the fused projection matrix), so E is
    limited by the dtype's range for those, and by float64's for ‖ŷ‖²
    (d of them squared), with a factor 16 of headroom each.
    """
    def compute() -> float:
        W = model.kernel(int(model.n_components), np.dtype(dtype)).W
        n, d = model.n_landmarks, int(model.n_components)
        bound = n * n * max(float(np.abs(W).max()), np.finfo(np.float64).tiny)
        big = min(float(np.finfo(dtype).max) / 16.0, float(np.sqrt(np.finfo(np.float64).max / (16.0 * d))))
        return big / bound

    return model.cached(("energy_limit", np.dtype(dtype).str), compute)


#: Relative precision a placement keeps at the edge of the placeable range (docs/math.md §4.4).
PLACEMENT_RTOL = 1e-3


def precision_limit(model: LandmarkModel, dtype: np.dtype) -> float:
    """The largest mean squared dissimilarity E whose placement keeps ``PLACEMENT_RTOL`` relative precision.

    Centring cancels the part of a row common to all landmarks: values of
    size E leave a rounding error of about eps·E, while the coordinates of
    an object that far out are of size √(E·g) (g the landmarks' mean
    squared dissimilarity). Their relative error eps·√(E/g) stays below
    ``PLACEMENT_RTOL`` for E ≤ g·(PLACEMENT_RTOL/eps)²: about 7·10⁷·g in
    float32, 2·10²⁵·g in float64. Beyond it a placement is round-off.
    """
    g = max(float(model.spectrum.grand_mean), float(np.finfo(np.float64).tiny))
    return g * (PLACEMENT_RTOL / float(np.finfo(dtype).eps)) ** 2


def range_limit(model: LandmarkModel, dtype: np.dtype) -> tuple[float, str]:
    """(the largest placeable mean squared dissimilarity in ``dtype``, what sets it: "precision" or "overflow")."""
    over, prec = energy_limit(model, dtype), precision_limit(model, dtype)
    return (prec, "precision") if prec <= over else (over, "overflow")


def _range_detail(model: LandmarkModel, energy: float, limit: float, why: str, dtype: np.dtype) -> str:
    name = np.dtype(dtype).name
    what = (f"beyond it a {name} placement keeps fewer than three significant digits" if why == "precision"
            else f"beyond it a {name} placement would overflow")
    return (f"the mean squared dissimilarity {energy:.3g} exceeds {limit:.3g}, the largest this model can place "
            f"({what}; its landmarks' is {model.spectrum.grand_mean:.3g})")


def _finish(model: LandmarkModel, A_arr: np.ndarray, Z: np.ndarray, valid: np.ndarray,
            reasons: list[Problem | None], method: str, k0_rows: K0Rows) -> EmbeddingResult:
    d = int(model.n_components)
    lam = model.eigenvalues
    m = A_arr.shape[0]
    y = Z[:, :d].astype(np.float64)
    beta = Z[:, d].astype(np.float64)
    flags = np.zeros(m, dtype=np.uint32)
    t = np.full(m, np.nan)
    unexpl = unexplained(beta, y)
    if method == "restricted":
        c = y * np.sqrt(lam)
        rtol = AMBIGUITY_RTOL_F32 if np.dtype(A_arr.dtype) == np.float32 else AMBIGUITY_RTOL
        if valid.all():
            sol = solve_restricted(c, beta, lam, rtol)
            y, t, flags = sol.y, sol.t, sol.flags
        else:
            rows = np.flatnonzero(valid)
            sol = solve_restricted(c[rows], beta[rows], lam, rtol)
            y[rows], t[rows], flags[rows] = sol.y, sol.t, sol.flags
    elif method in ("stress", "l1"):
        rows = np.flatnonzero(valid)
        if rows.size:
            X = model.natural_embedding
            delta = model.map_dissimilarities(A_arr[rows])  # f(δ) on a non-metric map (core.ordinal_map)
            y0 = y[rows] if model.landmark_map is None else _map_start(model, delta)
            if method == "l1":
                crit = solve_l1(y0, X, np.square(delta))
            elif model.fit_params.get("landmark_map") == "sammon":  # the map's own criterion (docs/math.md §3.5)
                crit = solve_sammon(y0, X, delta)
            else:
                crit = solve_stress(y0, X, delta)
            y[rows] = crit.y
            flags[rows[~crit.converged]] |= FLAG_NOT_CONVERGED
            flags[rows[crit.escaped]] |= FLAG_ESCAPED
            flags[rows[crit.ambiguous]] |= FLAG_AMBIGUOUS
            flags[rows[crit.possibly_nonglobal]] |= FLAG_POSSIBLY_NONGLOBAL
    k0 = np.full(m, np.nan)
    sample = _k0_sample(k0_rows, np.flatnonzero(valid))
    coords = None
    if sample.size:
        coords, beta_r = model.project_r(A_arr[sample])
        k0[sample] = k0_diagonal(beta_r, coords)
        flags[sample] |= _non_euclidean(model, k0[sample], beta[sample], A_arr.dtype)
    flags[(beta < 0) & valid] |= FLAG_NON_EUCLIDEAN
    lost = valid & ~np.isfinite(unexpl)  # a non-finite coordinate makes β - ‖y‖² non-finite too
    for i in np.flatnonzero(lost):  # never expected past the range guard: never an output with inf
        valid[i], reasons[i] = False, Problem("out_of_range", "the placement overflowed (non-finite result)")
    placed = None if method == "projection" else beta - np.einsum("ij,ij->i", y, y)
    res = EmbeddingResult(y=y, beta=beta, unexplained=unexpl, k0=k0, t=t, flags=flags, valid=valid, reasons=reasons,
                          method=method, residual_rows=sample if sample.size else None, residual_coords=coords,
                          unexplained_placed=placed)
    if not valid.all():
        _blank(res, ~valid)
    return res


def _map_start(model: LandmarkModel, A_rows: np.ndarray) -> np.ndarray:
    """Least-squares start on a refined map: y0 = (XᵀX)⁻¹ Xᵀ b (m, d) (docs/math.md §3 with X the map).

    X is centred, so b's constant terms vanish: y0 = -½ (a2 - m_Δ) X (XᵀX)⁻¹.
    For the CMDS map this is the projection ŷ. On a non-metric map A_rows are
    disparities f(δ) and m_Δ the map's own ‖x_i‖² (its disparities' row means
    up to a constant, which cancels).
    """
    X = model.landmark_map
    assert X is not None
    a2 = np.square(A_rows.astype(np.float64))
    m_delta = model.spectrum.row_means if model.map_transform is None else np.einsum("ij,ij->i", X, X)
    return -0.5 * (a2 - m_delta) @ (X @ np.linalg.inv(X.T @ X))


def _k0_sample(k0_rows: None | str | int, valid_rows: np.ndarray) -> np.ndarray:
    if k0_rows is None or valid_rows.size == 0:
        return np.empty(0, dtype=np.int64)
    if isinstance(k0_rows, str):
        if k0_rows != "all":
            raise InputError(f"k0_rows must be None, 'all' or an int, got {k0_rows!r}")
        return valid_rows
    s = int(k0_rows)
    if s < 0:
        raise InputError(f"k0_rows must be non-negative, got {s}")
    if s >= valid_rows.size:
        return valid_rows
    return valid_rows[np.linspace(0, valid_rows.size - 1, s).round().astype(np.int64)] if s else valid_rows[:0]


def _non_euclidean(model: LandmarkModel, k0: np.ndarray, beta: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """FLAG_NON_EUCLIDEAN where k0 < −ρ·β beyond round-off (ρ: the model's calibrated ``negative_ratio``)."""
    tol = round_off(beta, k0, K0_RTOL.get(np.dtype(dtype), 1e-7))
    ratio = model.negative_ratio if model.negative_ratio is not None else landmark_negative_ratio(model)
    allowed = ratio * np.maximum(beta, 0.0)
    return np.where(k0 < -(allowed + tol), FLAG_NON_EUCLIDEAN, 0).astype(np.uint32)


def landmark_negative_ratio(model: LandmarkModel) -> float:
    """ρ_L = max over landmarks of −k0(l)/β(l), for models saved without a calibrated ``negative_ratio``.

    For landmark i, β(l_i) = B_ii and k0(l_i) = B_ii − Σ_{j≤r} λ_j U_ij² (docs/math.md §4):
    zero for Euclidean landmarks, minus the landmark's share of the negative
    eigenvalues otherwise. Objects of the same non-Euclidean kind carry as much.
    """
    def compute() -> float:
        sp = model.spectrum
        beta_l = sp.row_means - 0.5 * sp.grand_mean
        k0_l = beta_l - (np.square(sp.eigenvectors) * sp.eigenvalues).sum(axis=1)
        ok = beta_l > 0
        return float(np.max(np.maximum(-k0_l[ok] / beta_l[ok], 0.0), initial=0.0))

    return model.cached("negative_ratio", compute)


def _place_block(model: LandmarkModel, A: np.ndarray, C: object, k0_rows: K0Rows, errors: str) -> EmbeddingResult:
    """One block (core dissimilarities A (k, n), C (k, k)): ``place_blocks`` with a single block."""
    return _blocks(model, A, [C], np.array([A.shape[0]]), k0_rows, errors, name="C")


def place_blocks(model: LandmarkModel, A: object, cross: Sequence[Any], sizes: Sequence[int] | None = None, *,
                 k0_rows: None | Literal["all"] | int = None, errors: str = "raise",
                 max_block_rows: int | None = None) -> EmbeddingResult:
    """Block restricted reconstruction of many blocks in one solver call (docs/math.md §3), own frame.

    Args:
        A: (m, n) rows of every block, blocks consecutive (raw model input:
           similarities for a similarity model).
        cross: one k_i×k_i matrix of mutual dissimilarities (similarities) per block.
        sizes: rows per block (default: each matrix's row count).
        k0_rows: None (no k0), or anything else: exact k0 for every member
           and ‖K0‖₂ per block (``block_norm_k0`` is their largest).
        errors: "raise" (InputError for the first bad block) or "mask" (the
           rows of a bad block get valid=False and a ``bad_block`` Problem, or
           the member's own problem; the other blocks are placed).
        max_block_rows: a larger block is refused (``bad_block``).
    """
    model.check_method("projection", block=True)
    if errors not in ("raise", "mask"):
        raise InputError(f"errors must be 'raise' or 'mask', got {errors!r}")
    cross = list(cross)
    sizes_arr = np.array([np.shape(c)[0] if np.ndim(c) == 2 else 0 for c in cross] if sizes is None else sizes,
                         dtype=np.int64)
    A_raw = validation.as_float_array(A, "A", 2)
    if sizes_arr.size != len(cross) or int(sizes_arr.sum()) != A_raw.shape[0]:
        raise InputError(f"{len(cross)} cross matrices with block sizes summing to {int(sizes_arr.sum())}, but A has "
                         f"{A_raw.shape[0]} rows")
    if model.pipeline.identity:
        return _blocks(model, validation.check_rows(A_raw, model.n_landmarks, "A"), cross, sizes_arr, k0_rows,
                       errors, max_block_rows)
    # the input pipeline block by block (similarities, geodesics, constant): not the hot path
    off = np.concatenate([[0], np.cumsum(sizes_arr)])
    rows, mats, early = [], [], []
    for b, C in enumerate(cross):
        try:
            Ab, Cb = model.pipeline.block(A_raw[off[b]:off[b + 1]], C, model.n_landmarks)
        except InputError as exc:
            if errors == "raise":
                raise
            early.append((b, Problem("bad_block", str(exc))))
            Ab, Cb = np.zeros((int(sizes_arr[b]), model.n_landmarks)), np.full((int(sizes_arr[b]),) * 2, np.nan)
        rows.append(Ab)
        mats.append(Cb)
    A_core = np.vstack(rows) if rows else np.empty((0, model.n_landmarks))
    res = _blocks(model, A_core, mats, sizes_arr, k0_rows, errors, max_block_rows)
    for b, why in early:
        res.reasons[off[b]:off[b + 1]] = [why] * int(sizes_arr[b])
    return res


def _blocks(model: LandmarkModel, A: np.ndarray, cross: list[Any], sizes: np.ndarray, k0_rows: K0Rows, errors: str,
            max_block_rows: int | None = None, name: str = "cross") -> EmbeddingResult:
    """Blocks of core dissimilarities: check, centre and pack (``block_input``), solve (``block.solve_blocks``)."""
    m, d = A.shape[0], int(model.n_components)
    sp, lam = model.spectrum, model.eigenvalues
    off = np.concatenate([[0], np.cumsum(sizes)])
    cross = list(cross)
    far = _blocks_out_of_range(model, A, cross, off)
    for b in far:  # never reaches the solver: refused below with the range's words
        cross[b] = np.full(np.shape(cross[b]) if np.ndim(cross[b]) == 2 else (0, 0), np.nan)
    prep = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors[:, :d], max_block_rows,
                          name=name)
    for b, detail in far.items():
        prep.problems[b] = BlockProblem("bad_block", detail)
    if errors == "raise" and not prep.valid.all():
        b = int(np.argmin(prep.valid))
        where = "the block" if len(cross) == 1 else f"block {b} (rows {off[b]}..{off[b + 1] - 1} of A)"
        raise InputError(f"{where} is invalid: {prep.problems[b]}")
    valid = np.repeat(prep.valid, sizes)
    reasons: list[Problem | None] = [None] * m
    own = validation.row_problems(A, "A")
    for b in np.flatnonzero(~prep.valid).tolist():
        problem = prep.problems[b]
        block_problem = Problem("bad_block", problem.detail if problem is not None else "")
        for r in range(off[b], off[b + 1]):
            reasons[r] = own[r] or block_problem
    batch, rows = prep.batch, prep.rows
    y = np.full((m, d), np.nan)
    beta = np.full(m, np.nan)
    unexpl = np.full(m, np.nan)
    k0 = np.full(m, np.nan)
    flags = np.zeros(m, dtype=np.uint32)
    nb_ok = int(batch.sizes.size)
    objective = np.full(len(cross), np.nan)
    certified = np.zeros(len(cross), dtype=bool)
    norm = None
    coords = None
    if nb_ok:
        rtol = AMBIGUITY_RTOL_F32 if np.dtype(A.dtype) == np.float32 else AMBIGUITY_RTOL
        sol = solve_blocks(batch.c, batch.beta, batch.sizes, lam, batch.b_norm2, ambiguity_rtol=rtol,
                           n_threads=model.n_threads)
        y[rows] = sol.y
        flags[rows] = sol.flags | FLAG_BLOCK
        beta[rows] = batch.beta_self
        y_proj = batch.c / np.sqrt(lam)
        unexpl[rows] = unexplained(batch.beta_self, y_proj)
        objective[prep.valid] = sol.objective
        certified[prep.valid] = sol.certified
        coords_r, _ = model.project_r(A[rows])  # every block: the consistency check needs its K0
        ratio = model.negative_ratio if model.negative_ratio is not None else landmark_negative_ratio(model)
        bad = inconsistent_blocks(batch, coords_r, ratio, A.dtype)
        flags[rows[np.repeat(bad, batch.sizes)]] |= FLAG_INCONSISTENT_BLOCK
        if k0_rows is not None:
            coords = coords_r
            k0[rows] = k0_diagonal(batch.beta_self, coords)
            flags[rows] |= _non_euclidean(model, k0[rows], beta[rows], A.dtype)
            norm = _largest_block_norm(batch, coords)
        flags[rows[batch.beta_self < 0]] |= FLAG_NON_EUCLIDEAN
    return EmbeddingResult(y=y, beta=beta, unexplained=unexpl, k0=k0, t=np.full(m, np.nan), flags=flags,
                           unexplained_placed=beta - np.einsum("ij,ij->i", y, y),
                           valid=valid, reasons=reasons, method="block",
                           objective=float(objective[0]) if len(cross) == 1 else None, block_norm_k0=norm,
                           residual_rows=rows if coords is not None else None, residual_coords=coords,
                           blocks={"sizes": sizes.copy(), "objective": objective, "certified": certified})


def _blocks_out_of_range(model: LandmarkModel, A: np.ndarray, cross: list[Any], off: np.ndarray) -> dict[int, str]:
    """Blocks with a member row, or a mutual dissimilarity, beyond the placeable range: {block: detail}."""
    limit, why = range_limit(model, A.dtype)
    out: dict[int, str] = {}
    if A.shape[0] == 0:
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        energy = np.einsum("ij,ij->i", A, A, dtype=np.float64) / max(A.shape[1], 1)
        row_max = np.maximum.reduceat(energy, off[:-1]) if off.size > 1 else np.empty(0)
        for b, C in enumerate(cross):
            try:
                Cf = np.asarray(C, dtype=np.float64)
            except (TypeError, ValueError):
                continue  # not a matrix of numbers: block_input says what is wrong with it
            # squares of finite entries (an overflow to inf counts); NaN and inf entries are block_input's
            big = float(np.max(np.where(np.isfinite(Cf), np.square(Cf), 0.0))) if Cf.size else 0.0
            worst = max(float(row_max[b]) if off[b + 1] > off[b] else 0.0, big)
            if worst > limit:
                out[b] = "out of range: " + _range_detail(model, worst, limit, why, A.dtype).replace(
                    "the mean squared dissimilarity", "a squared dissimilarity of the block (or a member's mean)")
    return out


def _largest_block_norm(batch: BlockBatch, coords: np.ndarray) -> float:
    """max over blocks of ‖K0‖₂ = max|λ(K0)|, K0 = β − Ŷ_r Ŷ_rᵀ per block (docs/math.md §4); one eigvalsh per size."""
    sizes = batch.sizes
    row_off = np.concatenate([[0], np.cumsum(sizes)])
    beta_off = np.concatenate([[0], np.cumsum(sizes * sizes)])
    best = 0.0
    for k in np.unique(sizes).tolist():
        idx = np.flatnonzero(sizes == k)
        Y = coords[row_off[idx][:, None] + np.arange(k)]  # (s, k, r)
        Beta = batch.beta[beta_off[idx][:, None] + np.arange(k * k)].reshape(-1, k, k)
        best = max(best, float(np.max(spectral_norm(block_k0(Beta, Y)))))
    return best


def _place_transformed(model: LandmarkModel, A: object, C: object, kappa: object, method: str, k0_rows: K0Rows,
                       errors: str) -> EmbeddingResult:
    """Embed raw input through similarities -> geodesics -> additive constant (``core.transforms``)."""
    A_raw = validation.as_float_array(A, "A", 2)
    m = A_raw.shape[0]
    if C is not None:
        if kappa is not None:
            raise InputError("with a block, k(z, z) comes from the diagonal of C: do not pass self_similarity")
        return place_blocks(model, A_raw, [C], [m], k0_rows=k0_rows, errors=errors)
    rows = model.pipeline.rows(A_raw, model.n_landmarks, kappa)
    if errors == "raise" and not rows.valid.all():
        i = int(np.argmin(rows.valid))
        raise InputError(f"row {i} of A is invalid: {rows.problems[i]}")
    known = rows.known_beta
    if not known.all() and method != "projection":
        raise InputError(f"method={method!r} needs the self-similarity k(z, z): pass self_similarity (m,) "
                         f"or rows of {model.n_landmarks + 1} columns (docs/math.md §2)")
    res = _place_rows(model, rows.A, rows.valid, rows.problems, method, k0_rows, errors)
    if not known.all():  # β is unknown: the projection is exact, its residuals are not
        for name in ("beta", "unexplained", "k0", "unexplained_placed"):
            if getattr(res, name) is not None:
                getattr(res, name)[~known] = np.nan
        res.flags[~known] &= ~FLAG_NON_EUCLIDEAN
    return res


def core_dissimilarities(model: LandmarkModel, A: object, C: object = None,
                         self_similarity: object = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The dissimilarities the landmark spectrum is built on, for raw model input.

    Applies the input pipeline (identity for a plain model) to A (m, n) [or
    (m, n + 1)] and the block's C (m, m). Raises InputError on any invalid row.

    Returns: (A (m, n) float64, C (m, m) float64 or None).
    """
    A_raw = validation.as_float_array(A, "A", 2)
    n = model.n_landmarks
    if C is not None:
        if model.pipeline.identity:
            A64 = validation.check_rows(A_raw, n, "A").astype(np.float64)
            return A64, validation.check_cross(C, A64.shape[0])
        return model.pipeline.block(A_raw, C, n)
    if model.pipeline.identity:
        return validation.check_rows(A_raw, n, "A").astype(np.float64), None
    rows = model.pipeline.rows(A_raw, n, self_similarity)
    if not rows.valid.all():
        i = int(np.argmin(rows.valid))
        raise InputError(f"row {i} of A is invalid: {rows.problems[i]}")
    if not rows.known_beta.all():
        raise InputError("the self-similarity k(z, z) is needed: pass self_similarity or (m, n + 1) rows")
    return rows.A.astype(np.float64), None


def block_residual(model: LandmarkModel, A: object, C: object) -> np.ndarray:
    """K0 = β - Ŷ_r Ŷ_rᵀ (m, m) of a block from raw input A and its mutual C (docs/math.md §4)."""
    A64, C64 = core_dissimilarities(model, A, C)
    assert C64 is not None
    _, Beta = center_block(np.square(A64), np.square(C64), model.spectrum.row_means, model.spectrum.grand_mean)
    return block_k0(Beta, model.project_r(A64)[0])


def residuals(model: LandmarkModel, A: object, C: object, k0_rows: K0Rows, n_window: int | None,
              self_similarity: object) -> tuple[EmbeddingResult, WindowBounds]:
    """Per-object residuals (β, unexplained, exact k0) and the window bounds (docs/math.md §4).

    The window is the batch A (or the block A with C, which makes ‖k0‖₂ and
    the kernel-distance error exact); with ``k0_rows`` an int, Tr(k0) and the
    Nyström spectrum are estimated from that sample, while Σu bounds Tr(k0)
    (``bounds.window_bounds``: bound, estimate, exact). A is raw model input; the
    residuals are those of the corrected landmark kernel. The result's ``y``
    is the projection (NaN for a SMACOF/Sammon map, which has no projection).
    """
    if not model.pipeline.identity:
        A_arr = core_dissimilarities(model, A, None, self_similarity)[0]
    else:
        A_arr = validation.check_rows(A, model.n_landmarks, "A")
    res = _place_rows(model, A_arr, None, None, "projection", k0_rows, "raise")
    if model.landmark_map is not None:
        res.y[:] = np.nan
    rows = res.residual_rows if res.residual_rows is not None else np.empty(0, dtype=np.int64)
    ok = np.isfinite(res.k0[rows])
    sample = rows[ok]
    y_r = res.residual_coords[ok] if res.residual_coords is not None else np.empty((0, model.spectrum.rank))
    K0 = None if C is None else block_residual(model, A, C)
    u = res.unexplained[np.isfinite(res.unexplained)]
    whole = n_window is None or n_window == u.size  # Σu over the batch is the window's
    sp = model.spectrum
    bounds = window_bounds(res.k0[sample], y_r, sp.eigenvalues, int(model.n_components), model.n_landmarks,
                           n_window=A_arr.shape[0] if n_window is None else n_window, K0=K0,
                           u_sum=float(u.sum()) if whole else None,
                           landmark_trace=landmark_trace(sp.row_means, sp.grand_mean, sp.eigenvalues),
                           euclidean=model.is_euclidean, rtol=K0_RTOL.get(np.dtype(A_arr.dtype), 1e-7))
    return res, bounds


def arc(model: LandmarkModel, A: object, s: float, self_similarity: object = None) -> EmbeddingResult:
    """RR result whose ``y`` is moved to fraction s of the arc from projection (0) to RR (1)."""
    res = place(model, A, method="restricted", self_similarity=self_similarity)
    if s != 1.0:
        y_proj = place(model, A, method="projection", self_similarity=self_similarity).y
        res.y = restricted_arc(y_proj * np.sqrt(model.eigenvalues), model.eigenvalues, res.t, s)
    return res


def _blank(res: EmbeddingResult, rows: np.ndarray) -> None:
    res.y = res.y.copy()
    res.y[rows] = np.nan
    for name in ("beta", "unexplained", "k0", "t", "unexplained_placed"):
        if getattr(res, name) is not None:
            getattr(res, name)[rows] = np.nan
    res.flags[rows] = 0
