"""The refit policy: keep a map the recent objects do not need changed, repair one they left (docs/refits.md)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.refit.refit import DEFAULT_SELECTION, refit
from streamembed.core.refit.policy import MIN_RECENT, assess, best_plane, plan_refit

from ..conftest import euclidean


def _population(rng, m, plane_scale=(3.0, 2.0), noise=0.3, dim=6):
    """m points near a 2-D plane of R^dim (the first two axes), with isotropic noise in the other axes."""
    X = noise * rng.normal(size=(m, dim))
    X[:, :2] = rng.normal(size=(m, 2)) * plane_scale
    return X


def _problem(rng, recent, n=40):
    """Old landmarks from the plane population, then ``recent`` objects: (old model, D over old ∪ recent, ids)."""
    P = _population(rng, n)
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P)).model_
    cand = np.vstack([P, recent])
    ids = [str(x) for x in old.landmark_ids] + [f"r{i}" for i in range(len(recent))]
    return old, euclidean(cand, cand), ids


def test_the_default_is_the_adaptive_policy():
    assert DEFAULT_SELECTION == "adaptive"


@pytest.mark.parametrize("seed", range(5))
def test_a_stationary_stream_keeps_the_map_and_makes_no_version(seed):
    rng = np.random.default_rng(seed)
    old, D, ids = _problem(rng, _population(rng, 400))
    res = refit(old, D, ids, seed=seed)
    assert res.outcome == "kept" and res.model is None, res.reason
    assert "no candidate map gains" in res.reason
    assert res.details["captured_before"] > 0.8 * res.details["captured_best"]  # the map already holds the plane


@pytest.mark.parametrize("change", ["scale", "shift"])
def test_a_scale_change_or_a_shift_within_the_plane_keeps_the_map(change):
    rng = np.random.default_rng(3)
    recent = _population(rng, 400)
    recent = 2.0 * recent if change == "scale" else recent + np.array([6.0, 0, 0, 0, 0, 0])
    old, D, ids = _problem(rng, recent)
    res = refit(old, D, ids, seed=1)
    assert res.outcome == "kept", res.reason


@pytest.mark.parametrize("seed", range(3))
def test_traffic_off_the_plane_is_repaired(seed):
    """The stream moves to a plane spanned by axes 1 and 3: the old map (axes 1, 2) misses its largest axis."""
    rng = np.random.default_rng(seed)
    recent = _population(rng, 400)[:, [0, 2, 1, 3, 4, 5]]  # the plane's second axis turns from axis 2 to axis 3 ...
    recent[:, 2] *= 1.5  # ... and grows: the old map misses the traffic's widest direction but one
    old, D, ids = _problem(rng, recent)
    res = refit(old, D, ids, seed=seed)
    assert res.outcome == "installed" and res.model is not None and res.model.version == old.version + 1
    d = res.details
    assert d["captured_after"] > 1.2 * d["captured_before"] and d["captured_after"] > 0.9 * d["captured_best"]
    assert d["unexplained_after"] < d["unexplained_before"]
    assert d["captured_after"] <= d["captured_best"] * (1 + 1e-9) + 1e-9 * d["captured_best"]
    window = np.arange(old.n_landmarks, D.shape[0])
    sel = [ids.index(i) for i in res.new_ids]
    u_new = res.model.place(D[np.ix_(window, sel)]).unexplained.mean()
    u_old = old.place(D[np.ix_(window, np.arange(old.n_landmarks))]).unexplained.mean()
    assert u_new < 0.8 * u_old


def test_best_plane_is_the_top_eigenvalues_of_the_recent_objects():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4)) * [5.0, 3.0, 1.0, 0.5]
    Xc = X - X.mean(axis=0)
    w = np.linalg.eigvalsh(Xc.T @ Xc / 50)[::-1]
    cap, rest = best_plane(euclidean(X, X), 2)
    assert cap == pytest.approx(w[:2].sum(), rel=1e-9)
    assert rest == pytest.approx(w[2:].sum(), rel=1e-9)


def test_no_candidate_ever_captures_more_than_the_best_plane():
    rng = np.random.default_rng(4)
    recent = rng.normal(size=(200, 6)) * [4, 3, 2, 1, 1, 1]
    old, D, ids = _problem(rng, recent)
    plan = plan_refit(D, old.n_landmarks, old.n_landmarks, old.embedding, 2, seed=0, min_gain=0.0)
    best = plan.details["captured_best"]
    assert all(c["captured"] <= best * (1 + 1e-9) for c in plan.details["candidates"].values())
    assert plan.details["captured_before"] <= best * (1 + 1e-9)


def test_assess_reports_the_same_figures_for_any_selection():
    rng = np.random.default_rng(5)
    old, D, ids = _problem(rng, _population(rng, 300))
    res = refit(old, D, ids, selection="random", seed=2)
    assert res.outcome == "installed"
    for key in ("captured_before", "captured_after", "captured_best", "unexplained_before", "unexplained_after",
                "unexplained_best", "movement"):
        assert np.isfinite(res.details[key]), key
    radius = np.sqrt(np.square(old.embedding - old.embedding.mean(axis=0)).sum(axis=1).mean())
    assert res.details["movement"] == pytest.approx(res.alignment_rms / radius, rel=0.05)  # same alignment


@pytest.mark.parametrize("recent", ["identical", "rank_one", "too_few"])
def test_degenerate_candidates_keep_the_map_with_a_reason(recent):
    rng = np.random.default_rng(6)
    R = {"identical": np.ones((100, 6)), "rank_one": np.outer(rng.normal(size=100), np.ones(6)),
         "too_few": _population(rng, MIN_RECENT - 1)}[recent]
    old, D, ids = _problem(rng, R)
    res = refit(old, D, ids, seed=0)
    if recent == "rank_one":  # a line the old plane misses: a map may take it as an axis, never crash or degenerate
        assert res.outcome == "kept" or np.isfinite(res.model.embedding).all() and res.model.n_components == 2
        return
    assert res.outcome == "kept" and res.model is None and res.reason
    if recent == "too_few":
        assert "recent objects" in res.reason
    assert assess(D, old.n_landmarks, np.arange(old.n_landmarks), old.embedding, 2) or recent == "too_few"


@pytest.mark.parametrize("duplicates", [False, True])
def test_an_options_candidate_sets_are_the_sets_max_variance_draws(duplicates):
    """The leading option's landmarks are what ``select_landmarks("max-variance")`` picks among its pool, scored on
    the same objects: the policy draws its sets itself (no copy of the pool's dissimilarities), the same ones —
    also when a draw holds duplicates (objects at dissimilarity 0), which select_landmarks replaces."""
    from streamembed.core.refit import policy
    from streamembed.core.refit.landmarks import DEFAULT_CANDIDATES, select_landmarks

    rng = np.random.default_rng(8)
    recent = _population(rng, 150)
    if duplicates:
        recent[1::2] = recent[::2]  # every other recent object repeats the one before
    old, D, _ = _problem(rng, recent, n=30)
    n_old, F = old.n_landmarks, np.arange(old.n_landmarks, D.shape[0])
    scorer = policy._Scorer(D, F, n_old, old.embedding, 2)
    for name, pool in policy._option_pools(D, np.arange(n_old), F, n_old).items():
        kids = np.random.default_rng(3).spawn(DEFAULT_CANDIDATES)
        option = policy._Option(name, pool, n_old, n_old, 2, kids)
        sets = [option.draw(i, scorer) for i in range(DEFAULT_CANDIDATES)]
        ours = sets[int(np.argmax([scorer.captured(L, F) for L in sets]))]
        n_kept = option.n_kept
        ref = select_landmarks("max-variance", option.n, D=D[np.ix_(pool, pool)], seed=np.random.default_rng(3),
                               n_components=2, required=np.arange(n_kept) if n_kept else None,
                               population=np.arange(option.first_scored, pool.size))
        np.testing.assert_array_equal(ours, np.sort(pool[ref]), err_msg=name)
        if duplicates:
            assert all(np.triu(D[np.ix_(L, L)] <= 0, k=1).sum() == 0 for L in sets)
