"""With the real CLI: the configured model always wins and one output root never mixes maps.

Model A is the 12-landmark test model; model B is fitted by ``streamembed fit`` from a bare ``.npy``
dissimilarity matrix with 16 landmarks, so A's rows have the wrong length for B and the other way round
(the situation of the issue, where every row became a ``wrong_length`` dead letter and the run exited 0).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.stream.output import y_matrix

from ..stream.helpers import (fitted_model, input_table, landmark_points, objects, read_dead, read_ids,
                              write_parquet)
from .cli import cli, clean_env, log_records, rows_table
from .daemon import Daemon, directory_env, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

B_LANDMARKS = 16


class ModelB:
    """Model B, fitted through the CLI from a bare .npy (landmarks named by their row numbers)."""

    def __init__(self, workdir: Path) -> None:
        self.points = np.random.default_rng(11).standard_normal((60, 3)) * 2.0 + 1.0
        np.save(workdir / "b-D.npy", cdist(self.points, self.points))
        self.path = workdir / "b.npz"
        r = cli("fit", "--dissimilarities", "b-D.npy", "--landmarks", B_LANDMARKS, "--landmarks-out", "b-ids.txt",
                "-o", self.path, cwd=workdir)
        assert r.returncode == 0, r.stderr
        self.rows = [int(x) for x in (workdir / "b-ids.txt").read_text().split()]
        self.est = LandmarkMDS.load(self.path)

    def input(self, Z: np.ndarray) -> np.ndarray:
        """Rows for model B: dissimilarities of ``Z`` to B's landmark points, in model order."""
        return cdist(Z, self.points[self.rows])


def _batch_env(indir: Path, out: Path, model: Path, **more: str) -> dict[str, str]:
    return directory_env(indir, out, model, STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE="true",
                         STREAMEMBED_REFIT__AUTO="false", **more)


def _run_to_end(workdir: Path, env: dict[str, str], *args: str, timeout: float = 30.0) -> tuple[int, str]:
    """A batch-mode daemon to its exit: (exit code, log)."""
    d = Daemon(workdir, env, args)
    try:
        code = d.wait(timeout)
    finally:
        d.close()
    return code, d.log()


def _refusal(log: str) -> str:
    """The daemon's 'refusing to start' message."""
    msgs = [r["msg"] for r in log_records(log) if r.get("level") == "ERROR" and "refusing" in r.get("msg", "")]
    assert len(msgs) == 1, log
    return msgs[0]


def _lineage(model: Path) -> str:
    return str(LandmarkMDS.load(model).lineage_)


def _outputs(out: Path) -> dict[str, tuple[int, np.ndarray]]:
    """id -> (model_version, y) over every published output file of ``out``."""
    got: dict[str, tuple[int, np.ndarray]] = {}
    for p in sorted((out / "embeddings").glob("*.parquet")):
        t = pq.read_table(p)
        for i, v, y in zip(t.column("id").to_pylist(), t.column("model_version").to_pylist(), y_matrix(t), strict=True):
            got[i] = (int(v), np.asarray(y))
    return got


def _manual_refit(workdir: Path, indir: Path, out: Path, model: Path) -> dict:
    """Run model A, hand it a block of landmark candidates, refit it with `streamembed refit`, embed 5 rows
    with the refitted model, stop it.

    Returns the installed refit's model-history record, with ``points``: the new landmarks' coordinates.
    """
    Zb = objects(40, seed=5) + 4.0
    write_parquet(indir / "a0-block.parquet",
                  input_table([f"blk{i}" for i in range(40)], cdist(Zb, landmark_points()), cross=cdist(Zb, Zb)))
    pool = {str(i): p for i, p in enumerate(landmark_points())} | {f"blk{i}": z for i, z in enumerate(Zb)}
    env = directory_env(indir, out, model, STREAMEMBED_REFIT__AUTO="false")
    d = Daemon(workdir, env)
    try:
        d.wait_port()
        wait_for(lambda: d.metric("streamembed_refit_candidates") == 40, 20, "the block in the reservoir", d)
        r = subprocess.run([sys.executable, "-m", "streamembed", "refit"], cwd=workdir, env=clean_env(env),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: d.metric("streamembed_model_version") == 2, 60, "the refitted model", d)
        rec = json.loads((out / "model-history.jsonl").read_text().splitlines()[-1])
        assert rec["status"] == "installed" and rec["model_version"] == 2
        rec["points"] = np.vstack([pool[i] for i in rec["new_landmarks"]])
        commits = d.metric("streamembed_checkpoints_total")
        Z = objects(5, seed=20)
        write_parquet(indir / "a0-after.parquet", rows_table([f"a0-{i}" for i in range(5)], cdist(Z, rec["points"])))
        wait_for(lambda: d.metric("streamembed_records_in_total") == 45
                 and d.metric("streamembed_checkpoints_total") > commits, 20, "the rows after the refit committed", d)
        assert d.terminate() == 0, d.log()
    finally:
        d.close()
    return rec


