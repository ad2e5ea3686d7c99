"""With the real CLI: `plot drift` on a real drifting run, and `plot map` that says when it samples.

The drifting run is the daemon's built-in generator with a new mixture component appearing off the
landmarks' span (as in ``tests/daemon/test_drift_refit.py``): the calibrated CUSUM alarms, the
daemon refits, and ``drift-history.jsonl`` records every statistics update. The drift PNG is copied to
``tests/artifacts/drift-e2e.png`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from ..stream.helpers import dissimilarities, fitted_model, objects
from .cli import cli, no_traceback, rows_table
from .daemon import Daemon, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

DRIFT_ENV = {
    "STREAMEMBED_GENERATOR__RATE": "40000",
    "STREAMEMBED_GENERATOR__NOISE_STD": "0",  # the landmarks span the mixture exactly until the change
    "STREAMEMBED_GENERATOR__NEW_CLUSTER_AFTER": "20000",
    "STREAMEMBED_GENERATOR__NEW_CLUSTER_OFFSET": "6",
    # a cluster off the landmarks' span but not off the 2-D map's best plane: "adaptive" keeps that map
    # (docs/refits.md); the plot of an installed refit needs the policy that adds the cluster
    "STREAMEMBED_REFIT__SELECTION": "residual",
    "STREAMEMBED_SOURCE__BATCH_ROWS": "1024",
    "STREAMEMBED_DRIFT__WINDOW_OBJECTS": "10000",
    "STREAMEMBED_DRIFT__BASELINE_OBJECTS": "10000",  # the CUSUM calibrates on these (>= 7,680 at these settings)
    "STREAMEMBED_DRIFT__STATS_EVERY_OBJECTS": "1000",
    "STREAMEMBED_DRIFT__HISTORY_SECONDS": "0",
    "STREAMEMBED_DRIFT__COOLDOWN_SECONDS": "60",
    "STREAMEMBED_OUTPUT__ROLL_SECONDS": "1",
    "STREAMEMBED_LOGGING__FORMAT": "json",
}


def _png(path: Path) -> tuple[int, int, dict[str, str]]:
    """(width, height, text metadata) of a PNG, which must be one."""
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as im:
        return im.width, im.height, dict(im.info)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_plot_drift_on_a_real_drifting_run(tmp_path: Path) -> None:
    """The daemon drifts, alarms and refits; `plot drift ROOT` draws every update (not "1 windows"), counts
    one alarm and one installed refit, and the refit mark falls between the last update with the old model
    and the first with the new one (the refit record's time is precise enough to place it)."""
    out = tmp_path / "out"
    d = Daemon(tmp_path, {**DRIFT_ENV, "STREAMEMBED_OUTPUT__ROOT": str(out)})
    history = out / "drift-history.jsonl"
    try:
        d.wait_port()

        def after_refit() -> int:
            if not history.exists():
                return 0
            return sum(1 for r in _lines(history) if r["model_version"] == 2)

        wait_for(lambda: d.dead() or (d.metric("streamembed_model_version") == 2 and after_refit() >= 15), 40,
                 "a refit and 15 drift updates after it", d)
        assert not d.dead(), d.log()
        assert d.terminate() == 0
    finally:
        d.close()
    drift = _lines(history)
    refits = [r for r in _lines(out / "model-history.jsonl") if r["status"] == "installed"]
    assert len(refits) == 1 and refits[0]["trigger"] == "auto"
    assert len(drift) >= 40 and any(r["detector"]["fired"] for r in drift)
    last_v1 = max(r["unix"] for r in drift if r["model_version"] == 1)
    first_v2 = min(r["unix"] for r in drift if r["model_version"] == 2)
    assert last_v1 - 0.001 <= refits[0]["unix"] <= first_v2 + 0.001  # to the millisecond it is written with

    r = cli("plot", "drift", out, "-o", "drift.png", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    png = tmp_path / "drift.png"
    w, h, meta = _png(png)
    assert 800 <= w <= 2500 and 600 <= h <= 3000
    title = meta["Title"]
    m = re.match(r"Drift: ([0-9,]+) updates over ([0-9.]+) s \(([0-9,]+) objects\), (\d+) alarms?, (\d+) refits?$",
                 title)
    assert m, title
    assert int(m.group(1).replace(",", "")) == len(drift)
    assert abs(float(m.group(2)) - (drift[-1]["unix"] - drift[0]["unix"])) < 0.11
    assert int(m.group(3).replace(",", "")) == drift[-1]["objects_seen"]
    assert int(m.group(4)) >= 1 and int(m.group(5)) == 1
    assert title in r.stderr
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(png, ARTIFACTS / "drift-e2e.png")

    # the refit history is not drift statistics: refused, pointing at what to give
    r = cli("plot", "drift", out / "model-history.jsonl", "-o", "wrong.png", cwd=tmp_path)
    assert r.returncode == 2 and "refit history" in r.stderr and "drift-history.jsonl" in r.stderr, r.stderr
    assert no_traceback(r.stderr) and not (tmp_path / "wrong.png").exists()


def test_plot_map_says_when_it_samples_and_labels_ids(tmp_path: Path) -> None:
    """`plot map --max-points 500` of 3,000 embedded objects: the title says "500 of 3,000 objects";
    `--label-ids 5` labels five drawn objects, `--label ID` the named ones (drawn even if not sampled);
    an unknown id is refused with exit 2."""
    fitted_model().save(tmp_path / "model.npz")
    pq.write_table(rows_table([f"o{i}" for i in range(3000)], dissimilarities(objects(3000, seed=6), dtype=np.float64)),
                   tmp_path / "in.parquet")
    r = cli("embed", "in.parquet", "-m", "model.npz", "-o", "emb.parquet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr

    def plot(name: str, *extra: str) -> tuple[int, str, dict[str, str]]:
        r = cli("plot", "map", "-m", "model.npz", "-e", "emb.parquet", "-o", name, *extra, cwd=tmp_path)
        meta = _png(tmp_path / name)[2] if r.returncode == 0 else {}
        return r.returncode, r.stderr, meta

    code, err, meta = plot("all.png")
    assert code == 0, err
    assert meta["Title"].endswith("12 landmarks, 3,000 objects") and " of " not in meta["Title"]
    code, err, meta = plot("sample.png", "--max-points", "500", "--label-ids", "5")
    assert code == 0, err
    assert meta["Title"].endswith("12 landmarks, 500 of 3,000 objects (evenly spaced sample)"), meta["Title"]
    assert meta["Title"] in err
    shown = meta["Description"].removeprefix("labelled: ").split(", ")
    assert len(shown) == 5 and shown[0] == "o0" and shown[-1] == "o2999"
    code, err, meta = plot("named.png", "--max-points", "500", "--label", "o1", "--label", "o2")
    assert code == 0, err
    assert meta["Description"] == "labelled: o1, o2"
    assert "502 of 3,000 objects" in meta["Title"]  # o1 and o2 are not in the evenly spaced sample: added
    code, err, _ = plot("bad.png", "--label", "nope")
    assert code == 2 and "no object with id 'nope'" in err and no_traceback(err), err
    assert not (tmp_path / "bad.png").exists()
