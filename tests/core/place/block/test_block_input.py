"""Checking and packing blocks (core/place/block/prepare.py): one bad block never stops the others."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.place.block.prepare import BAD_BLOCK, check_blocks, pack_blocks, prepare_blocks
from streamembed.core.inputs.centering import center_block

from ...conftest import euclidean

GOOD = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])


def _with(i, j, value, symmetric=True):
    M = GOOD.copy()
    M[i, j] = value
    if symmetric:
        M[j, i] = value
    return M


@pytest.mark.parametrize(
    ("matrix", "rows", "detail"),
    [
        (_with(1, 2, -1.0), 3, "cross[1, 2] = -1.0 is negative"),
        (_with(2, 0, np.nan, symmetric=False), 3, "cross[2, 0] = nan is not finite"),
        (_with(0, 1, np.inf), 3, "cross[0, 1] = inf is not finite"),
        (_with(0, 2, 2.5, symmetric=False), 3, "cross is not symmetric: cross[0, 2] = 2.5 but cross[2, 0] = 2.0"),
        (_with(1, 1, 0.5), 3, "cross[1, 1] = 0.5: the diagonal must be zero"),
        (GOOD[:2], 3, "cross is not square: shape (2, 3)"),
        (GOOD, 4, "cross has shape (3, 3) but the block has 4 rows"),
        (np.zeros(3), 3, "cross is not square: shape (3,)"),
        (np.array([["a"]]), 1, "cross must be numeric"),
        (GOOD, 0, "empty block (0 rows)"),
        (np.zeros((6, 6)), 6, "block of 6 rows exceeds max_block_rows = 5"),
    ],
)
def test_each_problem_is_named_with_its_entry(matrix, rows, detail):
    problems = check_blocks([GOOD, matrix, GOOD], [3, rows, 3], max_block_rows=5)
    assert problems[0] is None and problems[2] is None
    assert problems[1].code == BAD_BLOCK and problems[1].detail.startswith(detail)
    assert str(problems[1]).startswith(f"bad_block: {detail}")


def test_round_off_asymmetry_and_diagonal_are_tolerated():
    M = GOOD.copy()
    M[0, 1] *= 1 + 1e-9
    M[2, 2] = 1e-9
    assert check_blocks([M], [3]) == [None]


def test_one_by_one_blocks_and_lists_are_accepted():
    assert check_blocks([[[0.0]], [[0, 1], [1, 0]]], [1, 2]) == [None, None]


def test_prepare_leaves_out_bad_blocks_and_blocks_with_a_bad_member():
    rng = np.random.default_rng(0)
    L, Z = rng.normal(size=(8, 3)), rng.normal(size=(9, 3))
    model = LandmarkMDS(n_components=2).fit(euclidean(L, L))
    sp = model.spectrum_
    A = euclidean(Z, L)
    A[4, 6] = -1.0  # member 1 of block 1 (rows 3..5)
    sizes = [3, 3, 3]
    cross = [euclidean(Z[i : i + 3], Z[i : i + 3]) for i in (0, 3, 6)]
    prep = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors[:, :2])
    assert prep.valid.tolist() == [True, False, True]
    assert str(prep.problems[1]) == "bad_block: member 1 (row 4 of A) is invalid: negative: row[6] = -1.0"
    np.testing.assert_array_equal(prep.rows, [0, 1, 2, 6, 7, 8])
    assert prep.batch.sizes.tolist() == [3, 3]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packing_matches_the_centring_formulas(dtype):
    rng = np.random.default_rng(1)
    L, Z = rng.normal(size=(10, 4)), rng.normal(size=(7, 5))
    model = LandmarkMDS(n_components=3).fit(euclidean(L, L))
    sp = model.spectrum_
    Lx = np.hstack([L, np.zeros((10, 1))])
    A = euclidean(Z, Lx).astype(dtype)
    sizes = [4, 1, 2]
    cross = [euclidean(Z[:4], Z[:4]), np.zeros((1, 1)), euclidean(Z[5:], Z[5:])]
    b = pack_blocks(A, cross, np.array(sizes), sp.row_means, sp.grand_mean, sp.eigenvectors[:, :3])
    A64 = A.astype(np.float64)
    for (lo, hi), X in zip([(0, 4), (4, 5), (5, 7)], cross, strict=True):
        B, Beta = center_block(A64[lo:hi] ** 2, X**2, sp.row_means, sp.grand_mean)
        np.testing.assert_allclose(b.c[lo:hi], B @ sp.eigenvectors[:, :3], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b.beta_self[lo:hi], np.diagonal(Beta), rtol=1e-12)
    offsets = np.concatenate([[0], np.cumsum(np.square(sizes))])
    B, Beta = center_block(A64[5:] ** 2, cross[2] ** 2, sp.row_means, sp.grand_mean)
    np.testing.assert_allclose(b.beta[offsets[2] :], Beta.ravel(), rtol=1e-12)
    assert b.b_norm2[2] == pytest.approx(float((B**2).sum()), rel=1e-12)
