"""The command line, in process: fit, embed, config, and refusals with exit code 2."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import cdist

from streamembed.cli import main
from streamembed.stream.output import y_matrix

from ..stream.helpers import dissimilarities, fitted_model, input_table, landmark_points, objects, write_jsonl


def test_help_documents_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for word in ("run", "fit", "embed", "config", "STREAMEMBED_"):
        assert word in out
    for sub in ("run", "fit", "embed", "config"):
        with pytest.raises(SystemExit):
            main([sub, "--help"])
        assert "usage: streamembed " + sub in capsys.readouterr().out


def test_fit_from_npy_dissimilarities_with_maxmin_landmarks(tmp_path: Path) -> None:
    X = np.random.default_rng(0).standard_normal((60, 3))
    np.save(tmp_path / "D.npy", cdist(X, X))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "15", "-o",
                 str(tmp_path / "m.npz")]) == 0
    from streamembed import LandmarkMDS

    est = LandmarkMDS.load(tmp_path / "m.npz")
    assert est.n_landmarks_ == 15 and est.n_components == 2


@pytest.mark.parametrize("selection", ["max-variance", "random", "rpcholesky", "kmeans++", "kmedoids", "maxmin"])
def test_fit_selects_landmarks_by_every_strategy_and_the_same_seed_repeats_them(tmp_path: Path, selection: str) -> None:
    from streamembed.core.refit.landmarks import select_landmarks

    X = np.random.default_rng(2).standard_normal((80, 3))
    D = cdist(X, X)
    np.save(tmp_path / "D.npy", D)
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "12", "--selection", selection,
                 "--seed", "4", "--landmarks-out", str(tmp_path / "ids.txt"), "-o", str(tmp_path / "m.npz")]) == 0
    chosen = [int(x) for x in (tmp_path / "ids.txt").read_text().split()]
    assert sorted(chosen) == select_landmarks(selection, 12, D=D, seed=4).tolist()


def test_fit_from_features_in_csv_and_parquet(tmp_path: Path) -> None:
    X = np.random.default_rng(1).standard_normal((30, 4))
    (tmp_path / "X.csv").write_text("\n".join(",".join(map(str, r)) for r in X))
    assert main(["fit", "--features", str(tmp_path / "X.csv"), "--metric", "cityblock", "--landmarks", "10",
                 "-o", str(tmp_path / "a.npz")]) == 0
    t = pa.table({"id": [f"o{i}" for i in range(30)],
                  "features": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), 4)})
    pq.write_table(t, tmp_path / "X.parquet")
    assert main(["fit", "--features", str(tmp_path / "X.parquet"), "--landmarks", "8", "--selection", "random",
                 "-o", str(tmp_path / "b.npz")]) == 0
    from streamembed import LandmarkMDS

    b = LandmarkMDS.load(tmp_path / "b.npz")
    assert b.metric_ == "euclidean" and all(i.startswith("o") for i in b.landmark_ids_)
    assert LandmarkMDS.load(tmp_path / "a.npz").metric_ == "cityblock"


def test_fit_refuses_non_square_and_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "D.npy", np.ones((4, 5)))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "-o", str(tmp_path / "m.npz")]) == 2
    assert "square" in capsys.readouterr().err
    assert main(["fit", "--dissimilarities", str(tmp_path / "nope.npy"), "-o", str(tmp_path / "m.npz")]) == 2


def test_embed_one_file_with_dead_letters(tmp_path: Path) -> None:
    est = fitted_model()
    est.save(tmp_path / "m.npz")
    A = dissimilarities(objects(50))
    A[7, 2] = -3.0
    pq.write_table(input_table([f"o{i}" for i in range(50)], A), tmp_path / "in.parquet")
    rc = main(["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o",
               str(tmp_path / "out.parquet"), "--batch-rows", "16", "--k0-rows", "all", "--method", "restricted"])
    assert rc == 1  # done, with a dead letter
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.num_rows == 49 and "o7" not in out.column("id").to_pylist()
    assert set(out.column("method").to_pylist()) == {"restricted"}
    assert out.column("k0").null_count == 0
    np.testing.assert_allclose(y_matrix(out),
                               est.embed(np.delete(A, 7, axis=0), method="restricted").y, rtol=1e-5, atol=1e-6)
    dead = pq.read_table(tmp_path / "out.dead-letter").to_pylist()
    assert [(d["id"], d["reason"], d["row"]) for d in dead] == [("o7", "negative", 7)]


def test_embed_jsonl_in_feature_mode(tmp_path: Path) -> None:
    est = fitted_model(features=True)
    est.save(tmp_path / "m.npz")
    Z = objects(5)
    write_jsonl(tmp_path / "in.jsonl", [{"id": f"z{i}", "features": z.tolist()} for i, z in enumerate(Z)])
    assert main(["embed", str(tmp_path / "in.jsonl"), "-m", str(tmp_path / "m.npz"), "-o",
                 str(tmp_path / "o.parquet"), "--progress", "always"]) == 0
    y = y_matrix(pq.read_table(tmp_path / "o.parquet"))
    np.testing.assert_allclose(y, est.transform(cdist(Z, landmark_points())), rtol=1e-9)


def test_embed_refuses_a_corrupt_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.npz").write_bytes(b"PK\x03\x04 not really")
    pq.write_table(input_table(["a"], np.ones((1, 12), np.float32)), tmp_path / "in.parquet")
    assert main(["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o",
                 str(tmp_path / "o.parquet")]) == 2
    assert "cannot load model" in capsys.readouterr().err


def test_config_prints_effective_toml_and_json(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMEMBED_OUTPUT__ROLL_ROWS", "77")
    assert main(["config", "--set", "metrics.port=0"]) == 0
    doc = tomllib.loads(capsys.readouterr().out)
    assert doc["output"]["roll_rows"] == 77 and doc["metrics"]["port"] == 0
    assert main(["config", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"]["roll_rows"] == 77
    assert main(["config", "--reference"]) == 0
    assert "`output.roll_rows`" in capsys.readouterr().out


def test_bad_configuration_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMEMBED_OUTPUT__ROLL_ROWS", "-5")
    assert main(["run"]) == 2
    assert "output.roll_rows = -5" in capsys.readouterr().err
    monkeypatch.delenv("STREAMEMBED_OUTPUT__ROLL_ROWS")
    assert main(["run", "--set", "nope"]) == 2


def test_run_refuses_a_missing_or_corrupt_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "--set", f"output.root={tmp_path / 'out'}", "--set", "metrics.enabled=false"]
    assert main(base + ["--set", f"model.path={tmp_path / 'missing.npz'}"]) == 2
    (tmp_path / "bad.npz").write_bytes(b"garbage")
    assert main(base + ["--set", f"model.path={tmp_path / 'bad.npz'}"]) == 2
    dmodel = fitted_model()
    dmodel.save(tmp_path / "d.npz")  # a dissimilarity model cannot serve the feature generator
    assert main(base + ["--set", f"model.path={tmp_path / 'd.npz'}"]) == 2


@pytest.mark.parametrize("selection", ["maxmin", "random", "first"])
def test_fit_refuses_a_bad_entry_with_its_position_in_the_input(tmp_path: Path, selection: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # the NaN sits between objects 5 and 7 of the input: max-min selection reads every row, so it is
    # refused whatever is chosen; random/first selections read the chosen landmarks' entries (objects
    # 0..9 here for "first"). The message names the input's row and column, never landmark positions.
    X = np.random.default_rng(0).standard_normal((30, 3))
    D = cdist(X, X)
    D[5, 7] = D[7, 5] = np.nan
    np.save(tmp_path / "D.npy", D)
    args = ["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "10", "--selection", selection,
            "--seed", "0", "-o", str(tmp_path / "m.npz")]
    if selection == "random":  # make sure both are chosen
        args += ["--seed", str(next(s for s in range(200) if {5, 7} <= set(
            np.random.default_rng(s).choice(30, size=10, replace=False).tolist())))]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "D[5, 7] = nan is not finite" in err, err
    # a NaN outside the chosen landmarks does not matter to random/first selections
    D = cdist(X, X)
    D[20, 25] = D[25, 20] = np.nan
    np.save(tmp_path / "D.npy", D)
    code = main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "10", "--selection", "first",
                 "-o", str(tmp_path / "m.npz")])
    assert code == 0
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "10", "-o",
                 str(tmp_path / "m.npz")]) == 2
    assert "D[20, 25] = nan is not finite" in capsys.readouterr().err


def test_embed_defaults_to_the_method_the_model_was_fitted_for(tmp_path: Path) -> None:
    """`fit --method restricted` stores the method with the model; `embed` without --method uses it, and an
    explicit --method still wins."""
    X = landmark_points()
    np.save(tmp_path / "D.npy", cdist(X, X))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--n-components", "2", "--method", "restricted",
                 "-o", str(tmp_path / "m.npz")]) == 0
    A = cdist(X[:10] + 0.01, X)
    pq.write_table(input_table([f"o{i}" for i in range(10)], A), tmp_path / "in.parquet")
    for extra, expect in (([], "restricted"), (["--method", "projection"], "projection")):
        out = tmp_path / f"out-{expect}.parquet"
        assert main(["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o", str(out), *extra]) == 0
        assert set(pq.read_table(out).column("method").to_pylist()) == {expect}
