"""orthogonal_procrustes_align: rigid motions are recovered exactly (docs/math.md §5)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.core.errors import InputError
from streamembed.core.refit.procrustes import apply_alignment, orthogonal_procrustes_align


def random_orthogonal(rng: np.random.Generator, d: int, reflect: bool) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    if (np.linalg.det(Q) < 0) != reflect:
        Q[:, 0] = -Q[:, 0]
    return Q


@pytest.mark.parametrize("d", [1, 2, 3, 10])
@pytest.mark.parametrize("reflect", [False, True])
def test_known_rotation_and_translation_are_recovered(d: int, reflect: bool) -> None:
    rng = np.random.default_rng(d)
    S = rng.normal(size=(30, d))
    R = random_orthogonal(rng, d, reflect)
    shift = rng.normal(size=d) * 5
    fit = orthogonal_procrustes_align(S, S @ R + shift)
    np.testing.assert_allclose(fit.R, R, atol=1e-12)
    np.testing.assert_allclose(fit.shift, shift, atol=1e-12)
    assert fit.residual < 1e-12
    np.testing.assert_allclose(apply_alignment(S, fit), S @ R + shift, atol=1e-12)


def test_identity_has_zero_residual_and_identity_motion() -> None:
    S = np.random.default_rng(0).normal(size=(12, 3))
    fit = orthogonal_procrustes_align(S, S)
    np.testing.assert_allclose(fit.R, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(fit.shift, 0, atol=1e-12)
    assert fit.residual == pytest.approx(0, abs=1e-12)


def test_rotations_only_cannot_undo_a_reflection() -> None:
    rng = np.random.default_rng(1)
    S = rng.normal(size=(20, 2))
    T = S * np.array([1.0, -1.0])
    fit = orthogonal_procrustes_align(S, T, allow_reflection=False)
    assert np.linalg.det(fit.R) == pytest.approx(1.0)
    assert fit.residual > 0.1
    assert orthogonal_procrustes_align(S, T).residual < 1e-12


def test_no_scaling_residual_is_rms_distance() -> None:
    # Target = 2 × source about the centroid: the best rigid motion is the identity,
    # and the RMS residual equals the RMS radius of the source.
    S = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    fit = orthogonal_procrustes_align(S, 2 * S)
    np.testing.assert_allclose(fit.R @ fit.R.T, np.eye(2), atol=1e-12)
    assert fit.residual == pytest.approx(1.0)


def test_weights_ignore_zero_weight_points() -> None:
    rng = np.random.default_rng(2)
    S = rng.normal(size=(10, 3))
    R = random_orthogonal(rng, 3, False)
    T = S @ R + 1.0
    T[-1] += 100.0  # an outlier with zero weight
    w = np.ones(10)
    w[-1] = 0
    fit = orthogonal_procrustes_align(S, T, weights=w)
    np.testing.assert_allclose(fit.R, R, atol=1e-10)
    assert fit.residual < 1e-10


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(InputError):
        orthogonal_procrustes_align(np.zeros((3, 2)), np.zeros((3, 3)))
