"""The live map's data (``ops.map_view``): a bounded sample of the newest placements, the map, the switches."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamembed.core.monitor.explained import explained

from streamembed.ops.endpoints import OpsServer
from streamembed.ops.health import HealthState
from streamembed.ops.map_page import MapPage
from streamembed.ops.map_view import producers_notice, MAX_HISTORY, MAX_ID_CHARS, MapView
from streamembed.ops.metrics import Metrics
from streamembed.config.schema import DriftConfig
from streamembed.stream.embedder import BatchEmbedder, Processed
from streamembed.stream.registry import ModelRegistry
from streamembed.monitors.drift import DriftMonitor, build_trigger
from streamembed.stream.output import y_matrix

from ..stream.helpers import dissimilarities, fitted, input_table, objects


def _batches(sizes: list[int], *, prefix: str = "o", id_len: int = 0, seed: int = 1):
    """Input tables of the given sizes with ids prefix<i> (padded with 'x' to ``id_len``), consecutive."""
    n = sum(sizes)
    A = dissimilarities(objects(n, seed=seed))
    ids = [f"{prefix}{i}".ljust(id_len, "x") for i in range(n)]
    out, at = [], 0
    for m in sizes:
        out.append((ids[at:at + m], input_table(ids[at:at + m], A[at:at + m])))
        at += m
    return out


def _feed(view: MapView, embedder: BatchEmbedder, sizes: list[int], **kw) -> list[Processed]:
    done = []
    for _, table in _batches(sizes, **kw):
        d = embedder.process(table)
        view.observe(d)
        done.append(d)
    return done


def _output(done: list[Processed]) -> pa.Table:
    return pa.Table.from_batches([d.output for d in done if d.output is not None])


def test_the_sample_is_the_newest_rows_in_order_with_their_coordinates_and_residuals() -> None:
    model = fitted()
    emb = BatchEmbedder(model, k0_rows=3)
    view = MapView(ModelRegistry(model), points=300)
    rng = np.random.default_rng(0)
    done = _feed(view, emb, [int(m) for m in rng.integers(1, 120, size=40)])
    out = _output(done)
    doc = view.snapshot()
    s = doc["sample"]
    assert s["count"] == 300 == s["capacity"]
    newest = out.slice(out.num_rows - 300)
    assert s["id"] == newest.column("id").to_pylist()
    Y = y_matrix(newest)
    np.testing.assert_allclose(s["x"], Y[:, 0], rtol=5e-5, atol=1e-12)  # five significant digits (map_view.DIGITS)
    np.testing.assert_allclose(s["y"], Y[:, 1], rtol=5e-5, atol=1e-12)
    np.testing.assert_allclose(s["unexplained"], newest.column("unexplained").to_numpy(), rtol=5e-5, atol=1e-12)
    assert max(len(json.dumps(v)) for v in s["x"] + s["y"]) <= len("-1.2346e-05")  # short decimals, not 17 digits
    k0 = newest.column("k0").to_numpy(zero_copy_only=False)
    assert [v is None for v in s["k0"]] == np.isnan(k0).tolist()
    assert doc["objects_seen"] == out.num_rows
    # the landmarks, in the output frame
    np.testing.assert_allclose(doc["landmarks"]["x"], model.embedding[:, 0], rtol=5e-5)
    assert doc["landmarks"]["id"] == [str(x) for x in model.landmark_ids]
    assert doc["model"] == {"version": 1, "lineage": model.lineage, "dims": 2, "landmarks": model.n_landmarks,
                            "radius_coverage": None,  # fitted on its landmarks alone: no radius
                            "explained": explained(model).line()}
    assert s["radius"] == [None] * 300


def test_the_sample_carries_each_placements_radius_and_the_stated_coverage() -> None:
    """A model with a radius calibration: /map's hover shows each point's radius and the coverage it states."""
    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS

    P = objects(400, seed=3)
    est = LandmarkMDS(n_landmarks=40).fit(cdist(P, P))
    emb = BatchEmbedder(est.model_)
    view = MapView(ModelRegistry(est.model_), points=50)
    A = cdist(objects(60, seed=4), P[est.landmark_indices_]).astype(np.float32)
    done = emb.process(input_table([f"q{i}" for i in range(60)], A))
    view.observe(done)
    doc = view.snapshot()
    assert doc["model"]["radius_coverage"] == 0.9
    expected = done.output.column("radius").to_numpy()[-50:]
    np.testing.assert_allclose(doc["sample"]["radius"], expected, rtol=5e-5)
    assert all(r > 0 for r in doc["sample"]["radius"])


def test_the_k0_sample_holds_the_newest_rows_whose_k0_is_exact() -> None:
    model = fitted()
    view = MapView(ModelRegistry(model), points=50)
    done = _feed(view, BatchEmbedder(model, k0_rows=4), [100] * 30)
    out = _output(done)
    with_k0 = out.filter(pc.is_valid(out.column("k0")))
    s = view.snapshot()["k0_sample"]
    assert s["count"] == 50 and s["id"] == with_k0.column("id").to_pylist()[-50:]
    assert all(v is not None for v in s["k0"])
    # every row has a k0: the sample is the k0 sample, sent once
    view_all = MapView(ModelRegistry(model), points=50)
    _feed(view_all, BatchEmbedder(model, k0_rows="all"), [30] * 5)
    assert view_all.snapshot()["k0_sample"] is None


def test_observe_costs_the_same_for_a_small_and_a_huge_batch() -> None:
    # O(points) per batch, not O(batch): a zero-copy tail slice and the k0 rows the embedding reports
    model = fitted()
    emb = BatchEmbedder(model, k0_rows=32)
    (_, small_t), = _batches([100])
    (_, huge_t), = _batches([200_000], seed=2)
    small, huge = emb.process(small_t), emb.process(huge_t)
    view = MapView(ModelRegistry(model), points=2000)

    def cost(done: Processed) -> float:
        times = []
        for _ in range(60):
            t0 = time.perf_counter()
            view.observe(done)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    cost(small), cost(huge)  # warm up
    ratio = cost(huge) / cost(small)
    # a cost that grew with the batch would be ~2000 (200,000 / 100 rows)
    assert ratio < 20, f"observing a 200,000-row batch costs {ratio:.1f}x a 100-row one"
    assert view.snapshot()["sample"]["count"] == 2000


def test_the_document_stays_bounded_whatever_the_stream_brings() -> None:
    model = fitted()
    emb = BatchEmbedder(model, k0_rows=8)
    points = 200
    view = MapView(ModelRegistry(model), points=points, cache_seconds=0)
    rng = np.random.default_rng(3)
    tables = _batches([int(m) for m in rng.integers(1, 400, size=60)], id_len=5000)  # ids far too long to show
    lengths = []
    for k, (_, table) in enumerate(tables):
        view.observe(emb.process(table))
        if k >= 30:  # both samples are full by now (8 k0 rows per batch)
            lengths.append(len(view.json_bytes()))
    doc = view.snapshot()
    assert doc["sample"]["count"] == points and doc["k0_sample"]["count"] == points
    assert max(len(i) for i in doc["sample"]["id"]) == MAX_ID_CHARS + 1  # cut, with an ellipsis
    # a row is its id plus a dozen short numbers; two samples, the landmarks and a fixed head
    per_row = MAX_ID_CHARS * 6 + 250  # \u2026-escaped ellipsis and quotes included; numbers <= 13 chars
    bound = 2 * points * per_row + model.n_landmarks * 300 + 4000
    assert max(lengths) <= bound
    assert max(lengths) < 1.05 * min(lengths)  # once full it does not grow with the stream
    # the ring keeps slices of at most `points` batches, whatever their number
    assert len(view._recent.batches()) <= points and sum(b.num_rows for b in view._recent.batches()) < points + 400


def test_a_model_switch_is_recorded_with_the_previous_landmarks() -> None:
    model = fitted()
    registry = ModelRegistry(model)
    clock = [1000.0]
    view = MapView(registry, points=100, clock=lambda: clock[0])
    # rows that state no version are read as the one they follow (docs/objects.md): here the new one
    emb = BatchEmbedder(model, registry=registry, unversioned_rows=2)
    _feed(view, emb, [20])
    assert view.snapshot()["switches"] == [] and view.snapshot()["previous"] is None
    moved = model.with_version(2)
    registry.install(moved)
    installed = registry.installed_at(2)
    assert installed is not None and abs(installed - time.time()) < 60
    clock[0] = 1010.0  # the next batch (or the page) sees the switch later: an idle stream, 67 s in issue 35
    _feed(view, emb, [20], prefix="n")
    doc = view.snapshot()
    # the banner says when the map changed, not when the page first saw it
    assert doc["switches"] == [{"time": round(installed, 3), "from": 1, "to": 2, "producers": producers_notice(2)}]
    # issue 34: the banner tells producers what to do after a refit
    assert "landmark_version = 2" in doc["switches"][0]["producers"]
    assert doc["model"]["version"] == 2 and doc["previous"]["version"] == 1
    assert doc["previous"]["id"] == doc["landmarks"]["id"]
    # the sample keeps the rows placed before the switch, each with its version
    assert doc["sample"]["model_version"] == [1] * 20 + [2] * 20


def test_drift_statistics_and_the_refit_history_tail(tmp_path: Path) -> None:
    model = fitted()
    registry = ModelRegistry(model)
    settings = DriftConfig(stats_every_objects=10, window_objects=1000)
    monitor = DriftMonitor(model, settings, build_trigger(settings))
    history = tmp_path / "model-history.jsonl"
    big = [f"landmark-{i}" for i in range(20_000)]
    with open(history, "w") as fh:
        for v in range(2, 60):
            fh.write(json.dumps({"time": f"2024-01-01T00:{v:02d}:00Z", "status": "installed", "trigger": "auto",
                                 "model_version": v, "alignment_rms": 0.01 * v, "new_landmarks": big,
                                 "statistics": {"x": 1.0}}) + "\n")
        fh.write("{not json\n")
        fh.write(json.dumps({"time": "2024-01-01T01:00:00Z", "status": "failed", "error": "e" * 5000}) + "\n")
    view = MapView(registry, monitor=monitor, history_path=history, points=100)
    _feed(view, BatchEmbedder(model, registry=registry, monitor=monitor, k0_rows=5), [50] * 4)
    doc = view.snapshot()
    drift = doc["drift"]
    assert drift["detector"] == "cusum+plane+coverage" and drift["statistic"] == "CUSUM of the unexplained energy"
    assert [m["kind"] for m in drift["detectors"]] == ["cusum", "plane", "coverage"]
    assert drift["detectors"][1]["alarm"] == "the map's plane turned" and drift["armed"] is False
    assert drift["expected_run_objects"] == settings.expected_run_objects and drift["statistics"]["n_objects"] == 200
    rule = DriftConfig(stats_every_objects=10, window_objects=1000, detector="rule")
    ruled = MapView(registry, monitor=DriftMonitor(model, rule, build_trigger(rule)), points=100).snapshot()["drift"]
    assert ruled["detector"] == "rule" and ruled["statistic"] == rule.statistic
    assert ruled["expected_run_objects"] is None
    refits = doc["refits"]
    assert 1 <= len(refits) <= MAX_HISTORY
    assert refits[-1]["status"] == "failed" and len(refits[-1]["error"]) == 500
    assert refits[-2]["model_version"] == 59 and refits[-2]["landmarks"] == len(big)
    assert all("new_landmarks" not in r and "statistics" not in r for r in refits)
    json.dumps(doc, allow_nan=False)  # JSON proper: no NaN anywhere


def test_the_map_endpoints_of_the_ops_server() -> None:
    model = fitted()
    health = HealthState()
    plain = OpsServer(Metrics().registry, health, port=0).start()
    try:  # without the page the paths do not exist
        for path in ("/map", "/map.json"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"http://127.0.0.1:{plain.port}{path}", timeout=5)
            assert e.value.code == 404
    finally:
        plain.stop()
    page = MapPage.load()
    server = OpsServer(Metrics().registry, health, port=0, map_page=page).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(base + "/map", timeout=5) as r:
            html = r.read()
            assert r.headers["Content-Type"] == "text/html; charset=utf-8" and html == page.html
            csp = r.headers["Content-Security-Policy"]
            assert "script-src 'sha256-" in csp and "connect-src 'self'" in csp and "default-src 'none'" in csp
            assert "unsafe-inline" not in csp
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/map.json", timeout=5)
        assert e.value.code == 503  # before the daemon has assembled its model
        view = MapView(ModelRegistry(model), points=10)
        server.map_view = view
        _feed(view, BatchEmbedder(model), [25])
        for path in ("/map.json", "/map.json?file=/etc/passwd", "/map.json?points=1000000"):
            with urllib.request.urlopen(base + path, timeout=5) as r:  # query strings are ignored
                doc = json.load(r)
                assert doc["sample"]["count"] == 10 and r.headers["X-Content-Type-Options"] == "nosniff"
        for path in ("/map/../etc/passwd", "/static/map.html", "/map.html", "/map.json/x"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path, timeout=5)
            assert e.value.code == 404, path
    finally:
        server.stop()
