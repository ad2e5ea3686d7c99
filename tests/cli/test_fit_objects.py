"""``streamembed fit --objects``, ``model landmarks`` and ``producer rows`` (docs/objects.md), in-process; the daemon's
start-up refusals of a metric it cannot use (exit 2, the known names listed) as subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.cli import main
from streamembed.core.inputs.metrics import resolve_metric
from streamembed.model_io import load_model

from tests.contracts.checks import WORDS
from tests.e2e.cli import cli

METRIC = "levenshtein-normalized"
LINES = [f"{a} {b}" for a in WORDS for b in WORDS[:12]]  # 336 short phrases


def _fit(tmp_path: Path, src: Path, *more: str) -> tuple[int, Path]:
    out = tmp_path / "model.npz"
    code = main(["fit", "--objects", str(src), "--metric", METRIC, "--landmarks", "40", "-o", str(out), *more])
    return code, out


def test_text_lines_fit_a_model_that_keeps_its_landmarks_objects(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "objects.txt"
    src.write_text("\n".join(LINES) + "\n")
    code, out = _fit(tmp_path, src)
    assert code == 0
    err = capsys.readouterr().err
    assert "dissimilarities computed" in err and "of the full matrix" in err
    model = load_model(out)
    assert model.metric == METRIC and model.has_objects and model.n_landmarks == 40
    # the landmarks are the input's lines, named by their line numbers
    assert [LINES[int(i)] for i in model.landmark_ids] == list(model.features)
    np.testing.assert_allclose(model.dissimilarities, resolve_metric(METRIC).pairwise(model.features), atol=1e-12)
    assert model.radius_calibration is not None
    assert main(["model", "landmarks", str(out), "-o", str(tmp_path / "lm.parquet")]) == 0
    table = pq.read_table(tmp_path / "lm.parquet")
    assert table.schema.names == ["id", "object"] and table.column("id").to_pylist() == list(model.landmark_ids)
    assert table.column("object").to_pylist() == list(model.features)
    assert table.schema.metadata[b"streamembed.metric"] == json.dumps(METRIC).encode()


def test_json_lines_and_parquet_with_ids(tmp_path: Path) -> None:
    ids = [f"p{i}" for i in range(len(LINES))]
    lines = (json.dumps({"id": i, "object": o}) + "\n" for i, o in zip(ids, LINES, strict=True))
    (tmp_path / "o.jsonl").write_text("".join(lines))
    code, out = _fit(tmp_path, tmp_path / "o.jsonl")
    assert code == 0 and set(load_model(out).landmark_ids) <= set(ids)
    pq.write_table(pa.table({"id": ids, "object": LINES}), tmp_path / "o.parquet")
    code, out2 = _fit(tmp_path, tmp_path / "o.parquet")
    assert code == 0 and list(load_model(out2).landmark_ids) == list(load_model(out).landmark_ids)


def test_an_object_the_metric_cannot_take_refuses_naming_its_row(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pq.write_table(pa.table({"id": ["a", "b"], "object": pa.array([[1.0], [2.0]])}), tmp_path / "o.parquet")
    code, _ = _fit(tmp_path, tmp_path / "o.parquet")
    assert code == 2 and "row 0 (id 'a')" in capsys.readouterr().err
    assert main(["fit", "--objects", str(tmp_path / "o.parquet"), "--metric", "levenstein", "-o",
                 str(tmp_path / "m.npz")]) == 2
    assert "levenshtein-normalized" in capsys.readouterr().err  # the known names


def test_a_model_from_dissimilarities_has_no_landmark_objects_to_export(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    P = np.random.default_rng(0).normal(size=(30, 2))
    np.save(tmp_path / "D.npy", np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1)))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "-o", str(tmp_path / "m.npz")]) == 0
    assert main(["model", "landmarks", str(tmp_path / "m.npz"), "-o", str(tmp_path / "lm.parquet")]) == 2
    assert "keeps no landmark objects" in capsys.readouterr().err


def test_producer_rows_are_tagged_with_their_landmark_version(tmp_path: Path) -> None:
    src = tmp_path / "objects.txt"
    src.write_text("\n".join(LINES) + "\n")
    assert _fit(tmp_path, src)[0] == 0
    (tmp_path / "new.txt").write_text("stream drift\nlandmark kernel\n")
    assert main(["producer", "rows", str(tmp_path / "new.txt"), "-m", str(tmp_path / "model.npz"), "-o",
                 str(tmp_path / "rows.parquet")]) == 0
    rows = pq.read_table(tmp_path / "rows.parquet")
    assert rows.column("id").to_pylist() == ["obj0", "obj1"] and rows.column("landmark_version").to_pylist() == [1, 1]
    model = load_model(tmp_path / "model.npz")
    np.testing.assert_allclose(np.vstack(rows.column("dissimilarities").to_pylist()),
                               model.dissimilarities_to_landmarks(["stream drift", "landmark kernel"]))


@pytest.mark.e2e
@pytest.mark.parametrize(("name", "said"), [("levenstein", "unknown metric 'levenstein'"),
                                            ("no_such_module:f", "cannot import 'no_such_module'")],
                         ids=["unknown", "unimportable"])
def test_a_metric_the_daemon_cannot_use_refuses_to_start_with_the_known_names(tmp_path: Path, name: str,
                                                                             said: str) -> None:
    P = np.random.default_rng(0).normal(size=(30, 2))
    np.save(tmp_path / "D.npy", np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1)))
    assert cli("fit", "--dissimilarities", tmp_path / "D.npy", "-o", tmp_path / "m.npz", cwd=tmp_path).returncode == 0
    (tmp_path / "in").mkdir()
    r = cli("run", cwd=tmp_path, env={"STREAMEMBED_MODEL__PATH": str(tmp_path / "m.npz"),
                                      "STREAMEMBED_SOURCE__KIND": "directory",
                                      "STREAMEMBED_DIRECTORY__PATH": str(tmp_path / "in"),
                                      "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_METRIC__NAME": name})
    assert r.returncode == 2, r.stderr[-2000:]
    assert said in r.stderr and "levenshtein-normalized" in r.stderr and "dtw" in r.stderr
