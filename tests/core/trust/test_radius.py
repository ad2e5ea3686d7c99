"""The radius: coverage on a known full map, zero where the map is exact, the model-file round trip, bad input.

The full map is known: objects near a plane in R^5 (Gaussian in the plane, small noise off it), so a
classical MDS of all of them is the plane up to the noise, and every number below can be checked
against it (docs/math.md §9).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.trust.calibrate import calibrate_on_matrix
from streamembed.core.trust.full_mds import FullMap
from streamembed.core.trust.sensitivity import sensitivity_maps
from streamembed.model_io import load_model, model_from_bytes, model_to_bytes

from ..conftest import euclidean


def plane_points(rng: np.random.Generator, m: int, noise: float = 0.3) -> np.ndarray:
    """m points in R^5: (3·g1, g2) in a plane plus isotropic noise of sd ``noise`` in the other 3 axes."""
    P = np.zeros((m, 5))
    P[:, 0] = 3.0 * rng.normal(size=m)
    P[:, 1] = rng.normal(size=m)
    P[:, 2:] = noise * rng.normal(size=(m, 3))
    return P


def fitted(rng: np.random.Generator, n_fit: int = 600, n_landmarks: int = 60, **kw: object) -> tuple:
    X = plane_points(rng, n_fit)
    est = LandmarkMDS(n_landmarks=n_landmarks, random_state=int(rng.integers(1000)), **kw).fit(euclidean(X, X))
    return est, X


def test_coverage_on_a_known_full_map_is_the_stated_level_within_binomial_error() -> None:
    """Held-out objects' full-MDS positions lie within their radius at the stated rate.

    The full map is the one the calibration measures against (docs/math.md §9.1): the classical MDS of the
    landmarks and the objects whose ratios the calibration keeps, aligned on the landmarks; a held-out
    object's position on it is Gower's. Over 6 fits × 2 methods, the mean coverage is 0.9 within 3 standard
    errors of its binomial scatter: the calibration's, c(1 − c)/(k + 2) for k ratios, and the held-out
    sample's, c(1 − c)/1000.
    """
    rng = np.random.default_rng(7)
    covers, n_cal = [], []
    for _ in range(6):
        X = plane_points(rng, 600)
        D = euclidean(X, X)
        est = LandmarkMDS(n_landmarks=60, random_state=int(rng.integers(1000))).fit(D)
        L = est.landmark_indices_
        out = calibrate_on_matrix(est.model_, D, L, random_state=est.random_state)
        assert out.calibrating is not None and out.calibration is not None
        model = est.model_.with_radius_calibration(out.calibration)
        order = np.concatenate([L, out.calibrating])
        full = FullMap.fit(D[np.ix_(order, order)], np.arange(L.size), model.embedding)
        H = plane_points(rng, 1000)
        truth = full.place(euclidean(H, X[order]))
        for method in ("projection", "restricted"):
            res = model.place(euclidean(H, X[L]), method=method)
            covers.append(float(np.mean(np.linalg.norm(res.y - truth, axis=1) <= res.radius)))
        n_cal.append(out.calibrating.size)
    se = math.sqrt(0.09 / (np.mean(n_cal) + 2) + 0.09 / 1000) / math.sqrt(len(covers) / 2)
    assert abs(float(np.mean(covers)) - 0.9) < 3 * se + 1 / (np.mean(n_cal) + 1), covers


def test_the_radius_is_zero_for_landmarks(rng: np.random.Generator) -> None:
    est, X = fitted(rng)
    L = est.landmark_indices_
    assert np.array_equal(est.radius(euclidean(X[L], X[L])), np.zeros(L.size))


def test_the_radius_vanishes_for_objects_exactly_in_the_landmarks_span(rng: np.random.Generator) -> None:
    X = plane_points(rng, 400, noise=0.0)
    est = LandmarkMDS(n_landmarks=50).fit(euclidean(X, X))
    Z = plane_points(rng, 200, noise=0.0)
    r = est.radius(euclidean(Z, X[est.landmark_indices_]))
    scale = float(np.sqrt(np.mean(np.sum(np.square(est.embedding_), axis=1))))
    assert np.all(np.isfinite(r)) and float(r.max()) < 1e-6 * scale


def test_the_subset_spread_equals_placing_on_each_aligned_subset_map(rng: np.random.Generator) -> None:
    """The affine form of the sensitivity (docs/math.md §9.3) against fitting and aligning each subset map."""
    from streamembed.core.fit.cmds import fit_spectrum
    from streamembed.core.refit.procrustes import orthogonal_procrustes_align

    L = plane_points(rng, 40, noise=0.5)
    Z = plane_points(rng, 30, noise=0.5)
    D = euclidean(L, L)
    sp = fit_spectrum(D, n_components=2)
    X = sp.eigenvectors[:, :2] * np.sqrt(sp.eigenvalues[:2])
    sm = sensitivity_maps(D, sp.eigenvectors[:, :2], sp.eigenvalues[:2], sp.row_means, n_maps=4, leave_out=0.2,
                          seed=3)
    main = LandmarkMDS().fit(D).embed(euclidean(Z, L)).y  # the main projection, in the same (natural) frame
    r = np.random.default_rng(3)
    dev2 = np.zeros(Z.shape[0])
    for _ in range(4):
        S = np.sort(r.choice(40, 40 - 8, replace=False))
        est = LandmarkMDS().fit(D[np.ix_(S, S)])
        fit = orthogonal_procrustes_align(est.embedding_, X[S])
        y = est.embed(euclidean(Z, L[S])).y @ fit.R + fit.shift
        dev2 += np.sum(np.square(y - main), axis=1)
    assert sm is not None
    np.testing.assert_allclose(sm.spread(euclidean(Z, L)), np.sqrt(dev2 / 4), rtol=1e-8, atol=1e-10)


def test_the_calibration_survives_the_model_file_and_old_files_have_no_radius(rng: np.random.Generator) -> None:
    est, X = fitted(rng)
    Z = euclidean(plane_points(rng, 50), X[est.landmark_indices_])
    back = model_from_bytes(model_to_bytes(est.model_, params=est.get_params()))
    assert back.radius_calibration is not None
    np.testing.assert_array_equal(back.place(Z).radius, est.model_.place(Z).radius)
    np.testing.assert_array_equal(back.place(Z, method="restricted").radius,
                                  est.model_.place(Z, method="restricted").radius)
    # a file without a calibration (as every file saved before it existed): it loads, with no radius
    bare = model_from_bytes(model_to_bytes(est.model_.with_radius_calibration(None)))
    assert bare.radius_calibration is None and np.isnan(bare.place(Z).radius).all()


def test_another_coverage_rescales_the_radius_from_the_stored_ratios(rng: np.random.Generator) -> None:
    est, X = fitted(rng)
    Z = euclidean(plane_points(rng, 50), X[est.landmark_indices_])
    cal = est.model_.radius_calibration
    r9 = est.model_.place(Z).radius
    r5 = est.model_.with_radius_calibration(cal.with_coverage(0.5)).place(Z).radius
    ratio = cal.with_coverage(0.5).quantile("projection") / cal.quantile("projection")
    np.testing.assert_allclose(r5, r9 * ratio)
    assert ratio < 1


def test_stress_l1_and_blocks_have_no_radius(rng: np.random.Generator) -> None:
    est, X = fitted(rng)
    P = plane_points(rng, 6)
    A = euclidean(P, X[est.landmark_indices_])
    assert np.isnan(est.embed(A, method="stress").radius).all()
    assert np.isnan(est.embed(A, euclidean(P, P)).radius).all()


def test_feature_and_similarity_fits_get_a_radius(rng: np.random.Generator) -> None:
    X = plane_points(rng, 400)
    Z = plane_points(rng, 20)
    feat = LandmarkMDS(n_landmarks=60, metric="euclidean").fit(X)
    r = feat.radius(Z)
    assert r.shape == (20,) and np.isfinite(r).all() and (r > 0).all()
    K = X @ X.T
    sim = LandmarkMDS(n_landmarks=60, input="similarity").fit(K)
    L = sim.landmark_indices_
    r2 = sim.radius(np.hstack([Z @ X[L].T, np.sum(Z * Z, axis=1)[:, None]]))
    assert np.isfinite(r2).all() and (r2 > 0).all()


def test_too_few_non_landmark_objects_give_no_radius_and_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(1)
    X = plane_points(rng, 45)
    with caplog.at_level(logging.WARNING, logger="streamembed"):
        est = LandmarkMDS(n_landmarks=40).fit(euclidean(X, X))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "radius" in r.getMessage()]
    assert len(warnings) == 1
    assert "5 non-landmark fit objects" in warnings[0].getMessage() and "4 more" in warnings[0].getMessage()
    assert est.model_.radius_calibration is None
    assert np.isnan(est.radius(euclidean(X[:3], X[est.landmark_indices_]))).all()


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 1.2, float("nan")])
def test_the_estimator_refuses_a_coverage_outside_0_1(bad: float) -> None:
    X = plane_points(np.random.default_rng(0), 30)
    with pytest.raises(InputError, match="coverage"):
        LandmarkMDS(n_landmarks=10, coverage=bad).fit(euclidean(X, X))


def test_a_saved_model_is_loaded_with_its_coverage(tmp_path, rng: np.random.Generator) -> None:  # type: ignore[no-untyped-def]
    est, _ = fitted(rng, coverage=0.8)
    est.save(tmp_path / "m.npz")
    assert LandmarkMDS.load(tmp_path / "m.npz").coverage == 0.8
    assert load_model(tmp_path / "m.npz").radius_calibration.coverage == 0.8


def test_a_calibrated_estimator_can_be_copied_and_pickled(rng: np.random.Generator) -> None:
    import copy
    import pickle

    est, X = fitted(rng)
    Z = euclidean(plane_points(rng, 20), X[est.landmark_indices_])
    for twin in (copy.deepcopy(est), pickle.loads(pickle.dumps(est))):
        np.testing.assert_array_equal(twin.radius(Z), est.radius(Z))
