"""Numerical guards: rows beyond the placeable range are refused, iterative methods stay within their budgets."""

from __future__ import annotations

import time

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core import runtime
from streamembed.core.flags import FLAG_NOT_CONVERGED
from streamembed.core.place.range_guard import PLACEMENT_RTOL

from ..conftest import euclidean, landmark_problem


@pytest.mark.parametrize("method", ["projection", "restricted", "stress", "l1"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_huge_finite_rows_are_out_of_range_never_infinite_outputs(method: str, dtype: type) -> None:
    rng = np.random.default_rng(1)
    D, A, _ = landmark_problem(rng, 25, 3, 6)
    est = LandmarkMDS(2).fit(D)
    A = A.astype(dtype)
    big = np.sqrt(est.model_.placer.energy_limit(np.dtype(dtype))) * 4  # beyond the limit, still finite in the dtype
    A[1, :] = dtype(min(big, np.finfo(dtype).max / 2))
    A[4, 7] = dtype(min(big * 8, np.finfo(dtype).max / 2))
    t0 = time.perf_counter()
    res = est.embed(A, method=method, errors="mask", k0_rows="all")
    assert time.perf_counter() - t0 < 10
    assert res.valid.tolist() == [True, False, True, True, False, True]
    assert {res.reasons[1].code, res.reasons[4].code} == {"out_of_range"}
    ok = res.valid
    for name in ("y", "beta", "unexplained", "k0"):
        assert np.isfinite(getattr(res, name)[ok]).all(), name
    with pytest.raises(ValueError, match="out_of_range"):
        est.embed(A, method=method)


def test_rows_just_inside_the_range_are_placed_with_finite_numbers() -> None:
    rng = np.random.default_rng(2)
    D, A, _ = landmark_problem(rng, 25, 3, 3)
    est = LandmarkMDS(2).fit(D)
    scale = np.sqrt(est.model_.placer.range_limit(np.dtype(np.float64))[0] / np.mean(np.square(A[0]))) / 2
    res = est.embed(A * scale, method="restricted", k0_rows="all")
    assert res.valid.all() and np.isfinite(res.y).all() and np.isfinite(res.unexplained).all()


def test_far_rows_keep_three_digits_or_are_refused_not_round_off() -> None:
    """An object far outside the landmarks is placed while float32 keeps PLACEMENT_RTOL of its coordinates
    (checked against float64), and refused as out_of_range beyond: never coordinates made of round-off
    (a row of the netCDF fill value 9.97e36 would land at |y| ~ 1e57)."""
    rng = np.random.default_rng(4)
    L = rng.normal(size=(40, 4))
    est = LandmarkMDS(2).fit(euclidean(L, L))
    limit, why = est.model_.placer.range_limit(np.dtype(np.float32))
    assert why == "precision"
    direction = np.array([[1.0, 0.5, 0.0, 0.0]])
    for share, placed in ((0.3, True), (3.0, False)):
        # |z|^2 ~ E for a far object: put E at `share` of the limit
        z = direction / np.linalg.norm(direction) * np.sqrt(share * limit)
        A = euclidean(z, L)
        res32 = est.embed(A.astype(np.float32), errors="mask")
        assert res32.valid[0] == placed, res32.reasons[0]
        if placed:
            y64 = est.embed(A).y
            assert np.abs(res32.y - y64).max() <= PLACEMENT_RTOL * np.abs(y64).max()
        else:
            assert res32.reasons[0].code == "out_of_range" and "significant digits" in res32.reasons[0].detail
    fill = np.full((1, 40), 9.96921e36)
    res = est.embed(fill, errors="mask")
    assert not res.valid[0] and res.reasons[0].code == "out_of_range"


def test_a_block_beyond_the_range_is_refused_alone() -> None:
    rng = np.random.default_rng(5)
    D, A, _ = landmark_problem(rng, 25, 3, 8)
    est = LandmarkMDS(2).fit(D)
    C = [euclidean(A[:4], A[:4]) * 0 + np.ones((4, 4)) - np.eye(4), np.ones((4, 4)) - np.eye(4)]
    C[1][0, 2] = C[1][2, 0] = 1e200
    res = est.embed_blocks(A, C, errors="mask")
    assert res.valid.tolist() == [True] * 4 + [False] * 4
    assert {r.code for r in res.reasons[4:]} == {"bad_block"} and "out of range" in res.reasons[4].detail


def test_a_time_budget_ends_iterations_with_the_best_placement_flagged() -> None:
    rng = np.random.default_rng(3)
    D, A, _ = landmark_problem(rng, 60, 3, 2000, off_span=2.0)
    est = LandmarkMDS(2, method="l1").fit(D)
    full = est.embed(A)
    t0 = time.perf_counter()
    with runtime.limit(1e-9):
        cut = est.embed(A)
    assert time.perf_counter() - t0 < 0.5 * 60  # far below an unbounded run's worst case
    assert cut.valid.all() and np.isfinite(cut.y).all()
    assert ((cut.flags & FLAG_NOT_CONVERGED) != 0).all()
    assert not ((full.flags & FLAG_NOT_CONVERGED) != 0).any()


def test_cancelling_interrupts_an_iterative_batch() -> None:
    rng = np.random.default_rng(4)
    D, A, _ = landmark_problem(rng, 40, 3, 500, off_span=2.0)
    est = LandmarkMDS(2, method="stress").fit(D)
    with pytest.raises(runtime.Cancelled), runtime.limit(None, cancelled=lambda: True):
        est.embed(A)
    assert not runtime.spent()  # outside any budget: never spent


def test_the_non_euclidean_flag_picks_rows_not_the_data_set() -> None:
    rng = np.random.default_rng(0)
    P = rng.normal(size=(500, 6)) * 3
    city = lambda a, b: np.abs(a[:, None, :] - b[None, :, :]).sum(-1)  # noqa: E731 - non-Euclidean on purpose
    L, Z = P[:200], P[200:]
    DL = city(L, L)
    est = LandmarkMDS(3).fit(DL)
    assert est.model_.negative_ratio > 0  # city-block landmarks carry negative eigenvalues
    ordinary = est.embed(city(Z, L), k0_rows="all")
    assert (ordinary.k0 < 0).mean() > 0.9  # the old rule (k0 < 0) flagged nearly every row
    assert np.mean((ordinary.flags & 2) != 0) < 0.05  # about 1/49 by exchangeability; here
    # rows that claim to be 5x closer than they are to every other landmark: no metric space holds them
    odd = city(Z[:10], L)
    odd[:, ::2] *= 0.2
    assert ((est.embed(odd, k0_rows="all").flags & 2) != 0).all()
    euclid = LandmarkMDS(3).fit(euclidean(L, L))
    assert euclid.model_.negative_ratio == 0.0
