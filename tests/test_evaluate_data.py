"""``evaluate_landmarks``: the landmark-selection table on the user's own data (docs/landmarks.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.spatial.distance as ssd

from streamembed.core.errors import InputError
from streamembed.evaluate_data import evaluate_landmarks


def plane(n: int = 90, seed: int = 0) -> np.ndarray:
    """Points in a 2-D plane of R^5: every landmark map with ≥ 3 landmarks in general position is the full map."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    return (rng.normal(size=(n, 2)) * [3.0, 1.0]) @ Q[:, :2].T


def test_in_plane_data_every_selection_recovers_the_full_map():
    X = plane()
    lines: list[str] = []
    rep = evaluate_landmarks(X=X, landmarks=[10, 20, 500], seeds=2, progress=lines.append, name="plane")
    assert {r.n_landmarks for r in rep.rows} == {10, 20}  # 500 ≥ N is dropped
    assert len(rep.rows) == 2 * 6 * 2 and len(lines) == 1 + len(rep.rows)
    for r in rep.rows:
        assert r.procrustes.high < 1e-6 and r.subspace.high < 1e-6, r
        assert r.trustworthiness.median == pytest.approx(rep.full_trustworthiness, abs=1e-9)
        assert r.spearman.median == pytest.approx(rep.full_spearman, abs=1e-9)
    assert rep.n_reference == 90 and rep.reference == "all objects"
    assert rep.recommendation().startswith("10 landmarks by max-variance (projection): Procrustes 0.000")
    json.dumps(rep.to_dict())
    assert "| max-variance | 10 | projection |" in rep.to_markdown()


def test_off_plane_data_ranks_maxmin_below_the_density_following_selections():
    """Most objects in a plane, a few far outliers off it: max–min takes the outliers, whose plane is not the data's."""
    rng = np.random.default_rng(1)
    X = np.vstack([np.hstack([rng.normal(size=(200, 2)) * [4.0, 3.0], 0.3 * rng.normal(size=(200, 2))]),
                   np.hstack([rng.normal(size=(8, 2)), 14.0 + rng.normal(size=(8, 2))])])
    rep = evaluate_landmarks(D=ssd.squareform(ssd.pdist(X)), landmarks=[20], selections=["max-variance", "maxmin"],
                             methods=["projection"], seeds=3)
    by = {r.selection: r for r in rep.rows}
    assert by["max-variance"].procrustes.median < 0.5 * by["maxmin"].procrustes.median
    assert "maxmin would give" in rep.recommendation()


def test_a_large_input_is_measured_against_the_full_map_of_a_sample():
    X = plane(120)
    rep = evaluate_landmarks(X=X, landmarks=[12], selections=["random"], methods=["restricted"], seeds=1,
                             reference_max=50)
    assert rep.n_reference == 50 and "sample" in rep.reference and rep.rows[0].procrustes.median < 1e-6


def test_bad_input_is_refused():
    X = plane(30)
    D = ssd.squareform(ssd.pdist(X))
    with pytest.raises(InputError, match="square"):
        evaluate_landmarks(D=D[:, :20])
    with pytest.raises(InputError, match="not symmetric"):
        evaluate_landmarks(D=D + np.triu(np.ones_like(D)))
    with pytest.raises(InputError, match="no landmark count"):
        evaluate_landmarks(X=X, landmarks=[30, 100])
    with pytest.raises(InputError, match="selections must be among"):
        evaluate_landmarks(X=X, landmarks=[10], selections=["best"])
    with pytest.raises(InputError, match="methods must be among"):
        evaluate_landmarks(X=X, landmarks=[10], methods=["stress"])
    with pytest.raises(InputError, match="NaN"):
        evaluate_landmarks(X=np.where(X > 1, np.nan, X), landmarks=[10])
