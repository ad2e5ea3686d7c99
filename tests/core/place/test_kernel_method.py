"""``method="kernel"`` wired through the model, the estimator, the stream and the model file (docs/math.md §8.6):
convex combinations on every map kind, σ from the landmarks at fit (a skeleton's own, or the user's), LSDR exactly,
the landmark rows, threads, blocks refused, σ saved and rebuilt for files saved before it, refits keep the user's."""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy.optimize import nnls
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.core.errors import InputError
from streamembed.core.fit.skeleton import fit_skeleton, lsdr_embedding
from streamembed.core.model import fit_model
from streamembed.core.place.kernel import bandwidth, place_kernel
from streamembed.model_io import _checksum, model_from_bytes, model_to_bytes, read_model_bytes

RNG = np.random.default_rng(38)
#: 150 points of a noisy spiral in the plane (LSDR tessellates them), and 40 arrivals near it.
_T = RNG.uniform(0.5, 3.0, size=190)
SPIRAL = np.c_[np.cos(_T) * _T, np.sin(_T) * _T] + 0.05 * RNG.normal(size=(190, 2))
X, Z = SPIRAL[:150], SPIRAL[150:]


def _estimator(kind: str, **kw: object) -> LandmarkMDS:
    if kind == "skeleton":
        return LandmarkMDS(method="kernel", landmark_selection="skeleton", metric="euclidean", **kw).fit(X)
    return LandmarkMDS(method="kernel", landmark_map=kind, n_landmarks=30, metric="euclidean", **kw).fit(X)


def _convex_weights(y: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, float]:
    w = 1e3 * float(np.abs(Y).max())
    weights, residual = nnls(np.vstack([Y.T, np.full((1, Y.shape[0]), w)]), np.append(y, w))
    return weights, residual / w


@pytest.mark.parametrize("kind", ["cmds", "smacof", "sammon", "nonmetric", "skeleton"])
def test_every_placement_is_a_convex_combination_of_the_embedding_on_every_map_kind(kind: str) -> None:
    est = _estimator(kind)
    P = est.transform(Z)
    for y in P:
        weights, residual = _convex_weights(y, est.embedding_)
        assert residual < 1e-10 and weights.sum() == pytest.approx(1.0, abs=1e-9), kind
    # the Nadaraya–Watson average itself, on the core dissimilarities (the model's frame is the output frame here)
    np.testing.assert_allclose(P, place_kernel(est.dissimilarities_to_landmarks(Z), est.embedding_,
                                               est.model_.bandwidth), rtol=1e-12, atol=1e-12)


def test_sigma_is_the_rule_from_the_landmarks_or_the_skeletons_or_the_users() -> None:
    est = _estimator("cmds")
    L = est.landmark_features_
    assert est.model_.bandwidth == pytest.approx(bandwidth(cdist(L, L)), rel=1e-12)
    assert est.model_.kernel_bandwidth is None
    assert _estimator("skeleton").model_.bandwidth == fit_skeleton(X).bandwidth  # with the boundary distances
    given = _estimator("cmds", kernel_bandwidth=0.25)
    assert given.model_.bandwidth == 0.25 == given.model_.kernel_bandwidth
    np.testing.assert_allclose(given.transform(Z), place_kernel(cdist(Z, L), given.embedding_, 0.25), atol=1e-12)
    assert _estimator("skeleton", kernel_bandwidth=0.25).model_.bandwidth == 0.25


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
def test_a_zero_or_non_finite_sigma_is_refused_at_fit(sigma: float) -> None:
    with pytest.raises(InputError, match="kernel_bandwidth must be"):
        LandmarkMDS(method="kernel", kernel_bandwidth=sigma).fit(cdist(X[:20], X[:20]))
    with pytest.raises(InputError, match="kernel_bandwidth must be"):
        fit_model(cdist(X[:20], X[:20]), kernel_bandwidth=sigma)


