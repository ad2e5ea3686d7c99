"""The directory source and the generator source."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from streamembed.config.schema import GeneratorConfig
from streamembed.stream.sources.generator import GaussianMixtureStream, GeneratorSource
from streamembed.stream.sources import DirectorySource

from ..helpers import drain as _drain, fitted_model, input_table, write_parquet

N = 4


def _file(path: Path, ids: list[str]) -> Path:
    return write_parquet(path, input_table(ids, np.ones((len(ids), N), np.float32)))


def test_new_files_are_picked_up_once_and_hidden_or_temp_files_ignored(tmp_path: Path) -> None:
    src = DirectorySource(tmp_path, batch_rows=2, settle_seconds=0.0)
    _file(tmp_path / "a.parquet", ["a0", "a1", "a2"])
    (tmp_path / ".hidden.parquet").write_bytes(b"x")
    (tmp_path / "b.parquet.tmp").write_bytes(b"x")
    batches = _drain(src)
    assert [b.table.num_rows if b.table is not None else 0 for b in batches] == [2, 1, 0]
    pos = batches[-1].position
    assert pos["current"] is None and list(pos["done"]) == ["a.parquet"]
    st = (tmp_path / "a.parquet").stat()
    assert pos["done"]["a.parquet"] == {"sig": [st.st_size, st.st_mtime_ns, st.st_ino], "rows": 3, "tail": None,
                                        "gen": 1}
    assert src.caught_up
    _file(tmp_path / "c.parquet", ["c0"])
    more = _drain(src)
    assert [b.origin.file for b in more] == ["c.parquet", "c.parquet"]
    assert _drain(src) == []


def test_files_still_being_written_wait_for_settle_seconds(tmp_path: Path) -> None:
    src = DirectorySource(tmp_path, settle_seconds=30.0)
    p = _file(tmp_path / "a.parquet", ["a0"])
    assert src.poll() is None
    old = time.time() - 60
    os.utime(p, (old, old))
    assert src.poll() is not None


def test_restore_resumes_inside_the_current_file(tmp_path: Path) -> None:
    _file(tmp_path / "a.parquet", ["a0", "a1", "a2", "a3", "a4"])
    _file(tmp_path / "b.parquet", ["b0"])
    src = DirectorySource(tmp_path, batch_rows=2, settle_seconds=0.0)
    src.restore({"done": ["b.parquet"], "current": {"file": "a.parquet", "row": 2}})
    ids = [i for b in _drain(src) if b.table is not None for i in b.table.column("id").to_pylist()]
    assert ids == ["a2", "a3", "a4"]


def test_labels_are_deterministic_and_file_name_safe(tmp_path: Path) -> None:
    (tmp_path / "sub dir").mkdir()
    _file(tmp_path / "sub dir" / "x.parquet", ["x"])
    src = DirectorySource(tmp_path, pattern="**/*.parquet", settle_seconds=0.0)
    b = src.poll()
    assert b is not None and "/" not in b.label and " " not in b.label and b.label.endswith("r000000000000")


def test_exit_when_idle(tmp_path: Path) -> None:
    src = DirectorySource(tmp_path, settle_seconds=0.0, exit_when_idle=True)
    assert src.poll() is None and src.exhausted


def test_generator_batches_are_deterministic_per_index() -> None:
    spec = GeneratorConfig(seed=5, n_features=6, intrinsic_dims=2)
    a = GeneratorSource(GaussianMixtureStream(spec), batch_rows=8)
    b = GeneratorSource(GaussianMixtureStream(spec), batch_rows=8)
    b.restore({"next_batch": 2})
    for _ in range(2):
        a.poll()
    ta, tb = a.poll(), b.poll()
    assert ta.table.column("id").to_pylist() == tb.table.column("id").to_pylist() \
        == [f"gen-5-{i}" for i in range(16, 24)]
    assert ta.table.column("features").equals(tb.table.column("features"))
    assert ta.position == {"next_batch": 3}


def test_generator_rate_limit_and_max_batches() -> None:
    spec = GeneratorConfig(n_features=3, intrinsic_dims=2)
    src = GeneratorSource(GaussianMixtureStream(spec), batch_rows=10, rate=10.0, max_batches=2)
    assert src.poll() is not None
    assert src.poll() is None and 0 < src.wait_hint() <= 1.0  # the next 10 objects are due in ~1 s
    fast = GeneratorSource(GaussianMixtureStream(spec), batch_rows=10, max_batches=2)
    assert fast.poll() and fast.poll() and fast.poll() is None and fast.exhausted


def test_new_cluster_appears_outside_the_landmarks_span() -> None:
    """Objects of the new component are poorly explained by the map (high unexplained / beta)."""
    from streamembed import LandmarkMDS

    spec = GeneratorConfig(seed=1, n_features=8, intrinsic_dims=2, new_cluster_after=1000, new_cluster_offset=8.0)
    stream = GaussianMixtureStream(spec)
    L = stream.fit_sample(40)
    est = LandmarkMDS(n_components=2).fit_features(L)
    rng = np.random.default_rng(0)
    before = est.embed(est.dissimilarities_to_landmarks(stream.sample(0, 400, rng)))
    after = est.embed(est.dissimilarities_to_landmarks(stream.sample(1000, 400, rng)))
    q_before = np.quantile(before.relative_unexplained, 0.99)
    q_after = np.quantile(after.relative_unexplained, 0.99)
    assert q_after > 10 * q_before


def test_generator_can_emit_dissimilarities() -> None:
    est = fitted_model(features=True)
    spec = GeneratorConfig(n_features=3, intrinsic_dims=2)
    src = GeneratorSource(GaussianMixtureStream(spec), batch_rows=4,
                          to_dissimilarities=est.dissimilarities_to_landmarks)
    t = src.poll().table
    assert t.schema.field("dissimilarities").type.value_type == "float"
