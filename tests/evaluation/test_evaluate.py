"""The evaluation table: RR and block RR beat projection off the landmarks' span, tie inside it.

Expected from docs/math.md §3 and ``evaluation.references``: for an object off the
span, the refit of landmarks + that object lies on the RR side of projection,
so RR is closest to it; block RR is closest to the refit of landmarks + its
block; both lower the stress of the distances to the landmarks. In the span
every method recovers the object exactly (docs/math.md §6).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamembed.evaluation import evaluate
from streamembed.evaluation.datasets import novel_cluster, plane
from streamembed.evaluation.evaluate import EvaluationSettings, evaluate_dataset, format_report

SMALL = EvaluationSettings(n_landmarks=20, n_heldout=48, block_size=4, knn=5, seed=0)
BLOCK = "block RR (k=4)"
#: rows of the engine's other options (README "Methods")
OPTION_ROWS = ("stress", "l1", "similarity (linear kernel)", "isomap (k=10)", "cailliez", "smacof map + stress",
               "sammon map + stress")


@pytest.mark.parametrize("seed", [0, 1])
def test_off_span_objects_rr_and_block_rr_beat_projection(seed: int) -> None:
    rep = evaluate_dataset(novel_cluster(n=300, seed=seed), SMALL)
    assert rep.mean_k0 > 0 and rep.kernel_distance_bound > 0  # truly off the span
    proj, rr, blk = rep.row("projection"), rep.row("restricted"), rep.row(BLOCK)
    assert rr.stress_normalised < proj.stress_normalised
    assert blk.stress_normalised < proj.stress_normalised
    assert rr.fidelity_object < 0.5 * proj.fidelity_object
    assert blk.fidelity_block < proj.fidelity_block
    assert rr.mutual_stress_normalised < proj.mutual_stress_normalised


def test_dropped_dimension_energy_also_favours_rr() -> None:
    # plane + off-plane noise that the landmarks share: k0 = 0, but the 2-D map drops energy.
    rep = evaluate_dataset(plane(n=200, off_span=1.0, seed=0), SMALL)
    assert abs(rep.mean_k0) < 1e-8 and rep.mean_relative_unexplained > 0.1
    proj, rr, blk = rep.row("projection"), rep.row("restricted"), rep.row(BLOCK)
    assert rr.stress_normalised < proj.stress_normalised and blk.stress_normalised < proj.stress_normalised
    assert rr.fidelity_object < proj.fidelity_object and blk.fidelity_block < proj.fidelity_block


def test_in_span_objects_every_method_ties_exactly() -> None:
    rep = evaluate_dataset(plane(n=200, seed=0), SMALL)
    iso = [row for row in rep.rows if row.method.startswith("isomap")]
    # paths through a k-NN graph over-estimate planar distances: Isomap keeps the neighbourhoods, not the values
    assert len(iso) == 1 and iso[0].trustworthiness > 0.99 and iso[0].stress_normalised > 1e-6
    for row in rep.rows:
        if row in iso:
            continue
        assert row.stress_normalised < 1e-12
        assert max(row.fidelity_object, row.fidelity_block, row.fidelity_all) < 1e-6
        assert row.trustworthiness == pytest.approx(1.0) and row.continuity == pytest.approx(1.0)
    assert abs(rep.mean_relative_unexplained) < 1e-9


def test_report_table_and_json(tmp_path, capsys) -> None:
    out = tmp_path / "eval.json"
    code = evaluate.main(["--datasets", "plane", "--landmarks", "15", "--heldout", "24", "--block", "4", "--knn", "4",
                          "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| projection |" in text and "| restricted |" in text and "| block RR (k=4) |" in text
    data = json.loads(out.read_text())
    assert data[0]["dataset"] == "plane" and len(data[0]["rows"]) == 4 + len(OPTION_ROWS)
    assert all(f"| {name}" in text for name in OPTION_ROWS)


def test_unknown_dataset_is_refused(capsys) -> None:
    assert evaluate.main(["--datasets", "nope"]) == 2
    assert "unknown dataset" in capsys.readouterr().err


def test_format_report_mentions_k0_statistics() -> None:
    rep = evaluate_dataset(novel_cluster(n=200, seed=3),
                           EvaluationSettings(n_landmarks=15, n_heldout=20, block_size=4, knn=4))
    text = format_report(rep)
    assert "mean k0" in text and "kernel-distance error bound" in text
    assert np.isfinite(rep.trace_k0)


def test_option_rows_similarity_equals_projection_and_criteria_lower_their_stress() -> None:
    rep = evaluate_dataset(novel_cluster(n=300, seed=0), SMALL)
    proj, sim = rep.row("projection"), rep.row("similarity (linear kernel)")
    # the same data given as a kernel (Trosset et al. 2025, §3) is the same map
    assert sim.stress_raw == pytest.approx(proj.stress_raw, rel=1e-9)
    assert sim.fidelity_all == pytest.approx(proj.fidelity_all, rel=1e-6, abs=1e-9)
    # the stress criterion minimises exactly the table's raw stress to the landmarks
    assert rep.row("stress").stress_raw < min(proj.stress_raw, rep.row("restricted").stress_raw)
    for name in ("smacof map + stress", "sammon map + stress", "cailliez", "l1"):
        assert np.isfinite(rep.row(name).stress_raw)
