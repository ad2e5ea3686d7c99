"""The eigengap at the map's cut-off: stored, persisted, shown, and a WARNING when the map is not unique.

When λ_d = λ_{d+1} the kept axes are any d of a (d+1)-dimensional eigenspace:
round-off picks them, so the map and every placement depend on the order of
the landmarks (docs/math.md §4.6).
"""

from __future__ import annotations

import argparse
import json
import logging

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.commands.model import cmd_model_info
from streamembed.core.model import EIGENGAP_RTOL
from streamembed.model_io import _checksum, load_model

from ..conftest import euclidean


def _polygon(k: int = 12) -> np.ndarray:
    """k points on a unit circle (λ_1 = λ_2 exactly) and one off-centre point on a third axis."""
    t = 2 * np.pi * np.arange(k) / k
    P = np.column_stack([np.cos(t), np.sin(t), np.zeros(k)])
    return np.vstack([P, [[0.0, 0.0, 0.7]]])


def test_a_tied_cut_off_warns_and_the_map_depends_on_landmark_order(caplog):
    P = _polygon()
    with caplog.at_level(logging.WARNING, logger="streamembed"):
        est = LandmarkMDS(n_components=1).fit(euclidean(P, P))
    assert est.eigengap_ is not None and est.eigengap_ <= EIGENGAP_RTOL and est.map_unique_ is False
    assert any("not unique" in r.getMessage() for r in caplog.records)
    # why it matters: another order of the same landmarks gives another map for the same arrival
    z = np.array([[0.9, 0.3, 0.1]])
    radius = np.sqrt(np.mean(est.embedding_ ** 2))
    placed = []
    for seed in range(5):
        order = np.random.default_rng(seed).permutation(P.shape[0])
        e = LandmarkMDS(n_components=1).fit(euclidean(P[order], P[order]))
        placed.append(abs(float(e.transform(euclidean(z, P[order]))[0, 0])))  # |y|: the sign is a convention
    assert np.ptp(placed) > 0.05 * radius


def test_a_clear_gap_is_silent(caplog):
    rng = np.random.default_rng(0)
    P = rng.normal(size=(30, 3)) * np.array([3.0, 2.0, 0.5])
    with caplog.at_level(logging.WARNING, logger="streamembed"):
        est = LandmarkMDS(n_components=2).fit(euclidean(P, P))
    lam = est.spectrum_.eigenvalues
    assert est.eigengap_ == pytest.approx((lam[1] - lam[2]) / lam[1])
    assert est.map_unique_ is True
    assert not [r for r in caplog.records if "not unique" in r.getMessage()]
    # d = every positive eigenvalue: the next one is 0 (round-off), the gap is 1
    full = LandmarkMDS(n_components=3).fit(euclidean(P, P))
    assert full.eigengap_ == pytest.approx(1.0, abs=1e-9)


def test_the_eigengap_is_persisted_and_older_files_still_load(tmp_path):
    P = _polygon()
    est = LandmarkMDS(n_components=1).fit(euclidean(P, P))
    path = tmp_path / "m.npz"
    est.save(path)
    assert load_model(path).eigengap == est.eigengap_
    # a file written before the eigengap existed: no "eigengap" in its metadata
    with np.load(path, allow_pickle=False) as npz:
        files = {k: npz[k] for k in npz.files}
    meta = json.loads(str(files.pop("meta")))
    del meta["eigengap"]
    meta["checksum_sha256"] = _checksum(files, meta)
    old = tmp_path / "old.npz"
    np.savez(old, meta=np.array(json.dumps(meta, sort_keys=True)), **files)
    back = load_model(old)
    assert back.eigengap == pytest.approx(est.eigengap_, abs=1e-12)  # recomputed from the kept eigenvalues


def test_model_info_shows_the_eigengap_and_warns(tmp_path, capsys):
    P = _polygon()
    path = tmp_path / "m.npz"
    LandmarkMDS(n_components=1).fit(euclidean(P, P)).save(path)
    assert cmd_model_info(argparse.Namespace(model=path, json=False, all=False)) == 0
    out = capsys.readouterr().out
    assert "eigengap at the cut-off" in out and "WARNING" in out and "not unique" in out
    assert cmd_model_info(argparse.Namespace(model=path, json=True, all=False)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["eigengap"] <= EIGENGAP_RTOL and doc["map_unique"] is False
