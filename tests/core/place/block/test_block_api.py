"""The batched block API: many blocks of mixed sizes in one call, each placed as if alone (docs/math.md §3)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import InputError, LandmarkMDS
from streamembed.core.flags import FLAG_BLOCK

from ...conftest import euclidean


def _problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(30, 4)) * 3
    Z = np.hstack([rng.normal(size=(17, 4)) * 3, 1.5 * rng.normal(size=(17, 1))])
    Lx = np.hstack([L, np.zeros((30, 1))])
    est = LandmarkMDS(2).fit(euclidean(L, L))
    sizes = [2, 5, 1, 8, 1]
    off = np.concatenate([[0], np.cumsum(sizes)])
    A = euclidean(Z, Lx)
    C = [euclidean(Z[off[b]:off[b + 1]], Z[off[b]:off[b + 1]]) for b in range(len(sizes))]
    return est, A, C, off


def test_many_blocks_in_one_call_equal_each_block_alone() -> None:
    est, A, C, off = _problem()
    res = est.embed_blocks(A, C, k0_rows="all")
    assert res.valid.all() and (res.flags & FLAG_BLOCK).all()
    for b, Cb in enumerate(C):
        alone = est.embed(A[off[b]:off[b + 1]], Cb, k0_rows="all")
        np.testing.assert_allclose(res.y[off[b]:off[b + 1]], alone.y, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(res.k0[off[b]:off[b + 1]], alone.k0, rtol=1e-10, atol=1e-10)
        assert res.blocks["objective"][b] == pytest.approx(alone.objective, rel=1e-10, abs=1e-9)
    np.testing.assert_allclose(est.transform_blocks(A, C), res.y)
    assert res.blocks["sizes"].tolist() == [2, 5, 1, 8, 1] and res.blocks["certified"].dtype == bool


def test_a_bad_block_costs_only_its_own_rows() -> None:
    est, A, C, off = _problem(1)
    C[1] = C[1].copy()
    C[1][0, 3] += 1.0  # not symmetric
    A = A.copy()
    A[off[3] + 2, 4] = np.nan  # a bad member poisons its block only
    res = est.embed_blocks(A, C, errors="mask")
    bad_rows = np.r_[off[1]:off[2], off[3]:off[4]]
    assert not res.valid[bad_rows].any() and res.valid[np.setdiff1d(np.arange(A.shape[0]), bad_rows)].all()
    assert {r.code for r in (res.reasons[i] for i in bad_rows)} == {"bad_block", "non_finite"}
    assert "not symmetric: cross[0, 3]" in str(res.reasons[off[1]])
    assert res.reasons[off[3] + 2].code == "non_finite"  # the member's own reason
    assert np.isnan(res.blocks["objective"][[1, 3]]).all() and np.isfinite(res.blocks["objective"][[0, 2, 4]]).all()
    good = est.embed_blocks(np.delete(A, bad_rows, axis=0), [C[0], C[2], C[4]])
    np.testing.assert_allclose(res.y[res.valid], good.y, rtol=1e-10, atol=1e-10)
    with pytest.raises(InputError, match=r"block 1 \(rows 2..6 of A\) is invalid: bad_block: cross is not symmetric"):
        est.embed_blocks(A, C)


def test_the_two_object_reference_case_inside_a_batch_of_blocks() -> None:
    L = np.array([[-1.0, 0.0], [1.0, 0.0]])
    est = LandmarkMDS(1).fit(euclidean(L, L))
    Z = np.array([[0.0, 9.0], [0.0, -9.0]])
    other = np.array([[0.5, 0.2], [-0.3, 0.1], [0.0, 1.0]])
    A = np.vstack([euclidean(other, L), euclidean(Z, L)])
    res = est.embed_blocks(A, [euclidean(other, other), euclidean(Z, Z)])
    y = res.y[3:, 0]
    assert abs(y[0]) == pytest.approx(np.sqrt(80), rel=1e-9) and y[1] == pytest.approx(-y[0], rel=1e-9)
    assert res.blocks["objective"][1] == pytest.approx(644.0, rel=1e-9)


def test_block_sizes_must_add_up() -> None:
    est, A, C, _ = _problem()
    with pytest.raises(InputError, match="block sizes summing to 16, but A has 17 rows"):
        est.embed_blocks(A, C[:-1])
