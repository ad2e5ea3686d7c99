"""Input mix-ups are loud end to end (docs/math.md §4.5): ``streamembed embed`` exits 1 with the reason in one line,
the daemon logs a WARNING, raises streamembed_input_consistency_alarm and answers /readyz 503 with the reason.

Before: rows in ascending landmark id instead of model order, or computed for another model of the same width,
gave "1,000 embedded, 0 dead letters", exit 0, and a daemon that stayed ready.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from streamembed import LandmarkMDS

from ..realdata import setting
from ..stream.helpers import input_table, write_parquet
from .cli import cli, log_records
from .daemon import Daemon, directory_env, wait_for

pytestmark = pytest.mark.e2e

DATASETS = ["digits", pytest.param("docstrings", marks=pytest.mark.slow)]


def _model(tmp_path: Path, name: str) -> tuple[Path, object]:
    s = setting(name, 100, "random")
    path = tmp_path / f"{name}.npz"
    LandmarkMDS.from_model(s.model).save(path)
    return path, s


def _file(path: Path, rows: np.ndarray, m: int, seed: int) -> Path:
    A = rows[np.random.default_rng(seed).integers(0, rows.shape[0], m)]
    return write_parquet(path, input_table([f"{path.stem}-{i}" for i in range(m)], A.astype(np.float32)))


@pytest.mark.parametrize("name", DATASETS)
def test_embed_exits_1_with_the_reason_on_every_mixup_and_0_in_model_order(tmp_path: Path, name: str) -> None:
    model, s = _model(tmp_path, name)
    ok = cli("embed", _file(tmp_path / "ok.parquet", s.rows["model order"], 2000, 0), "-m", model,
             "-o", tmp_path / "ok-out.parquet", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "consistency" not in ok.stderr
    for k, case in enumerate(("ascending ids", "reversed", "other landmarks")):
        src = _file(tmp_path / f"mix{k}.parquet", s.rows[case], 2000, k + 1)
        r = cli("embed", src, "-m", model, "-o", tmp_path / f"mix{k}-out.parquet", cwd=tmp_path)
        assert r.returncode == 1, (case, r.stderr)
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("input consistency alarm after") and "another landmark order" in last, last
        assert "2,000 embedded" in r.stderr and (tmp_path / f"mix{k}-out.parquet").exists()  # written all the same
    skipped = cli("embed", src, "-m", model, "-o", tmp_path / "skip.parquet", "--no-order-check", cwd=tmp_path)
    assert skipped.returncode == 0, skipped.stderr


@pytest.mark.parametrize("name", DATASETS)
def test_the_daemon_warns_sets_the_metric_and_turns_unready_on_a_mixed_up_file(tmp_path: Path, name: str) -> None:
    model, s = _model(tmp_path, name)
    indir = tmp_path / "in"
    indir.mkdir()
    _file(indir / "a-ok.parquet", s.rows["model order"], 1000, 0)
    d = Daemon(tmp_path, directory_env(indir, tmp_path / "out", model, STREAMEMBED_DRIFT__ENABLED="false"))
    try:
        d.wait_port()
        wait_for(lambda: d.metric("streamembed_records_embedded_total", 'method="projection"') >= 1000, 60,
                 "the rows in model order", d)
        assert 0.8 < d.metric("streamembed_input_consistency") < 1.6
        assert d.get("/readyz")[0] == 200 and d.metric("streamembed_input_consistency_alarm") == 0
        _file(indir / "b-shuffled.parquet", s.rows["shuffled"], 2000, 1)
        wait_for(lambda: d.metric("streamembed_input_consistency_alarm") == 1, 60, "the consistency alarm", d)
        assert d.metric("streamembed_records_embedded_total", 'method="projection"') <= 3000
        code, body = d.get("/readyz")
        doc = json.loads(body)
        assert code == 503 and "another landmark order" in doc["problems"]["input_consistency"]
        assert d.metric("streamembed_input_consistency") < 0.5
        assert d.metric("streamembed_input_consistency_alarms_total") == 1
        warned = [r for r in log_records(d.log()) if r.get("level") == "WARNING"
                  and "another landmark order" in r.get("msg", "")]
        assert len(warned) == 1 and math.isfinite(warned[0]["consistency"])
        assert d.terminate() == 0
    finally:
        d.close()
