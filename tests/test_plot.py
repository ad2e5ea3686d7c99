"""Plots produce readable PNG files (skipped without matplotlib)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from streamembed import LandmarkMDS
from streamembed import plots
from streamembed.cli import main as cli_main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    L = rng.normal(size=(30, 3))
    Z = rng.normal(size=(200, 3))
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1))
    A = np.sqrt(((Z[:, None] - L[None]) ** 2).sum(-1))
    est = LandmarkMDS(2).fit(D)
    return est, est.embed(A)


def is_png(path) -> bool:
    return path.exists() and path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 5000


def test_map_coloured_by_relative_residual(tmp_path, fitted) -> None:
    est, res = fitted
    out = plots.plot_map(est, res.y, res.relative_unexplained, tmp_path / "map.png", color_label="relative unexplained")
    assert is_png(out)


def test_map_coloured_by_model_version(tmp_path, fitted) -> None:
    est, res = fitted
    versions = np.repeat([1, 2], [120, 80])
    assert is_png(plots.plot_map(est, res.y, versions, tmp_path / "v.png", color_label="model version"))
    assert is_png(plots.plot_map(est, res.y, None, tmp_path / "plain.png"))


def test_map_draws_the_radius_as_circles_and_names_it_in_the_legend(tmp_path) -> None:
    rng = np.random.default_rng(1)
    P = rng.normal(size=(300, 3))
    D = np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))
    est = LandmarkMDS(2, n_landmarks=40).fit(D)
    res = est.embed(D[:, est.landmark_indices_])
    assert np.isfinite(res.radius).all()
    out = plots.plot_map(est, res.y, None, tmp_path / "r.png", radius=res.radius, max_circles=50)
    assert is_png(out)
    bare = plots.plot_map(est, res.y, None, tmp_path / "b.png", radius=np.full(300, np.nan))  # no radius: no circle
    assert is_png(bare) and bare.read_bytes() != out.read_bytes()
    with pytest.raises(ValueError, match="radius"):
        plots.plot_map(est, res.y, None, tmp_path / "bad.png", radius=res.radius[:5])


def test_map_rejects_wrong_dimension(tmp_path, fitted) -> None:
    est, res = fitted
    with pytest.raises(ValueError):
        plots.plot_map(est, res.y[:, :1], None, tmp_path / "bad.png")


def test_drift_with_timestamps_refits_and_thresholds(tmp_path) -> None:
    records = [
        {"time": f"2026-01-01T00:{i:02d}:00Z", "trace_k0": float(i % 7), "gap_ratio": 0.1 * (i % 7),
         "model_version": 1 + i // 7, "refit": i % 7 == 0 and i > 0}
        for i in range(20)
    ]
    out = plots.plot_drift(records, tmp_path / "drift.png", thresholds={"gap_ratio": 0.5})
    assert is_png(out)


def test_plot_cli_drift_and_map(tmp_path, fitted) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rec = tmp_path / "records.jsonl"
    rec.write_text("\n".join(json.dumps({"time": t, "trace_k0": t * 0.5, "refit": t == 5}) for t in range(10)))
    assert cli_main(["plot", "drift", str(rec), "-o", str(tmp_path / "d.png"), "--threshold", "trace_k0=3"]) == 0
    assert is_png(tmp_path / "d.png")

    est, res = fitted
    model = tmp_path / "model.npz"
    est.save(model)
    table = pa.table({
        "y": pa.FixedSizeListArray.from_arrays(pa.array(res.y.ravel()), 2),
        "beta": res.beta, "unexplained": res.unexplained, "model_version": np.ones(len(res), dtype=np.int64),
    })
    pq.write_table(table, tmp_path / "emb.parquet")
    assert cli_main(["plot", "map", "-m", str(model), "-e", str(tmp_path / "emb.parquet"), "-o",
                     str(tmp_path / "m.png")]) == 0
    assert is_png(tmp_path / "m.png")
    assert cli_main(["plot", "drift", str(tmp_path / "missing.jsonl")]) == 2


# ----------------------------------------------------------------- the daemon's drift history and the benchmark


@pytest.fixture(scope="module")
def history_root(tmp_path_factory):
    from benchmarks.drift_bench import demo_history

    root = tmp_path_factory.mktemp("out")
    demo_history(root, objects=150_000, change_at=70_000)
    return root


def test_history_timeline_keeps_refits_within_the_records_span(history_root) -> None:
    drift, refits = plots.read_drift_history(history_root)
    assert drift and all({"time", "unix", "model_version", "objects_seen", "window",
                          "detector"} <= set(r) for r in drift)
    assert [h["status"] for h in refits] == ["installed"]
    early = {"time": "2001-01-01T00:00:00Z", "status": "failed"}  # before the records: not drawn
    recs, times, marks = plots.history_timeline(list(reversed(drift)), refits + [early])
    assert times == sorted(times) and len(recs) == len(drift)
    assert [(m[1], m[2]) for m in marks] == [("installed", 2)]
    assert any(r["detector"]["fired"] for r in drift)
    assert {r["detector"]["kind"] for r in drift} == {"cusum"}


def test_plot_drift_reads_an_output_root_or_the_two_files(tmp_path, history_root) -> None:
    assert cli_main(["plot", "drift", str(history_root), "-o", str(tmp_path / "a.png")]) == 0
    assert is_png(tmp_path / "a.png")
    assert cli_main(["plot", "drift", str(history_root / "drift-history.jsonl"), "--history",
                     str(history_root / "model-history.jsonl"), "-o", str(tmp_path / "b.png")]) == 0
    assert is_png(tmp_path / "b.png")
    assert cli_main(["plot", "drift", str(tmp_path), "-o", str(tmp_path / "c.png")]) == 2  # no drift-history there


def test_plot_drift_history_draws_a_fallback_rule_panel(tmp_path) -> None:
    recs = []
    for i in range(30):
        kind = "cusum" if i < 15 else "rule"
        recs.append({"time": f"2026-11-22T12:{i:02d}:00.000000Z", "unix": 1795000000.0 + 60 * i, "model_version": 1,
                     "objects_seen": 10_000 * i, "window": {"relative_unexplained_mean": 0.1 + 0.001 * i},
                     "detector": {"kind": kind, "statistic": float(i % 5),
                                  "threshold": 10.0 if kind == "cusum" else 0.2,
                                  "expected_run_objects": 1e8 if kind == "cusum" else None, "fired": False}})
    out = plots.plot_drift_history(recs, [], tmp_path / "fb.png")
    assert is_png(out)
    with pytest.raises(ValueError, match="not a drift history"):
        plots.plot_drift_history([{"time": 1, "x": 2}], [], tmp_path / "no.png")


def test_plot_drift_benchmark_from_a_report(tmp_path) -> None:
    delays = {"new cluster off span": {"median": 300.0, "p90": 500.0, "misses": 0, "replicates": 5, "pre_change": 0},
              "scale x1.1": {"median": None, "p90": None, "misses": 5, "replicates": 5, "pre_change": 0},
              "new cluster in span": {"median": None, "p90": None, "misses": 5, "replicates": 5, "pre_change": 0}}
    rows = [{"detector": name, "setting": "s", "fa_per_million": fa, "fa_ci_low": 0.0, "fa_ci_high": fa + 0.2,
             "delays": delays} for name, fa in (("cusum (ours)", 0.0), ("ADWIN", 1.5))]
    report = {"settings": {"stationary_objects": 1000, "replicates": 5}, "detectors": rows}
    assert is_png(plots.plot_drift_benchmark(report, tmp_path / "bench.png"))
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert cli_main(["plot", "drift-bench", str(path), "-o", str(tmp_path / "cli.png")]) == 0
    assert is_png(tmp_path / "cli.png")


def test_demo_draws_both_plots_from_its_own_synthetic_stream(tmp_path) -> None:
    """The demo needs nothing outside the package (its stream was the benchmarks' ``novel_cluster``)."""
    map_png, drift_png = plots.demo(tmp_path)
    assert is_png(map_png) and is_png(drift_png)
    X, labels = plots.novel_cluster_points(n=50, seed=1)
    assert X.shape == (50, 10) and (labels == 4).sum() == 10 and (labels[:40] < 4).all()


@pytest.mark.slow  # matplotlib, 3-6 s
def test_the_map_states_what_it_explains_of_its_fit_population(tmp_path) -> None:
    """The foot (and the PNG's Comment) say what the map explains of its fit population, with the WARNING of a
    map that explains little (docs/math.md §4.9)."""
    from PIL import Image

    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 30))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    est = LandmarkMDS(2).fit(D)  # 30 equal dimensions: a 2-D map shows little of them
    res = est.embed(D)
    out = plots.plot_map(est, res.y, res.relative_unexplained, tmp_path / "m.png", color_label="relative unexplained")
    comment = Image.open(out).info["Comment"]
    assert comment.startswith("WARNING: the 2-D map explains") and "consider d = " in comment
