"""Metric-MDS landmark maps: SMACOF and Sammon (Ghojogh et al. tutorial §2.2–3, ``core.fit.metric_map``).

A refined map lowers its own criterion from the classical-MDS start and runs
to a stated tolerance within a budget, or says that it did not; arrivals on
it are placed by restricted reconstruction for a stress-built map (Trosset
et al. 2025, end of §4): the stress criterion started from the least-squares
placement on that map, which it can only improve.

References: scikit-learn's ``smacof`` (the same plain sweeps), plain
majorisation run to 10⁻¹⁴, and an analytic gradient of each criterion.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

import logging

from streamembed import LandmarkMDS
from streamembed.core.fit import metric_map
from streamembed.core.place.criteria.stress import stress_objective
from streamembed.core.errors import InputError
from streamembed.core.fit.metric_map import MAP_MAX_ITER, MAP_RTOL, map_stress, refine_map
from streamembed.core.fit.metric_map import map_start
from streamembed.core.refit.procrustes import orthogonal_procrustes_align

from ..conftest import landmark_problem


@pytest.mark.parametrize("kind", ["smacof", "sammon"])
def test_refinement_lowers_the_criterion_from_the_cmds_start(rng, kind: str) -> None:
    D, _, _ = landmark_problem(rng, 30, 5, 1)
    X0 = LandmarkMDS(2).fit(D).embedding_
    ref = refine_map(X0, D, kind)
    assert ref.converged and 1 < ref.iterations < MAP_MAX_ITER and ref.tolerance == MAP_RTOL
    assert ref.criterion < 0.9 * map_stress(X0, D, kind) and ref.criterion == pytest.approx(map_stress(ref.X, D, kind))
    np.testing.assert_allclose(ref.X.mean(axis=0), 0.0, atol=1e-10)
    # a majorisation fixed point: one more sweep changes nothing
    again = refine_map(ref.X, D, kind, max_iter=1)
    assert again.criterion == pytest.approx(ref.criterion, rel=1e-9) and again.iterations == 1


def test_an_exact_configuration_is_already_optimal(rng) -> None:
    D, _, _ = landmark_problem(rng, 15, 2, 1)  # planar landmarks: CMDS is exact, stress 0
    X0 = LandmarkMDS(2).fit(D).embedding_
    ref = refine_map(X0, D, "smacof")
    assert ref.converged and ref.criterion < 1e-16 * np.square(D).sum()
    np.testing.assert_allclose(ref.X, X0, atol=1e-8)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["cmds", "smacof", "sammon"])
def test_stress_rr_never_has_higher_stress_than_projection_on_the_same_map(seed: int, kind: str) -> None:
    rng = np.random.default_rng(seed)
    D, A, _ = landmark_problem(rng, 20, 4, 25, off_span=1.5)
    est = LandmarkMDS(2, method="stress", landmark_map=kind).fit(D)
    X = est.embedding_
    # projection on this map: ŷ = (XᵀX)⁻¹Xᵀb with the map's own X (for "cmds" the usual formula)
    y_proj = map_start(X, A, est.model_.spectrum.row_means) if kind != "cmds" else est.embed(A, method="projection").y
    y_rr = est.embed(A).y
    assert (stress_objective(y_rr, X, A) <= stress_objective(y_proj, X, A) * (1 + 1e-12)).all()


def test_a_refined_map_refuses_kernel_methods_with_a_reason(rng, tmp_path) -> None:
    D, A, C = landmark_problem(rng, 20, 3, 4)
    with pytest.raises(InputError, match="landmark_map='smacof'"):
        LandmarkMDS(2, landmark_map="smacof").fit(D)  # default method is projection
    est = LandmarkMDS(2, method="l1", landmark_map="smacof").fit(D)
    for method in ("projection", "restricted"):
        with pytest.raises(InputError, match="classical-MDS map"):
            est.embed(A, method=method)
    with pytest.raises(InputError, match="block restricted reconstruction"):
        est.embed(A, C)
    assert est.embed(A).method == "l1" and est.embed(A, method="stress").method == "stress"
    res, bounds = est.residuals(A)  # the kernel's residuals still exist: k0 belongs to the landmark kernel
    assert np.isfinite(res.k0).all() and np.isnan(res.y).all()
    est.save(tmp_path / "m.npz")
    back = LandmarkMDS.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.embedding_, est.embedding_)
    np.testing.assert_array_equal(back.embed(A).y, est.embed(A).y)


def test_sammon_needs_distinct_landmarks(rng) -> None:
    D, _, _ = landmark_problem(rng, 6, 2, 1)
    D2 = np.vstack([np.hstack([D, D[:, :1]]), np.hstack([D[:1], [[0.0]]])])  # landmark 6 duplicates landmark 0
    with pytest.raises(InputError, match="duplicate"):
        LandmarkMDS(2, method="stress", landmark_map="sammon").fit(D2)


# ----------------------------------------------------------------- convergence, budget, reporting


def _gradient(X: np.ndarray, D: np.ndarray, kind: str) -> np.ndarray:
    """Analytic gradient (n, d) of ``map_stress``: Σ_j 2 w_ij (1 - δ_ij/d_ij)(x_i - x_j) / norm."""
    dist = np.linalg.norm(X[:, None] - X[None], axis=-1)
    W = 1.0 / np.where(D > 0, D, 1.0) if kind == "sammon" else np.ones_like(D)
    norm = D[np.triu_indices(len(D), 1)].sum() if kind == "sammon" else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        R = np.where(dist > 0, W * (1.0 - D / dist), 0.0)
    np.fill_diagonal(R, 0.0)
    return 2.0 * (R.sum(axis=1)[:, None] * X - R @ X) / norm


@pytest.mark.parametrize("kind", ["smacof", "sammon"])
def test_the_criterion_never_increases_along_the_accelerated_iteration(rng, kind: str) -> None:
    D = np.abs(rng.normal(size=(25, 4))[:, None] - rng.normal(size=(25, 4))[None]).sum(-1)  # city block: non-Euclidean
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    X0 = LandmarkMDS(2).fit(D).embedding_
    crits = [refine_map(X0, D, kind, max_iter=k, rtol=0.0).criterion for k in range(0, 90, 3)]
    assert all(b <= a * (1 + 1e-13) for a, b in pairwise(crits))
    assert crits[-1] < crits[0]


def test_plain_sweeps_are_scikit_learns_smacof(rng) -> None:
    sklearn_manifold = pytest.importorskip("sklearn.manifold")
    D, _, _ = landmark_problem(rng, 40, 6, 1)
    X0 = LandmarkMDS(3).fit(D).embedding_
    Xs, stress = sklearn_manifold.smacof(D, metric=True, n_components=3, init=X0, n_init=1, max_iter=200, eps=0.0,
                                         normalized_stress=False)
    ref = refine_map(X0, D, "smacof", max_iter=200, rtol=-1.0, accelerate=False)  # rtol < 0: never stop early
    assert ref.iterations == 200 and not ref.converged
    assert ref.criterion == pytest.approx(stress, rel=1e-12)
    np.testing.assert_allclose(ref.X, Xs - Xs.mean(axis=0), atol=1e-10)


@pytest.mark.parametrize("kind", ["smacof", "sammon"])
def test_accelerated_and_plain_iterations_reach_the_same_unique_minimum(rng, kind: str) -> None:
    D, _, _ = landmark_problem(rng, 40, 4, 1)  # Euclidean in R⁴ mapped to R²: one clear minimum
    X0 = LandmarkMDS(2).fit(D).embedding_
    fast = refine_map(X0, D, kind)
    plain = refine_map(X0, D, kind, rtol=1e-14, accelerate=False)
    assert fast.converged and plain.converged and fast.iterations < plain.iterations
    assert fast.criterion == pytest.approx(plain.criterion, rel=1e-8)
    scale = np.sqrt(np.square(plain.X).sum(axis=1).mean())
    assert orthogonal_procrustes_align(fast.X, plain.X).residual < 1e-4 * scale


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["smacof", "sammon"])
def test_edit_distance_maps_converge_within_the_default_budget(kind: str) -> None:
    # 150 random ACGT words of length 10, edit distance (integers 1..12), d = 3. Plain majorisation needs
    # about 3,600 (SMACOF) and 2,250 (Sammon) sweeps to a relative change of 1e-10; capped at 1,000 it
    # stopped with a map up to half its RMS radius away from the converged one (after Procrustes).
    from benchmarks.datasets import random_strings

    D = random_strings(n=150, n_prototypes=150, length=10).D
    X0 = LandmarkMDS(3).fit(D).embedding_
    converged = refine_map(X0, D, kind, rtol=1e-14, max_iter=100_000, accelerate=False)  # the reference
    scale = np.sqrt(np.square(converged.X).sum(axis=1).mean())

    def distance(r) -> float:  # largest landmark displacement after Procrustes, relative to the map's radius
        fit = orthogonal_procrustes_align(r.X, converged.X)
        return float(np.abs(r.X @ fit.R + fit.shift - converged.X).max() / scale)

    capped = refine_map(X0, D, kind, max_iter=1000, accelerate=False)
    assert not capped.converged and capped.iterations == 1000  # the old silent cap, now reported
    assert capped.criterion > converged.criterion * (1 + 5e-5) and distance(capped) > 0.3
    if kind == "smacof":  # the capped iteration is scikit-learn's, sweep for sweep
        from sklearn.manifold import smacof

        _, sk = smacof(D, metric=True, n_components=3, init=X0, n_init=1, max_iter=1000, eps=0.0,
                       normalized_stress=False)
        assert capped.criterion == pytest.approx(sk, rel=1e-12)
    ref = refine_map(X0, D, kind)  # the default: accelerated, MAP_RTOL, MAP_MAX_ITER
    assert ref.converged and ref.iterations < 1000
    assert ref.criterion == pytest.approx(converged.criterion, rel=1e-8) and distance(ref) < 2e-3
    assert np.linalg.norm(_gradient(ref.X, D, kind)) * scale <= 1e-5 * ref.criterion
    plain = refine_map(X0, D, kind, accelerate=False)
    assert plain.converged and plain.iterations < MAP_MAX_ITER  # the default budget suffices unaccelerated too
    # slower to settle: per-sweep changes are small
    assert plain.criterion == pytest.approx(converged.criterion, rel=1e-7)


def test_fit_reports_a_map_that_ran_out_of_budget(rng, monkeypatch, caplog) -> None:
    D, A, _ = landmark_problem(rng, 30, 5, 3, off_span=1.0)
    est = LandmarkMDS(2, method="stress", landmark_map="smacof").fit(D)
    assert est.map_converged_ is True and 1 < est.map_iterations_ < MAP_MAX_ITER
    assert est.map_criterion_ == pytest.approx(map_stress(est.landmark_map_, D, "smacof"))
    assert est.map_tolerance_ == MAP_RTOL
    assert LandmarkMDS(2).fit(D).map_converged_ is None  # a classical-MDS map is not iterated
    monkeypatch.setattr(metric_map, "MAP_MAX_ITER", 6)
    with caplog.at_level(logging.WARNING, logger="streamembed"):
        short = LandmarkMDS(2, method="stress", landmark_map="sammon").fit(D)
    assert short.map_converged_ is False and short.map_iterations_ == 6
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "streamembed"]
    assert len(warnings) == 1 and "budget of 6 sweeps" in warnings[0].getMessage()
    assert np.isfinite(short.embed(A).y).all()  # still usable, and says so