def test_landmarks_that_give_no_sigma_refuse_the_kernel_method_at_fit_and_other_methods_fit() -> None:
    """Every landmark doubled: each one's nearest other is at 0, so the rule gives σ = 0: refused, saying why."""
    P = np.repeat(X[:10], 2, axis=0)
    D = cdist(P, P)
    with pytest.raises(InputError, match="needs the map's bandwidth sigma and this model has none"):
        LandmarkMDS(method="kernel").fit(D)
    est = LandmarkMDS().fit(D)
    assert est.model_.bandwidth is None
    assert LandmarkMDS(method="kernel", kernel_bandwidth=1.0).fit(D).model_.bandwidth == 1.0


def test_skeleton_and_kernel_is_lsdr_exactly() -> None:
    """Skeleton points keep their MDS coordinates (they are at distance 0 from a landmark), every other point is
    the Nadaraya–Watson average with the skeleton's σ: ``core.fit.skeleton.lsdr_embedding`` to round-off."""
    est = LandmarkMDS(method="kernel", landmark_selection="skeleton", metric="euclidean")
    Y = est.fit_transform(X)
    ref = lsdr_embedding(X, 2)
    np.testing.assert_array_equal(est.landmark_indices_, ref.skeleton.indices)
    np.testing.assert_array_equal(Y[est.landmark_indices_], est.embedding_)
    signs = np.sign((Y * ref.Y).sum(axis=0))  # an eigenvector's sign is a convention
    np.testing.assert_allclose(Y * signs, ref.Y, rtol=1e-10, atol=1e-10 * np.abs(ref.Y).max())


def test_a_landmark_row_lands_on_its_coordinates_and_a_near_one_near_them_when_sigma_is_small() -> None:
    est = _estimator("cmds")
    L = est.landmark_features_
    np.testing.assert_array_equal(est.transform(L), est.embedding_)
    near = L + 1e-5 * np.random.default_rng(1).normal(size=L.shape)
    small = _estimator("cmds", kernel_bandwidth=1e-4)
    np.testing.assert_allclose(small.transform(near), small.embedding_, atol=1e-9)
    assert np.abs(est.transform(near) - est.embedding_).max() > 1e-2  # with the rule's σ they are averaged


def test_its_output_columns_mean_what_they_mean_for_the_other_methods() -> None:
    """β, unexplained and k0 are the projection's (kernel quantities of the row); t is NaN; no radius."""
    est = _estimator("cmds")
    A = est.dissimilarities_to_landmarks(Z)
    kern = est.embed(A, k0_rows="all")
    proj = est.embed(A, method="projection", k0_rows="all")
    assert kern.method == "kernel"
    for name in ("beta", "unexplained", "k0"):
        np.testing.assert_array_equal(getattr(kern, name), getattr(proj, name), err_msg=name)
    assert np.isnan(kern.t).all() and np.isnan(kern.radius).all()
    assert kern.unexplained_placed is not None and np.isfinite(kern.unexplained_placed).all()


def test_threads_placing_concurrently_get_bit_identical_placements() -> None:
    est = _estimator("skeleton")
    A = est.dissimilarities_to_landmarks(np.repeat(Z, 50, axis=0))
    one = est.embed(A).y
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: est.embed(A).y, range(8)))
    assert all(np.array_equal(r, one) for r in runs)


def test_a_block_is_refused_with_the_reason() -> None:
    est = _estimator("cmds")
    A = est.dissimilarities_to_landmarks(Z[:4])
    with pytest.raises(InputError, match="places single objects only, each a convex combination"):
        est.embed(A, cdist(Z[:4], Z[:4]))


def test_the_stream_dead_letters_blocks_and_places_the_single_objects() -> None:
    import pyarrow as pa

    from streamembed.stream.embedder import BatchEmbedder

    est = LandmarkMDS(n_components=2).fit(cdist(X[:30], X[:30]))
    table = pa.table({"id": ["a", "b", "c"],
                      "dissimilarities": pa.array(cdist(Z[:3], X[:30]).tolist(), pa.list_(pa.float64())),
                      "cross": pa.array([cdist(Z[:2], Z[:2])[0].tolist(), cdist(Z[:2], Z[:2])[1].tolist(), None],
                                        pa.list_(pa.float64())),
                      "block": pa.array(["k", "k", None])})
    out = BatchEmbedder(est.model_, method="kernel").process(table)
    assert out.output is not None and out.output.column("id").to_pylist() == ["c"]
    assert out.output.column("method").to_pylist() == ["kernel"]
    assert sorted(d.id for d in out.dead) == ["a", "b"]
    assert all(d.reason == "bad_block" and "convex combination" in d.detail for d in out.dead)
    placed = BatchEmbedder(est.model_, method="projection").process(table)  # every other method: block RR
    assert placed.output is not None and not placed.dead


