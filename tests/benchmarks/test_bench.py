"""`python -m benchmarks bench` runs end to end on tiny sizes; an end-to-end row that cannot run is skipped."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench

TINY = ("n=60;d=2;dtype=float32,float64;mb=0.25;max_m=1000;m=50,200;n_scaling=60;d_scaling=2;refit=80;repeat=1;"
        "block_objects=8;k=4")


@pytest.mark.slow
def test_quick_bench_with_tiny_sizes_writes_tables_and_json(tmp_path, capsys, monkeypatch) -> None:
    from benchmarks import bench_e2e

    def fake_daemon(quick: bool) -> dict:
        assert quick
        return {"objects_per_s": 1000.0, "n": 60, "dtype": "float32", "note": "fake"}

    def no_broker(quick: bool) -> dict:
        raise bench.EndToEndUnavailable("no broker reachable")

    monkeypatch.setattr(bench_e2e, "ROWS", {"fake-file-daemon": fake_daemon, "fake-kafka": no_broker})
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--sizes", TINY, "--json", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "Throughput" in text and "Scaling with batch size m" in text and "Refit" in text
    data = json.loads(out.read_text())
    assert {r["dtype"] for r in data["throughput"]} == {"float32", "float64"}
    row = data["throughput"][0]
    for key in ("projection_over_read", "restricted_over_read", "block_over_read", "block_objects_per_s",
                "read_threads_objects_per_s", "projection_over_ceiling"):
        assert row[key] > 0
    assert [r["k"] for r in data["blocks"]] == [2, 8, 64]
    assert all(r["block_over_single_rr"] > 0 and 0 <= r["certified_share"] <= 1 for r in data["blocks"])
    assert "Block RR against single-object RR" in text
    assert [r["m"] for r in data["scaling_m"]] == [50, 200]
    assert data["refit"][0]["n"] == 80
    e2e = {r["name"]: r for r in data["end_to_end"]}
    assert e2e["fake-file-daemon"]["status"] == "ok" and e2e["fake-file-daemon"]["over_read"] > 0
    assert e2e["fake-kafka"]["status"] == "skipped" and "no broker" in e2e["fake-kafka"]["reason"]


def test_sklearn_kernel_pca_agrees_with_projection() -> None:
    pytest.importorskip("sklearn")
    sizes = bench.parse_sizes(TINY, bench.PRESETS["quick"])
    for dtype in ("float32", "float64"):
        row = bench.bench_throughput(60, 2, dtype, sizes)
        assert row["sklearn_agrees"], row
        if dtype == "float64":
            assert row["sklearn_rel_diff"] < 1e-10


def test_bad_sizes_are_refused(capsys) -> None:
    assert bench.main(["--sizes", "bogus=1", "--json", "-"]) == 2
    assert "bad --sizes entry" in capsys.readouterr().err


def test_the_end_to_end_rows_are_one_fixed_table() -> None:
    from benchmarks import bench_e2e

    assert not hasattr(bench, "register_end_to_end") and not hasattr(bench, "END_TO_END_MODULES")
    assert list(bench_e2e.ROWS)[:2] == ["embed arrow-ipc", "embed parquet (list)"]
    assert all(callable(fn) for fn in bench_e2e.ROWS.values())


def test_end_to_end_file_and_directory_daemon_rows_run_at_tiny_sizes(monkeypatch) -> None:
    from benchmarks import bench_e2e

    monkeypatch.setattr(bench_e2e, "QUICK_OBJECTS", 3000)
    monkeypatch.setattr(bench_e2e, "_FILES", {})
    try:
        for which in ("arrow", "list", "fsb"):
            row = bench_e2e._file_row(True, which)
            assert row["objects_per_s"] > 0 and row["over_in_memory"] > 0
        row = bench_e2e._daemon_directory(True)
        assert row["objects_per_s"] > 0 and row["in_memory_objects_per_s"] > 0
    finally:
        bench_e2e._FILES.clear()
