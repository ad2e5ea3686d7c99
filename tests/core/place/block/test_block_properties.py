"""Property tests (hypothesis) of block RR: invariances that hold for any input (docs/math.md §3)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamembed import LandmarkMDS
from streamembed.core.place.block.solve import solve_blocks
from streamembed.core.place.block.prepare import prepare_blocks
from streamembed.core.flags import FLAG_AMBIGUOUS

from ...conftest import euclidean

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def block_batches(draw):
    """Landmarks in R^p, blocks of 1–6 objects partly off the landmarks' span, d ≤ p kept axes."""
    seed = draw(st.integers(0, 2**32 - 1))
    p = draw(st.integers(1, 4))
    d = draw(st.integers(1, p))
    n = draw(st.integers(p + 2, p + 9))
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=6))
    spread = draw(st.floats(0.1, 100.0))
    off = draw(st.floats(0.0, 3.0))
    rng = np.random.default_rng(seed)
    m = sum(sizes)
    L = np.hstack([rng.normal(size=(n, p)), np.zeros((n, 2))]) * spread
    Z = np.hstack([rng.normal(size=(m, p)), rng.normal(size=(m, 2)) * off]) * spread
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    cross = [euclidean(Z[a:b], Z[a:b]) for a, b in pairwise(bounds)]
    return euclidean(L, L), euclidean(Z, L), cross, sizes, d


def _solve(model: LandmarkMDS, A, cross, sizes, d):
    sp = model.spectrum_
    prep = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors[:, :d])
    b = prep.batch
    return solve_blocks(b.c, b.beta, b.sizes, model.eigenvalues_[:d], b.b_norm2)


def _well_separated(lam: np.ndarray, d: int) -> bool:
    """The first d eigenpairs are determined (distinct, and λ_d clear of zero)."""
    top = lam[: d + 1] if lam.size > d else np.append(lam[:d], 0.0)
    return lam.size >= d and top[d - 1] > 1e-6 * top[0] and (np.diff(top) < -1e-6 * top[0]).all()


@SETTINGS
@given(block_batches(), st.randoms(use_true_random=False))
def test_certified_placements_are_invariant_under_permuting_landmarks(batch, random):
    D, A, cross, sizes, d = batch
    n = D.shape[0]
    perm = np.array(random.sample(range(n), n))
    a = LandmarkMDS(n_components=d).fit(D)
    b = LandmarkMDS(n_components=d).fit(D[np.ix_(perm, perm)])
    if not _well_separated(a.spectrum_.eigenvalues, d):
        return
    sa = _solve(a, A, cross, sizes, d)
    sb = _solve(b, A[:, perm], cross, sizes, d)
    # eigenvectors are determined up to sign: align the axes
    sign = np.sign((a.spectrum_.eigenvectors[perm, :d] * b.spectrum_.eigenvectors[:, :d]).sum(axis=0))
    scale = 1.0 + np.abs(sa.y).max()
    rows = np.repeat(np.arange(len(sizes)), sizes)
    for i in range(len(sizes)):
        if not (sa.certified[i] and sb.certified[i]) or sa.flags[rows == i][0] & FLAG_AMBIGUOUS:
            continue
        np.testing.assert_allclose(sb.y[rows == i], sa.y[rows == i] * sign, atol=1e-6 * scale)
        assert abs(sb.objective[i] - sa.objective[i]) <= 1e-7 * (sa.objective[i] + scale**2)


@SETTINGS
@given(block_batches(), st.randoms(use_true_random=False))
def test_a_blocks_placement_does_not_depend_on_the_other_blocks(batch, random):
    D, A, cross, sizes, d = batch
    model = LandmarkMDS(n_components=d).fit(D)
    if model.eigenvalues_.size < d:
        return
    together = _solve(model, A, cross, sizes, d)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    order = random.sample(range(len(sizes)), len(sizes))
    shuffled_rows = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in order])
    shuffled = _solve(model, A[shuffled_rows], [cross[i] for i in order], [sizes[i] for i in order], d)
    # equal to round-off: the centring's matrix product (BLAS) may round a row differently
    # in another batch; the solver itself is exactly batch independent (test_block.py)
    scale = 1.0 + np.abs(together.y).max()
    np.testing.assert_allclose(shuffled.y, together.y[shuffled_rows], rtol=1e-11, atol=1e-11 * scale)
    # F includes f0 = 2 (‖B‖² − ‖C‖²), a difference: its round-off is a few ulps of the block's ‖B‖², whatever F is
    sp = model.spectrum_
    b_norm2 = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors[:, :d]).batch.b_norm2
    np.testing.assert_array_less(np.abs(shuffled.objective - together.objective[order]),
                                 1e-10 * np.abs(together.objective[order]) + 1e-11 * scale**2
                                 + 64 * np.finfo(float).eps * b_norm2[order] + 1e-300)
    i = order[0]
    alone = _solve(model, A[bounds[i] : bounds[i + 1]], [cross[i]], [sizes[i]], d)
    np.testing.assert_allclose(alone.y, together.y[bounds[i] : bounds[i + 1]], rtol=1e-11, atol=1e-11 * scale)


@SETTINGS
@given(block_batches())
def test_never_worse_than_its_first_start_nor_the_projection_and_never_negative(batch):
    D, A, cross, sizes, d = batch
    model = LandmarkMDS(n_components=d).fit(D)
    if model.eigenvalues_.size < d:
        return
    sp = model.spectrum_
    lam = model.eigenvalues_[:d]
    prep = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors[:, :d])
    b = prep.batch
    sol = solve_blocks(b.c, b.beta, b.sizes, lam, b.b_norm2)
    from streamembed.core.place.block.solve import block_objective
    from streamembed.core.place.restricted import solve_restricted

    assert (sol.objective >= 0).all()
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    boff = np.concatenate([[0], np.cumsum(np.square(sizes))])
    for i, k in enumerate(sizes):
        C = b.c[bounds[i] : bounds[i + 1]]
        Beta = b.beta[boff[i] : boff[i + 1]].reshape(k, k)
        single = solve_restricted(C, np.diagonal(Beta).copy(), lam).y
        tol = 1e-9 * sol.objective[i] + 1e-12 * (2 * b.b_norm2[i] + (Beta**2).sum())
        assert sol.objective[i] <= block_objective(single, C, Beta, lam, b.b_norm2[i]) + tol
        assert sol.objective[i] <= block_objective(C / np.sqrt(lam), C, Beta, lam, b.b_norm2[i]) + tol
