"""Issue 34's demonstrations through the real daemon with default settings (docs/objects.md): (a) rows carrying strings
with a built-in metric, a population switch (stdlib code lines, then docstring prose), a refit installed from the
objects, and the new objects' Procrustes share to their own full classical MDS cut by at least half of the gap to a
map fitted on them; a stationary stream keeps its map; (b) the same with a ``module:function`` metric of our own
between time series; (c) a refit through the request protocol, the producer kit answering; (d) after that refit,
unversioned rows measured against the old landmarks are never placed as the new version.

(a) refits by itself: the drift alarm on the switch starts the refit. The refits of (b) and (c) are asked for
(``streamembed refit``), which keeps that command tested on rows carrying objects and on refit requests.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from benchmarks.string_streams import code_lines, prose_lines, recording_windows
from streamembed.core.flags import FLAG_RETAINED_MODEL
from streamembed.core.inputs.metrics import resolve_metric
from streamembed.model_io import load_model
from streamembed.quality import classical_mds, procrustes_share
from streamembed.stream.output import flag_bits, y_matrix

from tests.e2e.cli import cli
from tests.e2e.daemon import Daemon, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

METRIC = "levenshtein-normalized"


def _env(root: Path, model: Path, **more: str) -> dict[str, str]:
    """The daemon's settings: the defaults, but for where things are (and a quick directory scan)."""
    return {"STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_MODEL__PATH": str(model),
            "STREAMEMBED_DIRECTORY__PATH": str(root / "incoming"), "STREAMEMBED_OUTPUT__ROOT": str(root / "out"),
            "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0.2", "STREAMEMBED_LOGGING__FORMAT": "json", **more}


def _publish(root: Path, name: str, table: pa.Table) -> None:
    """A file published by the rename protocol (written aside, renamed into the watched directory)."""
    tmp = root / f".{name}.tmp"
    pq.write_table(table, tmp)
    tmp.replace(root / "incoming" / name)


def _objects(ids: list[str], objects: list) -> pa.Table:  # type: ignore[type-arg]
    col = pa.array(objects) if isinstance(objects[0], str) else pa.array([list(map(float, o)) for o in objects])
    return pa.table({"id": ids, "object": col})


def _output(root: Path) -> pa.Table:
    return ds.dataset(root / "out" / "embeddings", format="parquet").to_table()


def _processed(root: Path, n: int) -> bool:
    d = root / "out" / "embeddings"
    return d.is_dir() and any(d.glob("*.parquet")) and _output(root).num_rows >= n


def _placed(out: pa.Table, prefix: str) -> tuple[list[str], np.ndarray, list[int]]:
    ids = out.column("id").to_pylist()
    sel = [i for i, x in enumerate(ids) if x.startswith(prefix)]
    sub = out.take(sel)
    return [ids[i] for i in sel], y_matrix(sub), sub.column("model_version").to_pylist()


def _gap_closed(objs: list, Y_new: np.ndarray, model_path: Path, own_map: object, metric: object) -> dict:  # type: ignore[type-arg]
    """Procrustes shares to the objects' own full CMDS: by the first map, the refitted one, a map fitted on them."""
    X = classical_mds(metric.pairwise(metric.objects(objs)), 2).Y  # type: ignore[attr-defined]
    v1 = load_model(model_path)
    before = procrustes_share(v1.place(v1.dissimilarities_to_landmarks(objs, metric=metric)).y, X)
    own = procrustes_share(own_map.place(own_map.dissimilarities_to_landmarks(objs, metric=metric)).y, X)  # type: ignore[attr-defined]
    return {"before": before, "after": procrustes_share(Y_new, X), "own": own}