def test_a_leftover_refit_of_another_map_never_replaces_the_configured_model(tmp_path: Path) -> None:
    """Item 1, start to end.

    * A refitted model that descends from the configured one (same lineage, version 2) is resumed:
      the checkpoint records version 2, and a restart embeds new rows with it, to the numbers of
      ``models/model-v2.npz``.
    * Configuring another model B in that root is refused with exit 2, naming both models' lineages and
      the two ways forward; nothing is embedded and nothing is dead-lettered.
    * Without the checkpoint, the leftover ``models/model-v2.npz`` of map A is still not used for B.
    * ``--fresh`` moves A's run aside and embeds with B: version 1, B's numbers, no dead letters.
    """
    a_path = tmp_path / "a.npz"
    fitted_model().save(a_path)
    b = ModelB(tmp_path)
    lin_a, lin_b = _lineage(a_path), _lineage(b.path)
    assert lin_a != lin_b
    out, ina = tmp_path / "out", tmp_path / "in-a"
    ina.mkdir()
    rec = _manual_refit(tmp_path, ina, out, a_path)
    assert (out / "models" / "model-v2.npz").exists()
    ckpt = json.loads((out / "checkpoint.json").read_text())
    assert ckpt["model"]["lineage"] == lin_a and ckpt["model"]["version"] == 2  # written with the model it used

    # a restart with model A resumes its own refit, version 2
    Z = objects(20, seed=21)
    # measured against version 2's landmarks, and saying so (after a refit an untagged row is read as the
    # version the daemon started with: refit.unversioned_rows)
    a1 = rows_table([f"a1-{i}" for i in range(20)], cdist(Z, rec["points"]))
    write_parquet(ina / "a1.parquet", a1.append_column("landmark_version", pa.array([2] * 20, pa.int64())))
    code, log = _run_to_end(tmp_path, _batch_env(ina, out, a_path))
    assert code == 0, log
    resumed = [r for r in log_records(log) if r["msg"] == "resuming with a refitted model"]
    assert [r["model_version"] for r in resumed] == [2], log
    v2 = LandmarkMDS.load(out / "models" / "model-v2.npz")
    got = _outputs(out)
    assert all(got[f"a1-{i}"][0] == 2 for i in range(20))
    np.testing.assert_allclose(np.vstack([got[f"a1-{i}"][1] for i in range(20)]),
                               v2.transform(cdist(Z, rec["points"])), atol=1e-6)

    # model B in A's root: refused, naming both maps and the two ways forward
    inb = tmp_path / "in-b"
    inb.mkdir()
    Zb = objects(30, seed=22)
    write_parquet(inb / "b1.parquet", rows_table([f"b1-{i}" for i in range(30)], b.input(Zb)))
    before = (out / "checkpoint.json").read_bytes()
    code, log = _run_to_end(tmp_path, _batch_env(inb, out, b.path))
    assert code == 2, log
    msg = _refusal(log)
    assert lin_a in msg and lin_b in msg and "b.npz" in msg
    assert "--fresh" in msg and "output.root" in msg
    assert (out / "checkpoint.json").read_bytes() == before
    assert not any(i.startswith("b1-") for i in _outputs(out))
    assert read_dead(out / "dead-letter") == []

    # the leftover model-v2.npz of map A without its checkpoint: still not B's model
    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    (bare / "checkpoint.json").unlink()
    (bare / "writer-id").unlink()  # a copied root is refused until it has a writer id of its own
    code, log = _run_to_end(tmp_path, _batch_env(inb, bare, b.path))
    assert code == 0, log
    assert any(r["level"] == "WARNING" and "model-v2.npz" in r["msg"] and "another map" in r["msg"]
               for r in log_records(log)), log
    got = _outputs(bare)
    assert all(got[f"b1-{i}"][0] == 1 for i in range(30))
    assert read_dead(bare / "dead-letter") == []

    # --fresh: A's run goes aside, B embeds with its own model
    code, log = _run_to_end(tmp_path, _batch_env(inb, out, b.path), "--fresh")
    assert code == 0, log
    aside = sorted(out.glob("previous-*"))
    assert len(aside) == 1
    assert (aside[0] / "checkpoint.json").read_bytes() == before
    assert (aside[0] / "models" / "model-v2.npz").exists() and (aside[0] / "model-history.jsonl").exists()
    got = _outputs(out)
    assert set(got) == {f"b1-{i}" for i in range(30)}, "map A's rows are still in the output of map B"
    assert all(v == 1 for v, _ in got.values())
    np.testing.assert_allclose(np.vstack([got[f"b1-{i}"][1] for i in range(30)]), b.est.transform(b.input(Zb)),
                               atol=1e-6)
    assert read_dead(out / "dead-letter") == []
    ckpt = json.loads((out / "checkpoint.json").read_text())
    assert ckpt["model"]["lineage"] == lin_b and ckpt["model"]["version"] == 1
    start = [r for r in log_records(log) if r["msg"].startswith("model: ")]
    assert len(start) == 1 and start[0]["lineage"] == lin_b and start[0]["version"] == 1