def _saved_before_sigma(data: bytes) -> bytes:
    """The model file as this version wrote it before σ was stored: the same, without its two metadata keys."""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        files = {name: npz[name] for name in npz.files}
    meta = json.loads(str(files.pop("meta")))
    del meta["bandwidth"], meta["kernel_bandwidth"]
    meta["checksum_sha256"] = _checksum(files, meta)
    buf = io.BytesIO()
    np.savez(buf, meta=np.array(json.dumps(meta, sort_keys=True)), **files)
    return buf.getvalue()


@pytest.mark.parametrize("how", ["dissimilarities", "features", "geodesics", "cailliez", "similarity"])
def test_a_file_saved_before_sigma_gets_the_rule_from_what_it_keeps(how: str) -> None:
    D = cdist(X[:30], X[:30]) ** 1.3  # not Euclidean: Cailliez's constant is positive
    est = {"dissimilarities": lambda: LandmarkMDS().fit(D),
           "features": lambda: LandmarkMDS(metric="cityblock").fit(X[:30]),
           "geodesics": lambda: LandmarkMDS(geodesic_neighbors=6).fit(D),
           "cailliez": lambda: LandmarkMDS(correction="cailliez").fit(D),
           "similarity": lambda: LandmarkMDS(input="similarity").fit_features(X[:30], metric="rbf")}[how]()
    sigma = est.model_.bandwidth
    assert sigma is not None
    data = model_to_bytes(est.model_, params=est.get_params())
    assert model_from_bytes(data).bandwidth == sigma
    old = model_from_bytes(_saved_before_sigma(data))
    assert old.bandwidth == pytest.approx(sigma, rel=1e-12) and old.kernel_bandwidth is None


def test_a_file_saved_before_sigma_without_what_it_needs_loads_and_refuses_the_kernel_method_saying_why() -> None:
    sk = LandmarkMDS(landmark_selection="skeleton", metric="euclidean").fit(X)  # σ needs the boundary distances
    model, params = read_model_bytes(_saved_before_sigma(model_to_bytes(sk.model_, params=sk.get_params())))
    assert model.bandwidth is None
    with pytest.raises(InputError, match="saved before sigma was stored"):
        model.place(sk.dissimilarities_to_landmarks(Z), method="kernel")
    np.testing.assert_array_equal(model.place(sk.dissimilarities_to_landmarks(Z)).y, sk.transform(Z))
    given = model.with_kernel_bandwidth(0.5)
    assert given.place(sk.dissimilarities_to_landmarks(Z), method="kernel").valid.all()


def test_the_users_sigma_survives_a_save_and_a_refit_and_the_rule_is_recomputed() -> None:
    from streamembed.core.refit.refit import refit

    P = np.vstack([X, Z])
    D = cdist(P, P)
    for given in (None, 0.3):
        model = LandmarkMDS(kernel_bandwidth=given).fit(D[:30, :30]).model_
        back = model_from_bytes(model_to_bytes(model))
        assert (back.bandwidth, back.kernel_bandwidth) == (model.bandwidth, model.kernel_bandwidth)
        ids = [str(i) for i in range(P.shape[0])]
        new = refit(model, D, ids, selection="random", seed=1).model
        assert new is not None
        L = np.asarray([int(i) for i in new.landmark_ids])
        expected = bandwidth(D[np.ix_(L, L)]) if given is None else given
        assert new.bandwidth == pytest.approx(expected, rel=1e-12) and new.kernel_bandwidth == given
