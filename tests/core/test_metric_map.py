"""Metric-MDS landmark maps: SMACOF and Sammon (seed 001 §2.2–3, ``core.metric_map``).

A refined map lowers its own criterion from the classical-MDS start; arrivals
on it are placed by restricted reconstruction for a stress-built map (seed
000 end of §4): the stress criterion started from the least-squares
placement on that map, which it can only improve.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.criteria import stress_objective
from streamembed.core.errors import InputError
from streamembed.core.placement import _map_start
from streamembed.core.metric_map import map_stress, refine_map

from .conftest import landmark_problem


@pytest.mark.parametrize("kind", ["smacof", "sammon"])
def test_refinement_lowers_the_criterion_from_the_cmds_start(rng, kind: str) -> None:
    D, _, _ = landmark_problem(rng, 30, 5, 1)
    X0 = LandmarkMDS(2).fit(D).embedding_
    X, crit, iterations = refine_map(X0, D, kind)
    assert crit < 0.9 * map_stress(X0, D, kind) and iterations > 1
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-10)
    # a majorisation fixed point: one more sweep changes nothing
    X2, crit2, _ = refine_map(X, D, kind, max_iter=1)
    assert crit2 == pytest.approx(crit, rel=1e-6)


def test_an_exact_configuration_is_already_optimal(rng) -> None:
    D, _, _ = landmark_problem(rng, 15, 2, 1)  # planar landmarks: CMDS is exact, stress 0
    X0 = LandmarkMDS(2).fit(D).embedding_
    X, crit, _ = refine_map(X0, D, "smacof")
    assert crit < 1e-16 * np.square(D).sum()
    np.testing.assert_allclose(X, X0, atol=1e-8)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["cmds", "smacof", "sammon"])
def test_stress_rr_never_has_higher_stress_than_projection_on_the_same_map(seed: int, kind: str) -> None:
    rng = np.random.default_rng(seed)
    D, A, _ = landmark_problem(rng, 20, 4, 25, off_span=1.5)
    est = LandmarkMDS(2, method="stress", landmark_map=kind).fit(D)
    X = est.embedding_
    # projection on this map: ŷ = (XᵀX)⁻¹Xᵀb with the map's own X (for "cmds" the usual formula)
    y_proj = _map_start(est.model_, A) if kind != "cmds" else est.embed(A, method="projection").y
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
