"""Refits: landmark selection, Procrustes alignment, versioning (MATH.md §5)."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.refit import refit

from .conftest import euclidean


def test_refit_keeps_the_frame_and_bumps_the_version(rng):
    P = rng.normal(size=(40, 2)) * 3
    new = rng.normal(size=(30, 2)) * 3 + np.array([8.0, 0.0])  # the stream moved right
    old = LandmarkMDS(n_components=2).fit(euclidean(P, P)).model_.with_version(3)
    cand = np.vstack([P, new])
    ids = [str(x) for x in old.landmark_ids] + [f"z{i}" for i in range(30)]
    res = refit(old, euclidean(cand, cand), ids, n_landmarks=40)
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
