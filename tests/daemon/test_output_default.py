"""Output version 2 is the default everywhere output is written; version 1 is written on request, and every file
and Kafka message states its version (README, "Record formats": no output byte changes meaning without it)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.jobs.backfill import backfill, run_task
from streamembed.cli import build_parser, main
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.codec import SCHEMA_VERSION_HEADER
from streamembed.kafka.sink import KafkaOutputSink
from streamembed.config.schema import OutputConfig
from streamembed.stream.codecs import encode_result
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.output import DEFAULT_OUTPUT_VERSION, flag_names_of, schema_version_of, y_columns, y_matrix
from streamembed.stream.records import SCHEMA_VERSION_KEY

from ..kafka.test_sizes_unit import LimitedProducer
from ..stream.helpers import DIMS, dissimilarities, fitted, fitted_model, input_table, objects


def _embed_file(tmp_path: Path, *version_args: str) -> tuple[Path, np.ndarray, object]:
    """``streamembed embed`` of 60 float32 rows; (output path, the rows, the estimator)."""
    est = fitted_model()
    est.save(tmp_path / "m.npz")
    A = dissimilarities(objects(60, seed=7))
    pq.write_table(input_table([f"o{i}" for i in range(60)], A), tmp_path / "in.parquet")
    out = tmp_path / "out.parquet"
    assert main(["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o", str(out),
                 "--batch-rows", "16", *version_args]) == 0
    return out, A, est


def _default(fn, name: str):
    return inspect.signature(fn).parameters[name].default


def test_version_2_is_the_default_of_every_writer() -> None:
    embed_args = build_parser().parse_args(["embed", "x.parquet", "-m", "m.npz", "-o", "o.parquet"])
    defaults = {
        "stream.output": DEFAULT_OUTPUT_VERSION,
        "output.schema_version": OutputConfig().schema_version,
        "embed --schema-version": embed_args.schema_version,
        "BatchEmbedder": BatchEmbedder(fitted()).output_version,
        "encode_result": _default(encode_result, "version"),
        "backfill": _default(backfill, "schema_version"),
        "backfill task": _default(run_task, "schema_version"),
    }
    assert defaults == dict.fromkeys(defaults, 2)


def test_embed_by_default_writes_a_file_pandas_reads_as_a_numeric_matrix_in_one_call(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    path, A, est = _embed_file(tmp_path)
    Y = pd.read_parquet(path).filter(regex=r"^y\d+$").to_numpy()  # the README's recipe
    assert Y.shape == (60, DIMS) and Y.dtype == np.float32  # float32 rows: float32 coordinates
    np.testing.assert_allclose(Y, est.transform(A), rtol=1e-5, atol=1e-6)
    assert y_columns(pq.read_schema(path)) == [f"y{j}" for j in range(DIMS)]


def test_duckdb_reads_the_default_file(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    path, A, est = _embed_file(tmp_path)
    rows = duckdb.execute("SELECT id, y0, y1, flag_bits FROM read_parquet(?) ORDER BY id", [str(path)]).fetchall()
    want = dict(zip([f"o{i}" for i in range(60)], est.transform(A).tolist(), strict=True))
    assert len(rows) == 60
    for rid, y0, y1, bits in rows:
        np.testing.assert_allclose([y0, y1], want[rid], rtol=1e-5, atol=1e-6)
        assert bits >= 0


@pytest.mark.parametrize(("args", "version"), [((), 2), (("--schema-version", "1"), 1),
                                               (("--schema-version", "2"), 2)])
def test_the_output_file_states_its_version(tmp_path: Path, args: tuple[str, ...], version: int) -> None:
    path, A, est = _embed_file(tmp_path, *args)
    table = pq.read_table(path)
    assert table.schema.metadata[SCHEMA_VERSION_KEY.encode()] == str(version).encode()
    assert ("y" in table.column_names) == (version == 1) and ("flag_bits" in table.column_names) == (version == 2)
    np.testing.assert_allclose(y_matrix(table), est.transform(A), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fmt", ["arrow", "json"])
@pytest.mark.parametrize(("asked", "version"), [(None, 2), (1, 1), (2, 2)])
def test_every_kafka_output_message_states_its_version(fmt: str, asked: int | None, version: int) -> None:
    fake = LimitedProducer(client=1 << 30, broker=1 << 30)
    sink = KafkaOutputSink(ReliableProducer({}, factory=lambda **s: fake), "out", fmt=fmt, max_message_bytes=8192)
    emb = BatchEmbedder(fitted()) if asked is None else BatchEmbedder(fitted(), output_version=asked)
    out = emb.process(input_table([f"o{i}" for i in range(300)], dissimilarities(objects(300, seed=8)))).output
    sink.write(out, "l")
    sink.flush("l")
    assert len(fake.sent) > 1 and all(dict(h)[SCHEMA_VERSION_HEADER] == str(version).encode()
                                      for _, _, _, h in fake.sent)
    if fmt == "arrow":
        back = pa.concat_tables([pa.ipc.open_stream(v).read_all() for _, _, v, _ in fake.sent])
        assert schema_version_of(back.schema) == version  # and the schema metadata says it too
        np.testing.assert_array_equal(y_matrix(back), y_matrix(out))
        assert flag_names_of(back) == flag_names_of(out)
        return
    docs = [json.loads(v) for _, _, v, _ in fake.sent]
    assert [d["id"] for d in docs] == out.column("id").to_pylist()
    if version == 1:
        assert all(len(d["y"]) == DIMS and isinstance(d["flags"], list) for d in docs)
    else:
        assert all("y" not in d and "flags" not in d and isinstance(d["flag_bits"], int) for d in docs)
        np.testing.assert_array_equal([[d[f"y{j}"] for j in range(DIMS)] for d in docs], y_matrix(out))
