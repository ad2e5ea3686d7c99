"""Landmark selection strategies (docs/math.md §5, §7)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.core.errors import InputError
from streamembed.core.refit.strategies import (kmeanspp_select, least_supported, maxmin_select, random_select,
                                                  residual_pivoted_select)

from ..conftest import euclidean


def _plane_problem(rng, n_old=30, n_plane=60, n_off=20, offset=6.0):
    """Old landmarks and in-plane candidates on the plane z = 0 of R^3, plus an off-plane cluster."""
    old = np.hstack([rng.normal(size=(n_old, 2)) * 3, np.zeros((n_old, 1))])
    plane = np.hstack([rng.normal(size=(n_plane, 2)) * 3, np.zeros((n_plane, 1))])
    off = np.hstack([rng.normal(size=(n_off, 2)) * 0.5, offset + 0.5 * rng.normal(size=(n_off, 1))])
    return old, plane, off


def _map_residual(old, cand, d=2):
    """R = K − Ŷ_d Ŷ_dᵀ with K the kernel centred on the old landmarks and Ŷ_d the old map's projections."""
    c = old.mean(axis=0)
    Xo = old - c
    _, _, Vt = np.linalg.svd(Xo, full_matrices=False)
    V = Vt[:d].T
    Z = cand - c
    Y = Z @ V
    return Z @ Z.T - Y @ Y.T


def test_maxmin_spreads_and_keeps_required(rng):
    X = rng.normal(size=(200, 2))
    X[7] = [50.0, 50.0]
    sel = maxmin_select(5, X=X, required=np.array([3]))
    assert sel[0] == 3 and 7 in sel and len(set(sel.tolist())) == 5


def test_random_selection_is_seeded_sorted_and_distinct():
    a = random_select(10, 100, np.random.default_rng(1))
    b = random_select(10, 100, np.random.default_rng(1))
    assert np.array_equal(a, b) and np.all(np.diff(a) > 0) and a.size == 10
    with pytest.raises(InputError, match="between 1 and 100"):
        random_select(101, 100, np.random.default_rng(1))


def test_kmeanspp_reaches_a_far_cluster_and_never_repeats(rng):
    X = np.vstack([rng.normal(size=(300, 2)), rng.normal(size=(3, 2)) * 0.1 + 200.0])
    D = euclidean(X, X)
    hits = 0
    for seed in range(20):
        sel = kmeanspp_select(2, D, np.random.default_rng(seed), first=0)
        hits += bool((sel >= 300).any())
    assert hits >= 19  # 3 points at distance 200 carry almost all of the D² mass
    dup = np.vstack([X[:5], X[:5]])
    sel = kmeanspp_select(10, euclidean(dup, dup), np.random.default_rng(0))
    pairs = {i + 5 for i in sel.tolist() if i < 5} | {i - 5 for i in sel.tolist() if i >= 5}
    assert sorted(set(sel.tolist()) | pairs) \
        == list(range(10)) and sel.size == 5  # one of each duplicate pair, then it stops: nothing distinct is left


def test_the_least_supported_landmarks_are_the_ones_the_stream_left():
    old = np.array([[0.0, 0.0], [1.0, 0.0], [50.0, 0.0], [0.0, 1.0], [30.0, 30.0]])
    recent = np.random.default_rng(0).normal(size=(200, 2))
    drop = least_supported(euclidean(old, recent), 2, k=10)
    assert drop.tolist() == [2, 4]
    assert least_supported(euclidean(old, recent), 0).size == 0
    with pytest.raises(InputError, match="cannot remove"):
        least_supported(euclidean(old, recent), 6)


def test_residual_pivoting_adds_only_objects_off_the_map(rng):
    old, plane, off = _plane_problem(rng)
    cand = np.vstack([old, plane, off])
    R = _map_residual(old, cand)
    D = euclidean(cand, cand)
    sel, info = residual_pivoted_select(30, R, D, 30, np.random.default_rng(0))
    new = info["new"]
    assert (new >= 30 + 60).all()  # every pick from the off-plane cluster
    assert info["off_share"] == pytest.approx(20 / 80 - 0.01)  # a quarter of the reservoir left the plane ...
    assert new.size == int((0.25 - 0.01) * 30)  # ... so about a quarter of the landmarks are replaced
    assert info["residual_before"] > 10 * info["residual_after"]  # and the picks span what was off the map
    assert sel.size == 30 and info["dropped_old"] == new.size and (sel < 30).sum() == 30 - new.size


def test_residual_pivoting_keeps_every_old_landmark_on_a_stationary_stream(rng):
    old, plane, _ = _plane_problem(rng)
    cand = np.vstack([old, plane])
    sel, info = residual_pivoted_select(30, _map_residual(old, cand), euclidean(cand, cand), 30,
                                        np.random.default_rng(0))
    assert np.array_equal(sel, np.arange(30)) and info["new"].size == 0


def test_greedy_pivoting_takes_the_largest_residual_first_and_can_grow_the_set(rng):
    old, plane, off = _plane_problem(rng, n_off=5)
    cand = np.vstack([old, plane, off])
    R = _map_residual(old, cand)
    sel, info = residual_pivoted_select(40, R, euclidean(cand, cand), 30, np.random.default_rng(0), greedy=True)
    assert info["new"][0] == 30 + 60 + int(np.argmax(np.diagonal(R)[90:]))
    # growing by 10: at least 10 new landmarks; old ones are dropped only beyond that
    assert sel.size == 40 and info["new"].size >= 10 and (sel < 30).sum() == 40 - info["new"].size
