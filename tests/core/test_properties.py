"""Property tests (hypothesis): invariances and exactness that hold for any input."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamembed import LandmarkMDS

from .conftest import euclidean

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def configurations(draw, off_span: bool = False):
    seed = draw(st.integers(0, 2**32 - 1))
    p = draw(st.integers(1, 4))
    n = draw(st.integers(p + 2, p + 9))
    m = draw(st.integers(1, 6))
    spread = draw(st.floats(0.1, 100.0))
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(n, p)) * spread
    Z = rng.normal(size=(m, p)) * spread
    if off_span:
        Lx = np.hstack([L, np.zeros((n, 2))])
        Zx = np.hstack([Z, rng.normal(size=(m, 2)) * spread * draw(st.floats(0.01, 3.0))])
        return Lx, Zx, p
    return L, Z, p


def _well_conditioned(est: LandmarkMDS, p: int) -> bool:
    lam = est.spectrum_.eigenvalues
    return lam.size >= p and lam[p - 1] > 1e-6 * lam[0]


@SETTINGS
@given(configurations())
def test_objects_in_span_are_recovered_exactly(cfg):
    L, Z, p = cfg
    est = LandmarkMDS(n_components=p).fit(euclidean(L, L))
    if not _well_conditioned(est, p):
        return
    A, C = euclidean(Z, L), euclidean(Z, Z)
    proj = est.embed(A, k0_rows="all")
    rr = est.embed(A, method="restricted")
    blk = est.embed(A, C)
    scale = 1.0 + np.abs(proj.y).max()
    np.testing.assert_allclose(rr.y, proj.y, atol=1e-5 * scale)
    np.testing.assert_allclose(blk.y, proj.y, atol=1e-5 * scale)
    np.testing.assert_allclose(euclidean(proj.y, est.embedding_), A, atol=1e-5 * scale)
    assert np.abs(proj.k0).max() <= 1e-7 * scale**2


@SETTINGS
@given(configurations(off_span=True))
def test_k0_vanishes_on_landmarks_and_is_nonnegative_for_euclidean_objects(cfg):
    L, Z, p = cfg
    est = LandmarkMDS(n_components=1).fit(euclidean(L, L))
    on_landmarks = est.embed(euclidean(L, L), k0_rows="all")
    scale = 1.0 + on_landmarks.beta.max()
    assert np.abs(on_landmarks.k0).max() <= 1e-8 * scale
    objects = est.embed(euclidean(Z, L), k0_rows="all")
    assert objects.k0.min() >= -1e-8 * (1.0 + objects.beta.max())
    # β - ‖ŷ‖² = k0 + τ ≥ k0 (docs/math.md §4)
    assert (objects.unexplained >= objects.k0 - 1e-8 * (1.0 + objects.beta.max())).all()


@SETTINGS
@given(configurations(off_span=True), st.randoms(use_true_random=False), st.sampled_from(["projection", "restricted"]))
def test_invariant_under_permuting_landmarks(cfg, random, method):
    L, Z, p = cfg
    n = L.shape[0]
    perm = np.array(random.sample(range(n), n))
    D, A = euclidean(L, L), euclidean(Z, L)
    a = LandmarkMDS(n_components=1, method=method).fit(D)
    b = LandmarkMDS(n_components=1, method=method).fit(D[np.ix_(perm, perm)])
    lam = a.spectrum_.eigenvalues
    if lam.size > 1 and lam[0] - lam[1] < 1e-6 * lam[0]:
        return  # the first axis is not unique: nothing to compare
    ya, yb = a.transform(A), b.transform(A[:, perm])
    # the same configuration up to a reflection: compare distances to the landmarks
    np.testing.assert_allclose(
        euclidean(ya, a.embedding_)[:, perm], euclidean(yb, b.embedding_), atol=1e-6 * (1 + np.abs(ya).max())
    )


@SETTINGS
@given(configurations(off_span=True), st.sampled_from(["projection", "restricted"]))
def test_single_object_methods_are_batch_independent(cfg, method):
    L, Z, p = cfg
    est = LandmarkMDS(n_components=1, method=method).fit(euclidean(L, L))
    A = euclidean(Z, L)
    whole = est.transform(A)
    for i in range(A.shape[0]):
        np.testing.assert_allclose(est.transform(A[i : i + 1])[0], whole[i], rtol=1e-10, atol=1e-10)


@SETTINGS
@given(configurations(off_span=True))
def test_block_without_mutual_terms_dominates_nothing_but_agrees_for_one_object(cfg):
    L, Z, p = cfg
    est = LandmarkMDS(n_components=1, method="restricted").fit(euclidean(L, L))
    A = euclidean(Z[:1], L)
    single = est.embed(A)
    block = est.embed(A, np.zeros((1, 1)))
    np.testing.assert_allclose(block.y, single.y, atol=1e-6 * (1 + np.abs(single.y).max()))
