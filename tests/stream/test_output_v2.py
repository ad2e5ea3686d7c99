"""Output schema version 2: the input's precision, flag_bits, per-file constants; version 1 still on request."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.core.flags import FLAG_AMBIGUOUS, FLAG_NAMES, FLAG_RETAINED_MODEL
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.output import (
    FLAG_BITS_KEY,
    LINEAGE_KEY,
    Y_COLUMNS_KEY,
    as_version1,
    encode_output,
    flag_bits,
    flag_names_of,
    schema_version_of,
    y_columns,
    y_matrix,
)
from streamembed.stream.records import SCHEMA_VERSION_KEY, output_schema
from streamembed.stream.sinks import ParquetSink

from .helpers import DIMS, dissimilarities, fitted, input_table, objects


def _batch(m: int = 40, dtype=np.float32, seed: int = 1) -> tuple[pa.Table, np.ndarray]:
    A = dissimilarities(objects(m, seed=seed), dtype=dtype)
    return input_table([f"o{i}" for i in range(m)], A), A


def _result(m: int = 3, d: int = 2, dtype=np.float64, method: str = "projection") -> SimpleNamespace:
    return SimpleNamespace(y=np.arange(m * d, dtype=dtype).reshape(m, d), beta=np.ones(m, dtype),
                           unexplained=np.zeros(m), k0=np.array([np.nan, 0.5, np.nan][:m]), t=np.full(m, np.nan),
                           flags=np.array([0, int(FLAG_AMBIGUOUS), int(FLAG_AMBIGUOUS | FLAG_RETAINED_MODEL)][:m],
                                          np.uint32), method=method)


def _encode(res, version: int, dtype=np.float64, lineage: str | None = "abc") -> pa.RecordBatch:
    m = res.y.shape[0]
    return encode_output(pa.array([f"r{i}" for i in range(m)]), res, model_version=3,
                         event_time=pa.nulls(m, pa.timestamp("us", tz="UTC")), processed_at_us=1_000_000,
                         version=version, dtype=dtype, lineage=lineage,
                         bit_names=[FLAG_NAMES.get(1 << b, f"bit{b}") for b in range(32)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_version_2_columns_types_and_metadata(dtype) -> None:
    out = _encode(_result(dtype=dtype), 2, dtype=dtype)
    want = pa.float32() if dtype == np.float32 else pa.float64()
    assert out.schema.names == ["id", "y0", "y1", "beta", "unexplained", "k0", "t", "unexplained_placed", "radius",
                                "flag_bits", "model_version", "method", "event_time", "processed_at"]
    for name in ("y0", "y1", "beta", "unexplained", "k0", "t"):
        assert out.schema.field(name).type == want, name
    assert out.schema.field("flag_bits").type == pa.int32()
    assert pa.types.is_dictionary(out.schema.field("method").type)
    meta = out.schema.metadata
    assert meta[SCHEMA_VERSION_KEY.encode()] == b"2" and meta[LINEAGE_KEY.encode()] == b"abc"
    assert json.loads(meta[Y_COLUMNS_KEY.encode()]) == ["y0", "y1"]
    assert json.loads(meta[FLAG_BITS_KEY.encode()]) == {name: bit for bit, name in FLAG_NAMES.items()}
    assert out.column("flag_bits").to_pylist() == [0, int(FLAG_AMBIGUOUS), int(FLAG_AMBIGUOUS | FLAG_RETAINED_MODEL)]
    assert out.column("k0").to_pylist() == [None, 0.5, None] and out.column("t").null_count == 3
    assert out.schema.field("radius").type == want and out.column("radius").null_count == 3  # no calibration
    radii = _encode(SimpleNamespace(**{**vars(_result(dtype=dtype)), "radius": np.array([0.0, 0.25, np.nan])}), 2,
                    dtype=dtype)
    assert radii.column("radius").to_pylist() == [0.0, 0.25, None]
    assert schema_version_of(out.schema) == 2 and y_columns(out.schema) == ["y0", "y1"]


def test_version_1_is_written_on_request_unchanged() -> None:
    out = _encode(_result(dtype=np.float32), 1, dtype=np.float32)
    assert out.schema.equals(output_schema(2), check_metadata=True)
    assert out.schema.metadata[SCHEMA_VERSION_KEY.encode()] == b"1"
    assert out.column("flags").to_pylist() == [[], ["ambiguous_sign"], ["ambiguous_sign", "retained_model"]]


def test_both_versions_say_the_same_and_version_2_converts_back_to_version_1() -> None:
    res = _result(dtype=np.float32)
    v1, v2 = _encode(res, 1), _encode(res, 2, dtype=np.float32)
    back = as_version1(v2)
    assert back.schema.equals(output_schema(2))
    for name in ("id", "model_version", "method", "y", "beta", "unexplained", "k0", "t", "flags"):
        assert back.column(name).to_pylist() == v1.column(name).to_pylist(), name
    np.testing.assert_array_equal(y_matrix(v1), y_matrix(v2))
    assert y_matrix(v2).dtype == np.float32
    assert flag_names_of(v1) == flag_names_of(v2)
    np.testing.assert_array_equal(flag_bits(v1), flag_bits(v2))


def test_unknown_method_is_refused_not_miswritten() -> None:
    with pytest.raises(ValueError, match="method"):
        _encode(_result(method="nonsense"), 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedder_writes_the_input_precision_and_the_same_numbers_as_version_1(dtype) -> None:
    model = fitted()
    table, _ = _batch(dtype=dtype)
    v1 = BatchEmbedder(model, output_version=1).process(table).output
    v2 = BatchEmbedder(model, output_version=2).process(table).output
    assert schema_version_of(v1.schema) == 1 and schema_version_of(v2.schema) == 2
    want = pa.float32() if dtype == np.float32 else pa.float64()
    assert v2.schema.field("y0").type == want and v2.schema.field("beta").type == want
    assert y_matrix(v2).shape == (40, DIMS)
    # float32 rows are placed in float32: version 1 widened those values, version 2 stores them exactly
    np.testing.assert_array_equal(y_matrix(v2).astype(np.float64), y_matrix(v1))
    np.testing.assert_array_equal(v2.column("beta").to_numpy().astype(np.float64), v1.column("beta").to_numpy())
    np.testing.assert_allclose(v2.column("unexplained").to_numpy(), v1.column("unexplained").to_numpy(),
                               rtol=1e-6 if dtype == np.float32 else 0, atol=1e-6 if dtype == np.float32 else 0)
    assert v2.schema.metadata[LINEAGE_KEY.encode()].decode() == model.lineage


def test_embedder_with_a_fixed_precision_writes_it_for_every_batch() -> None:
    table32, _ = _batch(dtype=np.float32)
    out = BatchEmbedder(fitted(), output_version=2, output_dtype=np.float64).process(table32).output
    assert out.schema.field("y0").type == pa.float64()


def test_pandas_reads_a_version_2_file_as_a_numeric_matrix_in_one_call(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    model = fitted()
    table, _ = _batch(m=100)
    out = BatchEmbedder(model, output_version=2).process(table).output
    sink = ParquetSink(tmp_path, final_name="out.parquet")
    sink.write(out, "x")
    path = sink.flush("x")
    df = pd.read_parquet(path)
    Y = df.filter(regex=r"^y\d+$").to_numpy()  # the README's recipe
    assert Y.shape == (100, DIMS) and Y.dtype == np.float32
    np.testing.assert_array_equal(Y, y_matrix(out))
    assert str(df["method"].dtype) == "category" and set(df["method"]) == {"projection"}
    assert df["flag_bits"].dtype == np.int32 and df["beta"].dtype == np.float32
    # the file keeps the schema metadata: version, flag bits, lineage
    meta = pq.read_schema(path).metadata
    assert meta[SCHEMA_VERSION_KEY.encode()] == b"2" and FLAG_BITS_KEY.encode() in meta


def test_version_2_file_is_smaller_per_row_than_version_1(tmp_path: Path) -> None:
    model = fitted()
    table, _ = _batch(m=2000)
    sizes = {}
    for version in (1, 2):
        out = BatchEmbedder(model, output_version=version).process(table).output
        sink = ParquetSink(tmp_path / f"v{version}", final_name="out.parquet")
        sink.write(out, "x")
        sizes[version] = sink.flush("x").stat().st_size
    assert sizes[2] < 0.8 * sizes[1], sizes


def test_sink_accepts_only_rows_of_the_open_files_schema(tmp_path: Path) -> None:
    model = fitted()
    t32, _ = _batch(dtype=np.float32)
    t64, _ = _batch(dtype=np.float64)
    emb = BatchEmbedder(model, output_version=2)
    o32, o64 = emb.process(t32).output, emb.process(t64).output
    sink = ParquetSink(tmp_path)
    assert sink.accepts(o32.schema, "a")
    sink.write(o32, "a")
    assert sink.accepts(o32.schema, "a") and not sink.accepts(o64.schema, "a")
    with pytest.raises(ValueError, match="another schema"):
        sink.write(o64, "a")
    other_lineage = o32.replace_schema_metadata({**o32.schema.metadata, LINEAGE_KEY.encode(): b"other"})
    assert not sink.accepts(other_lineage.schema, "a")
    sink.flush("a")
    assert sink.accepts(o64.schema, "b")


def test_the_loop_starts_a_new_file_where_the_input_precision_changes(tmp_path: Path) -> None:
    """float32 Parquet and Arrow files then float64 JSON lines in one roll: every id is written, each file in
    one precision (a roll large enough to hold them all would otherwise mix them)."""
    from collections import Counter

    from streamembed.stream.checkpoint import Checkpointer, CheckpointStore
    from streamembed.stream.loop import EmbeddingLoop, RollPolicy
    from streamembed.stream.read_ahead import ReadAhead
    from streamembed.stream.sinks import DeadLetterSink
    from streamembed.stream.sources import DirectorySource

    from .helpers import read_dead
    from .test_loop import _corpus

    ids, _ = _corpus(tmp_path / "in")
    out = tmp_path / "out"
    src = ReadAhead(DirectorySource(tmp_path / "in", batch_rows=8, settle_seconds=0.0, poll_seconds=0.01,
                                    exit_when_idle=True))
    output, dead = ParquetSink(out / "emb"), DeadLetterSink(out / "dead", source=src.name)
    store = CheckpointStore(out / "ck.json")
    checkpointer = Checkpointer([output, dead], src, store)
    checkpointer.restore(store.load())
    EmbeddingLoop(BatchEmbedder(fitted(), output_version=2), src, output, dead, checkpointer,
                  roll=RollPolicy(10_000, 60.0)).run()
    files = sorted((out / "emb").glob("*.parquet"))
    types = [pq.read_schema(f).field("y0").type for f in files]
    assert set(types) == {pa.float32(), pa.float64()}, types
    got = [i for f in files for i in pq.read_table(f).column("id").to_pylist()]
    assert Counter(got + [d["id"] for d in read_dead(out / "dead")]) == Counter(ids)
    jsonl = [f for f, t in zip(files, types, strict=True) if t == pa.float64()]
    assert {i for f in jsonl for i in pq.read_table(f).column("id").to_pylist()} == {f"j{i}" for i in range(15)}


def test_duckdb_and_pyarrow_read_a_version_2_file(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    table, _ = _batch(m=50)
    out = BatchEmbedder(fitted(), output_version=2).process(table).output
    sink = ParquetSink(tmp_path, final_name="out.parquet")
    sink.write(out, "x")
    path = sink.flush("x")
    n, y0, flagged = duckdb.execute("SELECT count(*), sum(y0), count(*) FILTER (WHERE flag_bits & 1 <> 0) "
                                    "FROM read_parquet(?)", [str(path)]).fetchone()
    assert n == 50 and y0 == pytest.approx(float(y_matrix(out)[:, 0].astype(np.float64).sum()), rel=1e-5)
    assert flagged == int(np.count_nonzero(flag_bits(out) & 1))