def _fit(tmp: Path, name: str, lines: list[str], landmarks: int, metric: str = METRIC) -> Path:
    src = tmp / f"{name}.txt"
    src.write_text("\n".join(lines) + "\n")
    r = cli("fit", "--objects", src, "--metric", metric, "--landmarks", landmarks, "-o", tmp / f"{name}.npz",
            cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert "dissimilarities computed" in r.stderr
    return tmp / f"{name}.npz"


@pytest.fixture(scope="module")
def strings() -> dict[str, list[str]]:
    code, prose = code_lines(7000, seed=1), prose_lines(3000, seed=2)
    return {"fit": code[:3000], "old": code[3000:7000], "new": prose[:2000], "test": prose[2000:3000]}


def test_a_stationary_stream_of_strings_keeps_its_map(tmp_path: Path, strings: dict[str, list[str]]) -> None:
    model = _fit(tmp_path, "code", strings["fit"], 200)
    (tmp_path / "incoming").mkdir()
    _publish(tmp_path, "old.parquet", _objects([f"old{i}" for i in range(len(strings["old"]))], strings["old"]))
    r = cli("run", cwd=tmp_path, env={**_env(tmp_path, model), "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true",
                                      "STREAMEMBED_METRICS__ENABLED": "false"}, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no refit pending" in r.stderr and not (tmp_path / "out" / "models" / "model-v2.npz").exists()
    assert _output(tmp_path).num_rows == len(strings["old"])


def test_a_population_switch_of_strings_refits_by_itself(tmp_path: Path, strings: dict[str, list[str]]) -> None:
    """(a) rows carrying strings, levenshtein-normalized, default settings: the drift alarm on the switch, the refit
    from the objects installed with no one asking, and the new objects' Procrustes share to their own full
    classical MDS cut by at least half of the gap to a map fitted on them."""
    model = _fit(tmp_path, "code", strings["fit"], 200)
    (tmp_path / "incoming").mkdir()
    _publish(tmp_path, "a-old.parquet", _objects([f"old{i}" for i in range(len(strings["old"]))], strings["old"]))
    _publish(tmp_path, "b-new.parquet", _objects([f"new{i}" for i in range(len(strings["new"]))], strings["new"]))
    env = {**_env(tmp_path, model), "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true",
           "STREAMEMBED_METRICS__ENABLED": "false"}
    r = cli("run", cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "drift: alarm" in r.stderr and (tmp_path / "out" / "models" / "model-v2.npz").exists(), r.stderr[-3000:]
    # later objects of the new population, in a second batch run: it resumes the refitted model
    _publish(tmp_path, "c-test.parquet", _objects([f"test{i}" for i in range(len(strings["test"]))], strings["test"]))
    r = cli("run", cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ids, Y, versions = _placed(_output(tmp_path), "test")
    assert len(ids) == len(strings["test"]) and set(versions) == {2}
    objs = [strings["test"][int(x[4:])] for x in ids]
    from streamembed import LandmarkMDS

    own = LandmarkMDS(n_components=2, n_landmarks=200, metric=METRIC).fit(strings["new"]).model_
    shares = _gap_closed(objs, Y, model, own, resolve_metric(METRIC))
    print("(a) Procrustes to the new objects' full CMDS:", shares)
    assert shares["before"] - shares["after"] >= 0.5 * (shares["before"] - shares["own"]), shares
    record = [json.loads(x) for x in (tmp_path / "out" / "model-history.jsonl").read_text().splitlines()][-1]
    assert record["status"] == "installed" and load_model(tmp_path / "out" / "models" / "model-v2.npz").has_objects


# ----------------------------------------------------------------------------- (b) a metric of our own for series

OWN_METRIC = '''
"""A metric of our own between time series: DTW within a Sakoe-Chiba band of 8 samples (dtaidistance's C loop)."""
import numpy as np
from dtaidistance import dtw


def banded_dtw(objects_a: list, objects_b: list) -> np.ndarray:
    series = [np.asarray(x, dtype=np.float64) for x in list(objects_a) + list(objects_b)]
    m = len(objects_a)
    M = dtw.distance_matrix_fast(series, window=8, block=((0, m), (m, len(series))), compact=False,
                                 parallel=False, only_triu=False)
    return np.asarray(M[:m, m:])
'''


def test_a_population_switch_of_series_with_a_metric_of_our_own(tmp_path: Path) -> None:
    """(b) windows of the EEG recording, then of the membrane-potential recording, by ``my_metrics:banded_dtw``."""
    pytest.importorskip("dtaidistance")
    pytest.importorskip("matplotlib")
    (tmp_path / "my_metrics.py").write_text(OWN_METRIC)
    env = {"PYTHONPATH": str(tmp_path)}
    old, new = recording_windows(1400, seed=1, source="eeg"), recording_windows(2300, seed=2, source="membrane")
    fit = tmp_path / "fit.parquet"
    pq.write_table(_objects([f"f{i}" for i in range(400)], old[:400]), fit)
    r = cli("fit", "--objects", fit, "--metric", "my_metrics:banded_dtw", "--landmarks", 60, "-o",
            tmp_path / "eeg.npz", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    model = tmp_path / "eeg.npz"
    (tmp_path / "incoming").mkdir()
    d = Daemon(tmp_path, {**_env(tmp_path, model), **env})
    try:
        d.wait_port()
        _publish(tmp_path, "old.parquet", _objects([f"old{i}" for i in range(1000)], old[400:]))
        wait_for(lambda: _processed(tmp_path, 1000), 180, "the EEG windows", d)
        # as many as the refit reservoir holds (drift.reservoir_objects): the candidates are the new population
        _publish(tmp_path, "new.parquet", _objects([f"new{i}" for i in range(2000)], new[:2000]))
        wait_for(lambda: _processed(tmp_path, 3000), 180, "the membrane windows", d)
        assert cli("refit", cwd=tmp_path, env={"STREAMEMBED_OUTPUT__ROOT": str(tmp_path / "out")}).returncode == 0
        wait_for(lambda: (tmp_path / "out" / "models" / "model-v2.npz").exists(), 300, "the refit", d)
        _publish(tmp_path, "test.parquet", _objects([f"test{i}" for i in range(300)], new[2000:]))
        wait_for(lambda: _processed(tmp_path, 3300), 180, "the test windows", d)
    finally:
        assert d.terminate() == 0
    ids, Y, versions = _placed(_output(tmp_path), "test")
    assert set(versions) == {2}
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        from streamembed import LandmarkMDS

        metric = resolve_metric("my_metrics:banded_dtw")
        objs = [new[2000 + int(x[4:])] for x in ids]
        own = LandmarkMDS(n_components=2, n_landmarks=60, metric="my_metrics:banded_dtw").fit(new[:600]).model_
        shares = _gap_closed(objs, Y, model, own, metric)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_metrics", None)
    print("(b) Procrustes to the new windows' full CMDS:", shares)
    assert shares["before"] - shares["after"] >= 0.5 * (shares["before"] - shares["own"]), shares


# ----------------------------------------------------------------------------- (c), (d): the request protocol


def test_a_refit_by_request_answered_by_the_producer_kit_and_old_rows_never_placed_as_the_new_version(
        tmp_path: Path, strings: dict[str, list[str]]) -> None:
    """(c) rows of dissimilarities alone (the producer kit's), a refit request, the kit's answer, version 2;
    (d) then rows measured against version 1 without a landmark_version are placed by version 1, never as 2."""
    from streamembed.producer import Producer

    model = _fit(tmp_path, "code", strings["fit"], 200)
    producer = Producer(model, root=tmp_path / "out")
    (tmp_path / "incoming").mkdir()
    d = Daemon(tmp_path, _env(tmp_path, model))
    try:
        d.wait_port()
        producer.write(tmp_path / "incoming" / "old.parquet", [f"old{i}" for i in range(3000)], strings["old"][:3000])
        wait_for(lambda: _processed(tmp_path, 3000), 120, "the old rows", d)
        producer.write(tmp_path / "incoming" / "new.parquet", [f"new{i}" for i in range(2000)], strings["new"])
        wait_for(lambda: _processed(tmp_path, 5000), 120, "the new rows", d)
        assert cli("refit", cwd=tmp_path, env={"STREAMEMBED_OUTPUT__ROOT": str(tmp_path / "out")}).returncode == 0
        wait_for(lambda: bool(producer.pending_requests()), 60, "the refit request", d)
        assert producer.answer_requests() == 1
        wait_for(lambda: (tmp_path / "out" / "models" / "model-v2.npz").exists(), 240, "the refit", d)
        assert producer.refresh(force=True) and producer.version == 2
        # (c) the kit follows: its rows now name version 2
        producer.write(tmp_path / "incoming" / "test.parquet", [f"test{i}" for i in range(1000)], strings["test"])
        # (d) a producer that did not follow: rows against version 1's landmarks, no landmark_version column
        v1 = load_model(model)
        A = v1.dissimilarities_to_landmarks(strings["test"][:500])
        _publish(tmp_path, "stale.parquet", pa.table({"id": [f"stale{i}" for i in range(500)],
                                                      "dissimilarities": list(A)}))
        wait_for(lambda: _processed(tmp_path, 6500), 120, "the rows after the refit", d)
    finally:
        assert d.terminate() == 0
    history = [json.loads(x) for x in (tmp_path / "out" / "model-history.jsonl").read_text().splitlines()]
    assert [h["status"] for h in history][-2:] == ["requested", "installed"], history
    out = _output(tmp_path)
    _, _, versions = _placed(out, "test")
    assert set(versions) == {2}
    stale = out.take([i for i, x in enumerate(out.column("id").to_pylist()) if x.startswith("stale")])
    assert set(stale.column("model_version").to_pylist()) == {1}  # never placed as version 2
    assert (flag_bits(stale) & FLAG_RETAINED_MODEL).all()
    np.testing.assert_allclose(y_matrix(stale), v1.place(A).y, atol=1e-9)
    shutil.rmtree(tmp_path / "incoming")
