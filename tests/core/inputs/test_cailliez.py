"""Cailliez's additive constant (Ghojogh et al. 2020, §4.2 eq. 33–34, ``core.inputs.cailliez``).

Reference property (Cailliez 1983): at c = c* the kernel of δ + c is PSD with
one more zero eigenvalue than the centring vector's; any smaller c leaves a
negative eigenvalue.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as ssd

from streamembed import LandmarkMDS
from streamembed.core.inputs.cailliez import add_constant, additive_constant, cailliez_constant
from streamembed.core.fit.cmds import double_center
from benchmarks.editdistance import levenshtein_matrix

from ..conftest import euclidean


def _eigs(D: np.ndarray) -> np.ndarray:
    B, _, _ = double_center(np.square(D))
    return np.linalg.eigvalsh(B)


def _edit_distances(rng: np.random.Generator, n: int = 30) -> np.ndarray:
    words = ["".join(rng.choice(list("ACGT"), size=int(rng.integers(8, 14)))) for _ in range(n)]
    return np.asarray(levenshtein_matrix(words), dtype=np.float64)


@pytest.mark.parametrize("kind", ["cityblock", "edit"])
def test_the_constant_makes_the_smallest_eigenvalue_zero(rng, kind: str) -> None:
    D = ssd.squareform(ssd.pdist(rng.normal(size=(40, 5)), "cityblock")) if kind == "cityblock" \
        else _edit_distances(rng)
    before = _eigs(D)
    assert before[0] < -1e-3 * before[-1]  # non-Euclidean
    c = cailliez_constant(D)
    assert c > 0
    w = _eigs(add_constant(D, c))
    tol = 1e-9 * w[-1]
    assert abs(w[0]) < tol and abs(w[1]) < tol  # the centring vector's zero and Cailliez's
    assert w[2] > tol
    assert _eigs(add_constant(D, 0.99 * c))[0] < -tol  # c* is the smallest such constant


def test_euclidean_input_is_left_alone(rng) -> None:
    P = rng.normal(size=(25, 3))
    assert additive_constant(euclidean(P, P)) == 0.0
    est = LandmarkMDS(2, correction="cailliez").fit(euclidean(P, P))
    assert est.additive_constant_ == 0.0
    np.testing.assert_allclose(est.embedding_, LandmarkMDS(2).fit(euclidean(P, P)).embedding_)


def test_model_adds_the_constant_to_arrivals_and_is_euclidean(rng, tmp_path) -> None:
    P, Z = rng.normal(size=(30, 4)), rng.normal(size=(8, 4))
    D, A = ssd.cdist(P, P, "cityblock"), ssd.cdist(Z, P, "cityblock")
    est = LandmarkMDS(2, method="restricted", correction="cailliez").fit(D)
    c = est.additive_constant_
    assert c == pytest.approx(cailliez_constant(D)) and est.negative_share_ < 1e-9
    assert LandmarkMDS(2).fit(D).negative_share_ > 0.01
    # the same as a plain model of the corrected dissimilarities, arrivals shifted by c
    plain = LandmarkMDS(2, method="restricted").fit(add_constant(D, c))
    np.testing.assert_allclose(est.embed(A).y, plain.embed(A + c).y, atol=1e-9)
    C = ssd.cdist(Z, Z, "cityblock")
    np.testing.assert_allclose(est.embed(A, C).y, plain.embed(A + c, add_constant(C, c)).y, atol=1e-6)
    est.save(tmp_path / "c.npz")
    assert LandmarkMDS.load(tmp_path / "c.npz").additive_constant_ == c
