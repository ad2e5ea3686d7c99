"""The drift benchmark's parts and a smoke run of ``python -m benchmarks drift`` (docs/math.md §7)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import drift_bench as db


@pytest.fixture(scope="module")
def world():
    return db.MixtureWorld(seed=3)


def test_changes_start_at_their_object_and_not_before(world):
    for change in (db.Change("new_cluster", 500, 4.0), db.Change("rotation", 500, 0.1), db.Change("scale", 500, 1.1),
                   db.Change("in_span", 500, 12.0)):
        plain = world.draw(np.random.default_rng(1), 0, 1000)
        changed = world.draw(np.random.default_rng(1), 0, 1000, change)
        np.testing.assert_allclose(changed[:500], plain[:500], rtol=1e-12, atol=1e-12)
        assert not np.allclose(changed[500:], plain[500:])


def test_in_span_change_stays_in_the_plane_and_off_span_change_leaves_it(world):
    def off_plane_energy(X):
        P = world.basis @ world.basis.T
        R = X - X @ P
        return float((R**2).sum(1).mean())

    base = off_plane_energy(world.draw(np.random.default_rng(2), 0, 20_000))
    assert base == pytest.approx(8 * 0.3**2, rel=0.05)  # isotropic noise in the 8 other directions
    inspan = off_plane_energy(world.draw(np.random.default_rng(2), 0, 20_000, db.Change("in_span", 0, 12.0)))
    offspan = off_plane_energy(world.draw(np.random.default_rng(2), 0, 20_000, db.Change("new_cluster", 0, 4.0)))
    assert inspan == pytest.approx(base, rel=0.05)
    assert offspan > base + 0.2 * 4.0**2 * 0.9


def test_residual_stream_and_detectors_see_a_step(world):
    s = db.BenchSettings(baseline=20_000, replicates=1)
    est, L = db.fit_map(world, 60, "euclidean", 0)
    stream = db.residual_stream("step", world, est, L, "euclidean", 120_000, db.Change("new_cluster", 60_000, 4.0), 5)
    assert stream.u.shape == (120_000,) and stream.y.shape == (12_000, 2) and stream.change_at == 60_000
    ours = db.cusum_runner(1e8)(stream, s)
    assert ours.size and 60_000 <= ours[0] < 61_000  # a fifth of the objects far off the map: within a few groups
    rule = db.rule_runner()(stream, s)
    assert rule.size and rule[0] > ours[0]  # today's rule needs min_objects above its level


def test_poisson_interval_matches_the_exact_bounds():
    lo, hi = db.poisson_interval(0, 1e6)
    assert lo == 0 and hi * 1e6 == pytest.approx(3.689, rel=1e-3)  # the classic 3.69 events for zero seen
    lo, hi = db.poisson_interval(10, 1.0)
    assert lo == pytest.approx(4.795, rel=1e-3) and hi == pytest.approx(18.39, rel=1e-3)


def test_selection_ranking_ties_equal_values_and_orders_by_mean_rank():
    def row(scen, sel, e, f, a):
        return {"scenario": scen, "selection": sel, "energy_after": e, "fidelity": f, "alignment_rms": a}

    report = {"selection": [row("x", "residual", 1.0, 0.010, 0.0), row("x", "random", 1.0, 0.002, 0.3),
                            row("x", "maxmin", 2.0, 0.005, 0.1)]}
    ranks = dict(db.selection_ranking(report))
    assert ranks["residual"] == pytest.approx((1.5 + 3 + 1) / 3)
    assert ranks["random"] == pytest.approx((1.5 + 1 + 3) / 3)
    assert ranks["maxmin"] == pytest.approx((3 + 2 + 2) / 3)


@pytest.mark.slow
def test_evaluate_drift_smoke(tmp_path, capsys):
    pytest.importorskip("river")
    from benchmarks.evaluate import main

    out_json, png = tmp_path / "drift.json", tmp_path / "bench.png"
    assert main(["--drift", "--drift-quick", "--json", str(out_json), "--drift-figure", str(png)]) == 0
    text = capsys.readouterr().out
    assert "| cusum (ours) | ERT 1e+08, u |" in text and "| rule (today) |" in text and "Mean rank" in text
    report = json.loads(out_json.read_text())
    names = {r["detector"] for r in report["detectors"]}
    assert {"cusum (ours)", "rule (today)", "ADWIN", "KSWIN", "PageHinkley (mode up)", "MMD on coordinates"} <= names
    for r in report["detectors"]:
        assert r["stationary_objects"] == 3 * (db.QUICK["stationary_objects"] - 20_000)
        assert set(r["delays"]) == set(db.change_scenarios(db.BenchSettings()))
    assert {r["selection"] for r in report["selection"]} == {"adaptive", "residual", "maxmin", "random", "kmeans++"}
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_evaluate_drift_refuses_sizes_that_cannot_make_a_claim(capsys):
    from benchmarks.evaluate import main

    assert main(["--drift", "--drift-objects", "1000"]) == 2
    assert "need more than" in capsys.readouterr().err
