"""With the real CLI: every failure is loud.

Each case runs ``python -m streamembed ...`` as a user would and checks the exit code (the contract of
``streamembed --help``: 0 done, 1 done with dead letters, 2 refused), that the message on stderr says
what is wrong, that no Python traceback is printed, and that a failed `embed` leaves no output file
pretending success.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from scipy.spatial.distance import cdist

from ..stream.helpers import N_LANDMARKS, dissimilarities, fitted_model, objects, read_dead
from .cli import clean_env, cli, no_traceback, rows_table

pytestmark = pytest.mark.e2e


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    """A directory with model.npz (12 landmarks), a good input, D.npy and a text file."""
    fitted_model().save(tmp_path / "model.npz")
    A = dissimilarities(objects(50, seed=2), dtype=np.float64)
    pq.write_table(rows_table([f"g{i}" for i in range(50)], A), tmp_path / "good.parquet")
    np.save(tmp_path / "D.npy", cdist(objects(20, seed=3), objects(20, seed=3)))
    (tmp_path / "model.txt").write_text("these are not the landmarks you are looking for\n")
    return tmp_path


def _refused(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, every needle in stderr, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    assert no_traceback(r.stderr + r.stdout), r.stderr


def test_embed_of_a_truncated_parquet_file_is_refused_and_writes_nothing(work: Path) -> None:
    data = (work / "good.parquet").read_bytes()
    (work / "cut.parquet").write_bytes(data[: len(data) // 2])
    r = cli("embed", "cut.parquet", "-m", "model.npz", "-o", "out.parquet", cwd=work)
    _refused(r, "cannot read cut.parquet", "Parquet")
    assert not (work / "out.parquet").exists()


def test_embed_of_an_unknown_extension_is_refused_before_anything_is_written(work: Path) -> None:
    (work / "good.csvx").write_bytes((work / "good.parquet").read_bytes())
    r = cli("embed", "good.csvx", "-m", "model.npz", "-o", "out.parquet", cwd=work)
    _refused(r, "unknown file extension '.csvx'", ".parquet")
    assert not (work / "out.parquet").exists() and not (work / "out.dead-letter").exists()


def test_embed_with_a_misspelt_column_says_did_you_mean(work: Path) -> None:
    t = pq.read_table(work / "good.parquet")
    pq.write_table(t.rename_columns(["id", "dissimilarity"]), work / "typo.parquet")
    r = cli("embed", "typo.parquet", "-m", "model.npz", "-o", "out.parquet", cwd=work)
    _refused(r, "no record of typo.parquet could be embedded", "missing_vector 50",
             "did you mean 'dissimilarities'")
    assert not (work / "out.parquet").exists()
    assert {d["reason"] for d in read_dead(work / "out.dead-letter")} == {"missing_vector"}


def test_embed_where_every_row_has_the_wrong_length_names_the_model(work: Path) -> None:
    """Input for another model: refused, with the lengths, the model's landmark count and where to look."""
    A = dissimilarities(objects(30, seed=3), dtype=np.float64)
    pq.write_table(rows_table([f"w{i}" for i in range(30)], np.hstack([A, A[:, :4]])), work / "other.parquet")
    r = cli("embed", "other.parquet", "-m", "model.npz", "-o", "out.parquet", cwd=work)
    _refused(r, "wrong_length 30", f"has {N_LANDMARKS + 4} values, expected {N_LANDMARKS}",
             f"model.npz has {N_LANDMARKS} landmarks", "streamembed model info")
    assert not (work / "out.parquet").exists()


