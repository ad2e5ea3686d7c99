"""A model's fit baseline (docs/math.md §7.8): built from its non-landmark fit objects, stored in the model file,
arming the off-map CUSUM from the first record; a model without one loads and monitors as before."""

from __future__ import annotations

import json
import zipfile
import io

import numpy as np
import pytest
import scipy.spatial.distance as ssd

from streamembed import LandmarkMDS
from streamembed.core.monitor.baseline import FitBaseline
from streamembed.core.monitor.detector import CusumDetector
from streamembed.core.monitor.trigger import SequentialTrigger
from streamembed.model_io import model_from_bytes, model_to_bytes


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 6)) * [3, 2, 1, 0.5, 0.5, 0.5]
    return LandmarkMDS(n_components=2, n_landmarks=80).fit(ssd.squareform(ssd.pdist(X))).model_, X


def test_the_fit_baseline_holds_the_other_fit_objects_values(fitted):
    model, _ = fitted
    b = model.fit_baseline
    assert b is not None and b.n_objects == 820 and b.axes.shape == (820, 6) and b.axes.dtype == np.float32
    assert (b.unexplained > -1e-9).all() and b.coverage.size == 40 and b.coverage_objects == 150
    assert 0.6 < b.explained_share < 1.0 and 0.0 < b.median_unexplained_share < 0.4
    assert b.info["mean_square_low"] <= b.info["mean_square_high"]


def test_it_survives_the_model_file_and_a_file_without_it_loads(fitted):
    model, _ = fitted
    back = model_from_bytes(model_to_bytes(model)).fit_baseline
    assert back is not None and np.array_equal(back.unexplained, model.fit_baseline.unexplained)
    assert np.array_equal(back.axes, model.fit_baseline.axes) and back.info == model.fit_baseline.info
    bare = model_from_bytes(model_to_bytes(model.with_fit_baseline(None)))
    assert bare.fit_baseline is None
    with zipfile.ZipFile(io.BytesIO(model_to_bytes(model.with_fit_baseline(None)))) as zf:
        meta = json.loads(str(np.load(io.BytesIO(zf.read("meta.npy")), allow_pickle=False)))
    assert meta["drift_baseline"] is None


def test_a_baseline_of_the_wrong_version_is_refused():
    with pytest.raises(ValueError, match="version"):
        FitBaseline.from_state({}, {"version": 99}, 2)


def _trigger() -> SequentialTrigger:
    return SequentialTrigger(CusumDetector(1e8), baseline_objects=20_000, cooldown_seconds=0)


def test_the_cusum_armed_from_the_fit_decides_from_the_first_batch(fitted):
    model, X = fitted
    t = _trigger()
    assert t.arm_from_fit(model.fit_baseline) == "820 fit objects in groups of 27" and t.armed
    rng = np.random.default_rng(1)
    u = model.fit_baseline.unexplained
    quiet = [t.observe(i, None, 1000, rng.choice(u, 1000)) for i in range(15)]
    assert not any(d.fire for d in quiet) and np.isfinite(t.threshold)
    risen = [t.observe(15 + i, None, 1000, 3.0 * rng.choice(u, 1000)) for i in range(3)]
    assert any(d.fire for d in risen)


def test_the_cusum_stream_baseline_holding_a_change_fires():
    rng = np.random.default_rng(2)
    t = _trigger()
    decisions = [t.observe(i, None, 1000, rng.chisquare(3, 1000) * (1.0 if i < 10 else 1.5)) for i in range(20)]
    fired = [d for d in decisions if d.fire]
    assert fired and "the baseline window itself changed" in fired[0].reason