def test_two_models_into_one_root_never_mix(tmp_path: Path) -> None:
    """Item 2: run A, then B into the same root: B refuses (exit 2) until ``--fresh``; then the root is B's.

    After ``--fresh``, B resumes its own checkpoint on the next start, and now A is the one refused.
    The output directory holds one map's rows only; the other's are kept aside.
    """
    a_path = tmp_path / "a.npz"
    fitted_model().save(a_path)
    b = ModelB(tmp_path)
    out, ina, inb = tmp_path / "out", tmp_path / "in-a", tmp_path / "in-b"
    ina.mkdir()
    inb.mkdir()
    Z = objects(25, seed=3)
    write_parquet(ina / "a.parquet", rows_table([f"a-{i}" for i in range(25)], cdist(Z, landmark_points())))
    write_parquet(inb / "b1.parquet", rows_table([f"b1-{i}" for i in range(25)], b.input(Z)))

    code, log = _run_to_end(tmp_path, _batch_env(ina, out, a_path))
    assert code == 0, log
    assert set(_outputs(out)) == {f"a-{i}" for i in range(25)}
    before = (out / "checkpoint.json").read_bytes()
    code, log = _run_to_end(tmp_path, _batch_env(inb, out, b.path))
    assert code == 2, log
    assert _lineage(a_path) in _refusal(log)
    assert (out / "checkpoint.json").read_bytes() == before  # a refusal changes nothing
    assert set(_outputs(out)) == {f"a-{i}" for i in range(25)}

    code, log = _run_to_end(tmp_path, _batch_env(inb, out, b.path), "--fresh")
    assert code == 0, log
    assert set(_outputs(out)) == {f"b1-{i}" for i in range(25)}
    aside = sorted(out.glob("previous-*"))
    assert len(aside) == 1 and set(read_ids(aside[0] / "embeddings", "*.parquet")) == {f"a-{i}" for i in range(25)}

    write_parquet(inb / "b2.parquet", rows_table([f"b2-{i}" for i in range(5)], b.input(Z[:5])))
    code, log = _run_to_end(tmp_path, _batch_env(inb, out, b.path))
    assert code == 0, log
    assert any(r["msg"] == "resuming from checkpoint" for r in log_records(log))
    ids = read_ids(out / "embeddings", "*.parquet")
    assert sorted(ids) == sorted([f"b1-{i}" for i in range(25)] + [f"b2-{i}" for i in range(5)])  # b1 read once
    assert all(v == 1 for v, _ in _outputs(out).values())

    code, log = _run_to_end(tmp_path, _batch_env(ina, out, a_path))
    assert code == 2, log
    assert _lineage(b.path) in _refusal(log)


def test_fresh_does_not_move_a_running_daemons_state(tmp_path: Path) -> None:
    """``--fresh`` against a root whose daemon is running: exit 3 (retry later), and the running daemon's
    checkpoint, output and pid file stay where they are (the lock is taken before anything moves)."""
    a_path = tmp_path / "a.npz"
    fitted_model().save(a_path)
    out, ina = tmp_path / "out", tmp_path / "in-a"
    ina.mkdir()
    Z = objects(10, seed=3)
    write_parquet(ina / "a.parquet", rows_table([f"a-{i}" for i in range(10)], cdist(Z, landmark_points())))
    d = Daemon(tmp_path, directory_env(ina, out, a_path))
    try:
        d.wait_port()
        wait_for(lambda: (out / "checkpoint.json").exists() and len(_outputs(out)) == 10, 20, "a checkpoint", d)
        code, log = _run_to_end(tmp_path, _batch_env(ina, out, a_path), "--fresh")
        assert code == 3, log
        assert any("another streamembed daemon" in r["msg"] and str(d.proc.pid) in r["msg"]
                   for r in log_records(log)), log
        assert list(out.glob("previous-*")) == []
        assert (out / "checkpoint.json").exists() and (out / "streamembed.pid").exists()
        assert len(_outputs(out)) == 10
        assert d.get("/healthz")[0] == 200
        assert d.terminate() == 0
    finally:
        d.close()
