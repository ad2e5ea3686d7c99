"""The drift monitor's reservoir and its statistics cadence."""

from __future__ import annotations

import numpy as np

from streamembed.core.monitor.drift import RefitTrigger
from streamembed.config.schema import DriftConfig
from streamembed.monitors.drift import DriftMonitor
from streamembed.monitors.reservoir import RecentRows

from tests.stream.helpers import fitted, landmark_points, objects


def test_the_feature_ring_keeps_the_most_recent_rows_oldest_first():
    r = RecentRows(5)  # the monitor's feature vectors (``DriftMonitor._features``)
    r.add(np.array(["a", "b", "c"], dtype=object), np.arange(3.0)[:, None])
    r.add(np.array(["d", "e", "f", "g"], dtype=object), np.arange(3.0, 7.0)[:, None])
    kept = r.contents()
    ids, rows = kept.ids, kept.rows
    assert rows is not None
    assert ids.tolist() == ["c", "d", "e", "f", "g"] and rows[:, 0].tolist() == [2, 3, 4, 5, 6]
    r.add(np.array([f"x{i}" for i in range(9)], dtype=object), np.arange(9.0)[:, None])  # more than fits
    assert r.contents().ids.tolist() == ["x4", "x5", "x6", "x7", "x8"] and len(r) == 5


def test_feature_candidates_and_statistics_cadence():
    est = fitted(features=True)
    clock = iter(range(1000))
    mon = DriftMonitor(est, DriftConfig(reservoir_objects=50, stats_every_objects=300, stats_every_seconds=1e9),
                       RefitTrigger(), clock=lambda: float(next(clock)))
    Z = objects(100, seed=3)
    A = est.dissimilarities_to_landmarks(Z)
    res = est.place(A, k0_rows=16)
    mon.observe(A, res, features=Z)
    first = mon.last_stats
    for _ in range(2):
        mon.observe(A, res, features=Z)
        assert mon.last_stats is first  # 100, then 200 objects since: not recomputed
    mon.observe(A, res, features=Z)
    assert mon.last_stats is not first and mon.last_stats.n_objects == 400
    assert mon.last_stats.n_sampled == 4 * 16  # the k0 rows the embedding computed, not a second sample
    cand = mon.candidates()
    assert cand is not None and len(cand.ids) == 50 and cand.features.shape == (50, landmark_points().shape[1])