def test_embed_with_some_bad_rows_exits_1_and_keeps_the_good_ones(work: Path) -> None:
    """Fractional ids are `bad_id` (not `missing_id`); a misspelt key in one JSON line is `missing_vector` with
    a did-you-mean; the good rows are written; exit 1 with the reasons counted."""
    A = dissimilarities(objects(6, seed=4), dtype=np.float64)
    lines = [{"id": f"ok{i}", "dissimilarities": A[i].tolist()} for i in range(3)]
    lines.append({"id": "typo", "dissimilarity": A[3].tolist()})
    (work / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    lines = [{"id": 7.5, "dissimilarities": A[4].tolist()}, {"id": "ok4", "dissimilarities": A[5].tolist()}]
    (work / "b.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))

    r = cli("embed", "a.jsonl", "-m", "model.npz", "-o", "a.parquet", cwd=work)
    assert r.returncode == 1, r.stderr
    assert "4 records: 3 embedded" in r.stderr and "missing_vector 1" in r.stderr and no_traceback(r.stderr)
    assert pq.read_table(work / "a.parquet").column("id").to_pylist() == ["ok0", "ok1", "ok2"]
    (dead,) = read_dead(work / "a.dead-letter")
    assert dead["id"] == "typo" and dead["row"] == 3 and dead["reason"] == "missing_vector"
    assert "did you mean 'dissimilarities'" in dead["detail"]

    r = cli("embed", "b.jsonl", "-m", "model.npz", "-o", "b.parquet", cwd=work)
    assert r.returncode == 1, r.stderr
    assert "bad_id 1" in r.stderr and "id must be a string or an integer, got float 7.5" in r.stderr
    assert pq.read_table(work / "b.parquet").column("id").to_pylist() == ["ok4"]
    (dead,) = read_dead(work / "b.dead-letter")
    assert dead["reason"] == "bad_id" and dead["row"] == 0


def test_a_misspelt_key_is_named_even_beside_a_bad_line(work: Path) -> None:
    A = dissimilarities(objects(2, seed=4), dtype=np.float64)
    lines = [{"id": 7.5, "dissimilarities": A[0].tolist()}, {"id": "typo", "dissimilarity": A[1].tolist()}]
    (work / "c.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = cli("embed", "c.jsonl", "-m", "model.npz", "-o", "c.parquet", cwd=work)
    assert r.returncode == 2
    dead = {d["id"]: d for d in read_dead(work / "c.dead-letter")}
    assert "did you mean 'dissimilarities'" in dead["typo"]["detail"]


@pytest.mark.parametrize("model, needle", [("D.npy", "single numpy array (.npy), not a streamembed model"),
                                           ("model.txt", "not a streamembed model")])
def test_a_wrong_model_file_is_refused_by_embed_run_and_plot(work: Path, model: str, needle: str) -> None:
    """A .npy or a text file given as the model: exit 2 with a message, no traceback, in all three commands."""
    r = cli("embed", "good.parquet", "-m", model, "-o", "out.parquet", cwd=work)
    _refused(r, needle)
    assert not (work / "out.parquet").exists()
    r = cli("run", "--set", f"model.path={model}", "--set", "source.kind=directory", "--set", "metrics.enabled=false",
            "--set", "output.root=out", cwd=work)
    _refused(r, "refusing to start", needle)
    assert not (work / "out" / "checkpoint.json").exists()
    r = cli("plot", "map", "-m", model, "-e", "good.parquet", "-o", "map.png", cwd=work)
    _refused(r, needle)
    assert not (work / "map.png").exists()


def test_a_near_miss_environment_variable_is_refused(work: Path) -> None:
    """STREAMEMBED_MODEL_PATH (one underscore) is not silently ignored: exit 2 with the right name, and the
    generator demo does not start instead."""
    r = cli("run", "--max-batches", "1", "--metrics-port", "0", cwd=work,
            env={"STREAMEMBED_MODEL_PATH": str(work / "model.npz")})
    _refused(r, "did you mean STREAMEMBED_MODEL__PATH")
    assert not (work / "streamembed-out").exists()
    r = cli("config", cwd=work, env={"STREAMEMBED_OUTPUT__ROLL_ROW": "5"})
    _refused(r, "STREAMEMBED_OUTPUT__ROLL_ROW", "roll_rows")


def test_config_into_a_closed_pipe_prints_no_traceback(work: Path) -> None:
    """`streamembed config | head -1`, and a reader that is gone before the first byte: exit 0, stderr clean."""
    r = subprocess.run(["bash", "-c", f"'{sys.executable}' -m streamembed config | head -1"], cwd=work,
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("# [model]") and r.stderr == "", r.stderr
    p = subprocess.Popen([sys.executable, "-m", "streamembed", "config"], cwd=work, env=clean_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # before the interpreter has even started: every write meets EPIPE
    err = p.stderr.read().decode()
    assert p.wait(60) == 0 and err == "", err


def test_fit_into_a_missing_directory_is_refused_and_creates_nothing(work: Path) -> None:
    target = work / "no" / "such" / "m.npz"
    r = cli("fit", "--dissimilarities", "D.npy", "-o", target, cwd=work)
    _refused(r, f"directory {target.parent} does not exist")
    assert not (work / "no").exists()
    r = cli("fit", "--dissimilarities", "D.npy", "-o", "m.npz", "--landmarks-out", work / "no" / "ids.txt", cwd=work)
    _refused(r, "--landmarks-out")
    assert not (work / "no").exists() and not (work / "m.npz").exists()
