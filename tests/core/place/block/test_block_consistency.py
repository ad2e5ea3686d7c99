"""The ``inconsistent_block`` flag (docs/math.md §4.3, ``core.place.block.consistency``).

A block whose mutual dissimilarities contradict its rows (λ_min(K0) = −765 in the report) was placed with
``kernel_distance_exact`` 0 and no flag. Consistent Euclidean blocks must never get the flag, at any scale
or size; contradicted ones (C scaled, zeroed, another block's) always.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.flags import FLAG_BLOCK, FLAG_INCONSISTENT_BLOCK

from ...conftest import euclidean


def _flagged(res) -> np.ndarray:
    return (res.flags & FLAG_INCONSISTENT_BLOCK) != 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_consistent_euclidean_blocks_are_never_flagged_and_contradicted_ones_always(dtype) -> None:
    rng = np.random.default_rng(0)
    for trial in range(30):
        scale = 10.0 ** rng.uniform(-3, 3)
        p, n, k = int(rng.integers(2, 6)), int(rng.integers(8, 40)), int(rng.integers(2, 9))
        L = rng.normal(size=(n, p)) * scale
        Z = rng.normal(size=(k, p)) * scale * rng.uniform(0.2, 3)
        Z[:, -1] += rng.uniform(0, 2) * scale  # partly off the landmarks' leading axes
        est = LandmarkMDS(min(2, p)).fit(euclidean(L, L))
        A, C = euclidean(Z, L).astype(dtype), euclidean(Z, Z).astype(dtype)
        res = est.embed(A, C, k0_rows="all")
        assert (res.flags & FLAG_BLOCK).all() and not _flagged(res).any(), (trial, scale)
        for bad in (10 * C, 0 * C, 3 * C[::-1, ::-1]):
            assert _flagged(est.embed(A, bad)).all(), trial


def test_many_blocks_are_judged_one_by_one() -> None:
    rng = np.random.default_rng(1)
    L, Z = rng.normal(size=(30, 3)), rng.normal(size=(12, 3)) * 1.5
    est = LandmarkMDS(2).fit(euclidean(L, L))
    A = euclidean(Z, L)
    cross = [euclidean(Z[s:s + 4], Z[s:s + 4]) for s in (0, 4, 8)]
    cross[1] = cross[1] * 10
    res = est.embed_blocks(A, cross)
    np.testing.assert_array_equal(_flagged(res), np.repeat([False, True, False], 4))
    # the contradiction moves the block's placement but leaves the others' exactly as they were
    alone = est.embed_blocks(A[[0, 1, 2, 3, 8, 9, 10, 11]], [cross[0], cross[2]])
    np.testing.assert_allclose(res.y[[0, 1, 2, 3, 8, 9, 10, 11]], alone.y, rtol=1e-12, atol=1e-12)


def test_real_euclidean_blocks_are_not_flagged_and_their_contradictions_are() -> None:
    from sklearn.datasets import load_wine

    X = load_wine().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    rng = np.random.default_rng(2)
    idx = rng.permutation(X.shape[0])
    L, Z = X[idx[:60]], X[idx[60:]]
    est = LandmarkMDS(2).fit(euclidean(L, L))
    for _ in range(20):
        members = Z[rng.choice(Z.shape[0], size=6, replace=False)]
        A, C = euclidean(members, L), euclidean(members, members)
        assert not _flagged(est.embed(A, C)).any()
        assert _flagged(est.embed(A, 0 * C)).all()
