"""Every reader of output in the repo reads version 2 as it reads version 1: embed, the map view, plot, Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.cli import main
from streamembed.ops.map_view import MapView
from streamembed.kafka.codec import (
    SCHEMA_VERSION_HEADER,
    output_arrow_messages,
    output_json_messages,
)
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.registry import ModelRegistry
from streamembed.stream.output import (
    as_version1,
    flag_names_of,
    schema_version_of,
    y_matrix,
)
from streamembed.stream.records import SCHEMA_VERSION_KEY

from ..stream.helpers import dissimilarities, fitted, fitted_model, input_table, objects


def _tables(m: int, dtypes=(np.float32,)) -> list[pa.Table]:
    A = dissimilarities(objects(m * len(dtypes), seed=5), dtype=np.float64)
    return [input_table([f"o{k}-{i}" for i in range(m)], A[k * m:(k + 1) * m].astype(dt))
            for k, dt in enumerate(dtypes)]


@pytest.mark.parametrize("version", [1, 2])
def test_embed_writes_the_version_asked_for_with_the_same_coordinates(tmp_path: Path, version: int) -> None:
    est = fitted_model()
    est.save(tmp_path / "m.npz")
    (t32,) = _tables(60)
    pq.write_table(t32, tmp_path / "in.parquet")
    args = ["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o", str(tmp_path / "out.parquet"),
            "--batch-rows", "16", "--schema-version", str(version)]
    assert main(args) == 0
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.schema.metadata[SCHEMA_VERSION_KEY.encode()] == str(version).encode()
    Y = y_matrix(out)
    assert Y.dtype == (np.float32 if version == 2 else np.float64)
    A = np.array(t32.column("dissimilarities").to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(Y, est.transform(A), rtol=1e-5, atol=1e-6)


def test_embed_of_float32_and_float64_inputs_writes_one_float64_file(tmp_path: Path) -> None:
    fitted_model().save(tmp_path / "m.npz")
    t32, t64 = _tables(20, (np.float32, np.float64))
    pq.write_table(t32, tmp_path / "a.parquet")
    pq.write_table(t64, tmp_path / "b.parquet")
    assert main(["embed", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "-m", str(tmp_path / "m.npz"),
                 "-o", str(tmp_path / "out.parquet"), "--schema-version", "2"]) == 0
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.num_rows == 40 and out.schema.field("y0").type == pa.float64()


def test_embed_refuses_an_unknown_schema_version(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["embed", "x.parquet", "-m", "m.npz", "-o", "o.parquet", "--schema-version", "3"])
    assert exc.value.code == 2


def test_the_map_view_samples_version_2_rows_of_both_precisions_as_version_1() -> None:
    model = fitted()
    tables = _tables(50, (np.float32, np.float64, np.float32))
    docs = {}
    for version in (1, 2):
        view, emb = MapView(ModelRegistry(model), points=120), BatchEmbedder(model, output_version=version, k0_rows=4)
        for t in tables:
            view.observe(emb.process(t))
        docs[version] = view.snapshot()["sample"]
    s1, s2 = docs[1], docs[2]
    assert s2["count"] == s1["count"] == 120 and s2["id"] == s1["id"] and s2["flags"] == s1["flags"]
    np.testing.assert_allclose(s2["x"], s1["x"], rtol=5e-5, atol=1e-12)
    np.testing.assert_allclose(s2["y"], s1["y"], rtol=5e-5, atol=1e-12)
    np.testing.assert_allclose(np.array(s2["beta"], float), np.array(s1["beta"], float), rtol=1e-5)


def test_plot_reads_the_coordinates_of_either_version(tmp_path: Path) -> None:
    from streamembed.cli.plot import read_embedded

    model = fitted()
    (t,) = _tables(30)
    for version in (1, 2):
        out = BatchEmbedder(model, output_version=version).process(t).output
        pq.write_table(pa.Table.from_batches([out]), tmp_path / f"v{version}.parquet")
    r1, r2 = read_embedded(str(tmp_path / "v1.parquet")), read_embedded(str(tmp_path / "v2.parquet"))
    assert r2["y"].shape == (30, 2) and r2["y"].dtype == np.float64
    np.testing.assert_array_equal(r1["y"], r2["y"])
    assert list(r1["id"]) == list(r2["id"])
    np.testing.assert_allclose(r1["relative_unexplained"], r2["relative_unexplained"], rtol=1e-5, atol=1e-7)


def test_kafka_output_messages_carry_the_version_and_its_columns() -> None:
    model = fitted()
    (t,) = _tables(40)
    out = BatchEmbedder(model, output_version=2).process(t).output
    msgs = list(output_arrow_messages(out, max_bytes=4096))
    assert len(msgs) > 1 and all(dict(h)[SCHEMA_VERSION_HEADER] == b"2" for _, _, h in msgs)
    back = pa.concat_tables([pa.ipc.open_stream(v).read_all() for _, v, _ in msgs])
    assert schema_version_of(back.schema) == 2  # the schema metadata (flag bits, lineage) travels with each message
    np.testing.assert_array_equal(y_matrix(back), y_matrix(out))
    assert flag_names_of(back) == flag_names_of(out)
    v1 = as_version1(out)
    key, value, headers = next(output_json_messages(out))
    doc = json.loads(value)
    assert key == b"o0-0" and dict(headers)[SCHEMA_VERSION_HEADER] == b"2"
    assert doc["method"] == "projection" and doc["flag_bits"] == 0 and "flags" not in doc and "y" not in doc
    assert [doc["y0"], doc["y1"]] == v1.column("y")[0].as_py()
    key, value, headers = next(output_json_messages(BatchEmbedder(model, output_version=1).process(t).output))
    assert dict(headers)[SCHEMA_VERSION_HEADER] == b"1" and len(json.loads(value)["y"]) == 2


def test_backfill_tasks_write_version_2_parts_in_the_data_sets_precision(tmp_path: Path) -> None:
    from streamembed.jobs.backfill import plan, run_task
    from streamembed.model_io import model_to_bytes
    from streamembed.stream.input_precision import common_precision

    est = fitted_model()
    t32, t64 = _tables(30, (np.float32, np.float64))
    pq.write_table(t32, tmp_path / "a.parquet")
    pq.write_table(t64, tmp_path / "b.parquet")
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    precision = common_precision(paths)
    assert precision == np.float64 and common_precision(paths[:1]) == np.float32
    out = tmp_path / "out"
    (out / "dead-letter").mkdir(parents=True)
    results = [run_task(t, model_to_bytes(est.model_), str(out), schema_version=2, precision=precision.name)
               for t in plan(paths)]
    parts = [pq.read_table(r.output) for r in results]
    assert [p.schema.field("y0").type for p in parts] == [pa.float64(), pa.float64()]  # one data set, one schema
    A = np.array(t32.column("dissimilarities").to_pylist() + t64.column("dissimilarities").to_pylist())
    np.testing.assert_allclose(np.concatenate([y_matrix(p) for p in parts]), est.transform(A), rtol=1e-5, atol=1e-6)


def test_the_daemon_writes_the_configured_output_version(tmp_path: Path) -> None:
    import pyarrow.dataset as ds

    from streamembed.daemon.app import run_daemon
    from streamembed.config import load_config

    root = Path(__file__).resolve().parents[2]
    for asked, version in ((None, 2), (1, 1), (2, 2)):  # None: the default
        out = tmp_path / f"asked-{asked}"
        cfg = load_config(root / "config" / "restricted.toml", environ={}, overrides={
            "output.root": str(out), "metrics.enabled": False, "run.max_batches": 2, "source.batch_rows": 256,
            "generator.rate": 0.0, "model.n_landmarks": 60, **({} if asked is None else
                                                                 {"output.schema_version": asked})})
        assert cfg.output.schema_version == version
        assert run_daemon(cfg) == 0
        files = sorted((out / "embeddings").glob("*.parquet"))
        assert files and {schema_version_of(pq.read_schema(f)) for f in files} == {version}
        table = ds.dataset(out / "embeddings").to_table()
        assert y_matrix(table).shape == (512, 2) and np.isfinite(y_matrix(table)).all()
        assert set(as_version1(table).column("method").to_pylist()) == {"restricted"}
