"""Drift monitoring armed from the fit, end to end (docs/drift.md, docs/math.md §7.8).

A model fitted by ``streamembed fit`` from a dissimilarity matrix of English words (Levenshtein, 853 words of
4–7 letters, 200 landmarks: ``benchmarks.drift_pools``' "words") carries a fit baseline, so the daemon's
detectors decide from the first record: a directory stream of 2,000 rows of other short words then 8,000 rows
of words of 9–12 letters — a population the map shows at Procrustes 0.76 of its own full classical MDS, where a
map fitted on it reaches 0.28 — is alarmed long before the 20,000 objects a stream baseline needs. The arming
state is on ``/metrics``, ``/map.json`` and in the log. A model fitted on its landmarks alone has no baseline:
the daemon says after how many objects it arms, and the gauges say it is not armed yet.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.drift_pools import load_pool
from tests.stream.helpers import list_column, write_parquet

from .cli import cli, log_records
from .daemon import Daemon, directory_env, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _files(directory: Path, rows: np.ndarray, prefix: str, per_file: int = 500) -> None:
    for k, start in enumerate(range(0, rows.shape[0], per_file)):
        part = rows[start:start + per_file]
        table = pa.table({"id": pa.array([f"{prefix}-{start + i}" for i in range(part.shape[0])], pa.string()),
                          "dissimilarities": list_column(part, True)})
        write_parquet(directory / f"{prefix}-{k:03d}.parquet", table)


def _fitted(root: Path, D: np.ndarray, landmarks: int | None) -> tuple[Path, np.ndarray, str]:
    np.save(root / "D.npy", D)
    args = ["fit", "--dissimilarities", "D.npy", "--landmarks-out", "lm.txt", "-o", "model.npz"]
    r = cli(*args, *(["--landmarks", str(landmarks)] if landmarks else []), cwd=root)
    assert r.returncode == 0, r.stderr
    return root / "model.npz", np.array([int(x) for x in (root / "lm.txt").read_text().split()]), r.stderr


def test_a_model_fitted_from_a_matrix_alarms_a_switch_at_row_2000(tmp_path: Path) -> None:
    pool = load_pool("words")
    model, lm, fit_log = _fitted(tmp_path, pool.D_fit, 200)
    assert "drift: armed from the fit" in fit_log and "explained:" in fit_log, fit_log
    rng = np.random.default_rng(5)
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    _files(incoming, pool.old_rows[rng.integers(0, pool.old_rows.shape[0], 2000)][:, lm], "a-old")
    _files(incoming, pool.new_rows[rng.integers(0, pool.new_rows.shape[0], 8000)][:, lm], "b-new")
    d = Daemon(tmp_path, directory_env(incoming, out, model, STREAMEMBED_SOURCE__BATCH_ROWS="500"))
    try:
        d.wait_port()
        wait_for(lambda: "drift: alarm" in d.log() or d.dead(), 120, "the drift alarm", d)
        armed = {k: d.metric("streamembed_drift_armed", f'kind="{k}"') for k in ("cusum", "plane")}
        doc = json.loads(d.get("/map.json")[1])
    finally:
        d.terminate()
    records = log_records(d.log())
    msgs = [r["msg"] for r in records]
    assert any(m.startswith("drift monitoring armed from the fit: cusum") for m in msgs), msgs
    (alarm,) = [r for r in records if r["msg"].startswith("drift: alarm")][:1]
    assert 2000 < alarm["objects_seen"] <= 2000 + 5000, alarm  # after the switch, within 5,000 objects
    assert "off the map" in alarm["msg"] or "the map's plane turned" in alarm["msg"], alarm["msg"]
    assert armed == {"cusum": 1.0, "plane": 1.0}, armed
    assert doc["drift"]["armed"] is True and {m["kind"] for m in doc["drift"]["detectors"] if m["armed"]} >= {
        "cusum", "plane"}, doc["drift"]
    assert doc["model"]["explained"].startswith("WARNING: the 2-D map explains"), doc["model"]


def test_a_model_without_a_fit_baseline_says_when_it_arms(tmp_path: Path) -> None:
    pool = load_pool("words")
    model, lm, fit_log = _fitted(tmp_path, pool.D_fit[:150, :150], None)  # every object a landmark
    assert "drift: no fit baseline" in fit_log, fit_log
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    _files(incoming, pool.old_rows[np.random.default_rng(6).integers(0, pool.old_rows.shape[0], 1000)][:, lm],
           "a-old")
    d = Daemon(tmp_path, directory_env(incoming, out, model))
    try:
        d.wait_port()
        wait_for(lambda: d.metric("streamembed_records_embedded_total", 'method="projection"') >= 1000 or d.dead(),
                 60, "the rows embedded", d)
        wait_for(lambda: d.metric("streamembed_drift_arming_objects") > 0 or d.dead(), 30, "the gauges", d)
        armed = d.metric("streamembed_drift_armed", 'kind="cusum"')
        remaining = d.metric("streamembed_drift_arming_objects")
        doc = json.loads(d.get("/map.json")[1])
    finally:
        d.terminate()
    msgs = [r["msg"] for r in log_records(d.log())]
    assert any(m.startswith("drift monitoring arms after 20000 objects (the model has no fit baseline") for m in msgs)
    assert armed == 0.0 and 18_000 <= remaining <= 19_000, (armed, remaining)
    assert doc["drift"]["armed"] is False and doc["drift"]["arming_objects"] == remaining
