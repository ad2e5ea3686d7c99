"""Refits: landmark selection, Procrustes alignment, versioning (docs/math.md §5, §7)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.refit.refit import refit

from ..conftest import euclidean


def test_refit_keeps_the_frame_and_bumps_the_version(rng):
    P = rng.normal(size=(40, 2)) * 3
    new = rng.normal(size=(30, 2)) * 3 + np.array([8.0, 0.0])  # the stream moved right
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P)).model_.with_version(3)
    cand = np.vstack([P, new])
    ids = [str(x) for x in old.landmark_ids] + [f"z{i}" for i in range(30)]
    # max–min re-selection takes some of the new objects (the residual default would keep the old landmarks:
    # a move inside the plane is explained by the map, see test_residual_selection_*)
    res = refit(old, euclidean(cand, cand), ids, n_landmarks=40, selection="maxmin")
    assert res.model.version == 4 and res.model.lineage == old.lineage
    assert len(res.new_ids) == 40 and set(res.new_ids) - set(res.old_ids)  # some new landmarks
    assert res.alignment_rms < 1e-8  # planar data: the frames agree exactly
    # an object embedded before and after the refit lands at the same place
    z = rng.normal(size=(5, 2)) * 3
    before = old.place(euclidean(z, P)).y
    sel_pts = cand[[ids.index(i) for i in res.new_ids]]
    after = res.model.place(euclidean(z, sel_pts)).y
    np.testing.assert_allclose(after, before, atol=1e-8)


def test_refit_rejects_candidates_that_do_not_start_with_the_old_landmarks(rng):
    P = rng.normal(size=(10, 2))
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P)).model_
    with pytest.raises(ValueError, match="first candidates must be the old landmarks"):
        refit(old, euclidean(P, P), [f"x{i}" for i in range(10)])


def test_aligned_model_round_trips(rng, tmp_path):
    P = rng.normal(size=(12, 2))
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P))
    Q, _ = np.linalg.qr(rng.normal(size=(2, 2)))
    old.set_alignment(Q, np.array([1.0, 2.0]))
    old.save(tmp_path / "m.npz")
    back = LandmarkMDS.load(tmp_path / "m.npz")
    z = rng.normal(size=(3, 2))
    np.testing.assert_allclose(back.transform(euclidean(z, P)), old.transform(euclidean(z, P)))
    np.testing.assert_allclose(back.embedding_, old.embedding_)


from streamembed.core.errors import InputError  # noqa: E402
SELECTIONS = ("residual", "maxmin", "random", "kmeans++")  # refit selections exercised below
from streamembed.core.refit.refit import candidate_dissimilarities, residual_kernel  # noqa: E402


def test_candidates_from_features_stack_old_landmarks_first_and_drop_repeated_ids(rng):
    F_old = rng.normal(size=(6, 3))
    F = rng.normal(size=(4, 3))
    cs = candidate_dissimilarities([f"L{i}" for i in range(6)], ["a", "L2", "b", "c"], old_features=F_old,
                                   features=F, metric="cityblock")
    assert cs.ids == [f"L{i}" for i in range(6)] + ["a", "b", "c"] and cs.n_old == 6
    stacked = np.vstack([F_old, F[[0, 2, 3]]])
    np.testing.assert_allclose(cs.features, stacked)
    np.testing.assert_allclose(cs.D, np.abs(stacked[:, None] - stacked[None]).sum(-1))


def test_candidates_from_dissimilarities_assemble_the_blocks(rng):
    P = rng.normal(size=(5, 2))
    Z = rng.normal(size=(3, 2))
    cs = candidate_dissimilarities(["p0", "p1", "p2", "p3", "p4"], ["z0", "p1", "z2"],
                                   old_dissimilarities=euclidean(P, P), cross_to_landmarks=euclidean(Z, P),
                                   mutual=euclidean(Z, Z))
    both = np.vstack([P, Z[[0, 2]]])
    np.testing.assert_allclose(cs.D, euclidean(both, both), atol=1e-12)
    assert cs.ids == ["p0", "p1", "p2", "p3", "p4", "z0", "z2"] and cs.features is None
    with pytest.raises(InputError, match="does not store its landmark dissimilarities"):
        candidate_dissimilarities(["p0"], ["z0"], cross_to_landmarks=np.ones((1, 1)), mutual=np.zeros((1, 1)))
    with pytest.raises(InputError, match="no landmark features"):
        candidate_dissimilarities(["p0"], ["z0"], features=np.ones((1, 2)))
    with pytest.raises(InputError, match="expected old dissimilarities"):
        candidate_dissimilarities(["p0", "p1"], ["z0"], old_dissimilarities=np.zeros((2, 2)),
                                  cross_to_landmarks=np.ones((1, 3)), mutual=np.zeros((1, 1)))


def _off_plane_refit_problem(rng, n=40):
    """Landmarks on a plane in R^3 (2-d map), a reservoir half on the plane, half in a cluster 8 units off it."""
    P = np.hstack([rng.normal(size=(n, 2)) * 3, 0.05 * rng.normal(size=(n, 1))])
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P)).model_
    on = np.hstack([rng.normal(size=(100, 2)) * 3, 0.05 * rng.normal(size=(100, 1))])
    off = np.hstack([rng.normal(size=(100, 2)) * 0.7, 8.0 + 0.5 * rng.normal(size=(100, 1))])
    cand = np.vstack([P, on, off])
    ids = [str(x) for x in old.landmark_ids] + [f"z{i}" for i in range(200)]
    return old, cand, ids


def test_residual_kernel_diagonal_is_the_unexplained_energy(rng):
    old, cand, _ = _off_plane_refit_problem(rng)
    D = euclidean(cand, cand)
    R, beta = residual_kernel(old, D)
    res = old.place(D[:, :40])
    np.testing.assert_allclose(np.diagonal(R), res.unexplained, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(R, R.T, atol=1e-8)
    np.testing.assert_allclose(beta, res.beta)
    assert np.linalg.eigvalsh(R).min() > -1e-6 * np.abs(R).max()  # Euclidean input: PSD


def test_residual_selection_repairs_the_map_where_maxmin_does_not(rng):
    old, cand, ids = _off_plane_refit_problem(rng)
    D = euclidean(cand, cand)
    window = np.arange(40, 240)
    before = old.place(D[np.ix_(window, np.arange(40))]).relative_unexplained.mean()
    out = {}
    for selection in SELECTIONS:
        res = refit(old, D, ids, selection=selection, seed=1)
        assert res.outcome == "installed", res.reason
        sel = [ids.index(i) for i in res.new_ids]
        out[selection] = (res, res.model.place(D[np.ix_(window, sel)]).relative_unexplained.mean())
        assert len(res.new_ids) == 40 and res.details["selection"] == selection
    res, after = out["residual"]
    # half of the reservoir's energy is off the plane: about half of the landmarks are replaced, all from off it
    assert 10 <= res.details["new_from_reservoir"] <= 20
    assert res.details["kept_old"] == 40 - res.details["new_from_reservoir"]
    assert all(not i.startswith("z") or int(i[1:]) >= 100 for i in res.new_ids)  # old landmarks or off-plane ones
    assert after < 0.3 * before  # the new 2-d map takes the off-plane axis: the window is explained again
    assert after < 0.5 * out["maxmin"][1]  # max–min takes a few extremes, too few to turn an axis


def test_residual_selection_leaves_the_map_alone_when_the_stream_stays_on_it(rng):
    """A plane in R^6 with noise in its 4 other directions; the stream moves inside the plane."""
    P = np.hstack([rng.normal(size=(60, 2)) * 3, 0.05 * rng.normal(size=(60, 4))])
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P)).model_
    on = np.hstack([rng.normal(size=(300, 2)) * 3 + [4.0, 0.0], 0.05 * rng.normal(size=(300, 4))])
    cand = np.vstack([P, on])
    ids = [str(x) for x in old.landmark_ids] + [f"z{i}" for i in range(300)]
    D = euclidean(cand, cand)
    res = refit(old, D, ids, selection="residual")
    assert res.new_ids == res.old_ids and res.alignment_rms == 0.0  # nothing to repair: the same map ...
    assert res.outcome == "kept" and res.model is None and "same landmarks" in res.reason  # ... and no new version
    moved = refit(old, D, ids, selection="maxmin")
    assert moved.alignment_rms > 100 * max(res.alignment_rms, 1e-12)  # re-selection redraws it anyway


def test_unknown_selection_is_refused(rng):
    P = rng.normal(size=(10, 2))
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P)).model_
    with pytest.raises(ValueError, match="selection must be one of"):
        refit(old, euclidean(P, P), [str(x) for x in old.landmark_ids], selection="best")
