"""Decoding input batches and encoding results: vectorised, zero-copy, strict."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from streamembed.core.validation import PROBLEM_CODES
from streamembed.stream.codecs import decode_batch, encode_dead_letters, encode_result, flags_to_lists
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.records import REASONS, SCHEMA_VERSION_KEY, Reason, dead_letter_schema, output_schema

from .helpers import input_table, list_column

N = 5


def _A(m: int, dtype=np.float32) -> np.ndarray:
    return (np.arange(m * N, dtype=np.float64).reshape(m, N) + 1).astype(dtype)


@pytest.mark.parametrize("fixed", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_happy_path_is_zero_copy_and_keeps_the_dtype(fixed: bool, dtype) -> None:
    A = _A(4, dtype)
    table = input_table(["a", "b", "c", "d"], A, fixed=fixed)
    dec = decode_batch(table, n_landmarks=N)
    assert dec.dead == []
    assert dec.matrix.dtype == dtype
    np.testing.assert_array_equal(dec.matrix, A)
    values = table.column("dissimilarities").chunk(0).flatten()
    assert np.shares_memory(dec.matrix, values.to_numpy(zero_copy_only=True))
    assert dec.ids.to_pylist() == ["a", "b", "c", "d"]
    assert dec.index.tolist() == [0, 1, 2, 3]


def test_sliced_batch_decodes_its_own_rows() -> None:
    A = _A(6)
    table = input_table(list("abcdef"), A).slice(2, 3)
    dec = decode_batch(table, n_landmarks=N, row_base=2)
    np.testing.assert_array_equal(dec.matrix, A[2:5])


def test_null_list_slot_is_rejected_before_flattening_so_rows_do_not_shift() -> None:
    A = _A(3)
    col = pa.array([A[0].tolist(), None, A[2].tolist()], pa.list_(pa.float32(), N))
    table = pa.table({"id": ["a", "b", "c"], "dissimilarities": col})
    dec = decode_batch(table, n_landmarks=N)
    np.testing.assert_array_equal(dec.matrix, A[[0, 2]])
    assert dec.ids.to_pylist() == ["a", "c"]
    assert [(d.id, d.reason, d.row) for d in dec.dead] == [("b", Reason.MISSING_VECTOR, 1)]


def test_wrong_lengths_found_from_offsets() -> None:
    rows = [[1.0] * N, [1.0] * (N - 1), [1.0] * (N + 2), [2.0] * N]
    table = pa.table({"id": list("abcd"), "dissimilarities": pa.array(rows, pa.list_(pa.float64()))})
    dec = decode_batch(table, n_landmarks=N, file="f.parquet", row_base=10)
    assert dec.ids.to_pylist() == ["a", "d"]
    assert [(d.id, d.reason, d.row, d.file) for d in dec.dead] == [
        ("b", Reason.WRONG_LENGTH, 11, "f.parquet"), ("c", Reason.WRONG_LENGTH, 12, "f.parquet")]
    assert "4 values, expected 5" in dec.dead[0].detail
    assert json.loads(dec.dead[0].record)["id"] == "b"


def test_fixed_size_list_of_the_wrong_size_rejects_every_row() -> None:
    table = input_table(["a", "b"], _A(2)[:, :4])
    dec = decode_batch(table, n_landmarks=N)
    assert dec.matrix.shape == (0, N)
    assert {d.reason for d in dec.dead} == {Reason.WRONG_LENGTH}


def test_missing_and_empty_ids() -> None:
    table = input_table(["a", None, "", "d"], _A(4))
    dec = decode_batch(table, n_landmarks=N)
    assert dec.ids.to_pylist() == ["a", "d"]
    assert [d.reason for d in dec.dead] == [Reason.MISSING_ID] * 2
    no_id = pa.table({"dissimilarities": list_column(_A(2))})
    assert [d.reason for d in decode_batch(no_id, n_landmarks=N).dead] == [Reason.MISSING_ID] * 2


def test_non_numeric_values_and_non_list_columns() -> None:
    t1 = pa.table({"id": ["a"], "dissimilarities": pa.array([["x"] * N])})
    assert decode_batch(t1, n_landmarks=N).dead[0].reason == Reason.NON_NUMERIC
    t2 = pa.table({"id": ["a"], "dissimilarities": pa.array(["1,2,3"])})
    assert decode_batch(t2, n_landmarks=N).dead[0].reason == Reason.UNDECODABLE


def test_integer_values_are_accepted_as_float64() -> None:
    t = pa.table({"id": ["a"], "dissimilarities": pa.array([[1, 2, 3, 4, 5]])})
    dec = decode_batch(t, n_landmarks=N)
    assert dec.matrix.dtype == np.float64 and dec.dead == []


def test_null_elements_become_nan_for_the_core_to_reject() -> None:
    t = pa.table({"id": ["a"], "dissimilarities": pa.array([[1.0, None, 3.0, 4.0, 5.0]])})
    dec = decode_batch(t, n_landmarks=N)
    assert np.isnan(dec.matrix[0, 1])


def test_unknown_landmark_version() -> None:
    t = input_table(["a", "b", "c"], _A(3)).append_column("landmark_version", pa.array([1, None, 7], pa.int64()))
    dec = decode_batch(t, n_landmarks=N, model_version=1)
    assert dec.ids.to_pylist() == ["a", "b"]
    assert [(d.id, d.reason) for d in dec.dead] == [("c", Reason.UNKNOWN_LANDMARK_VERSION)]
    assert "7" in dec.dead[0].detail


def test_features_need_a_feature_model() -> None:
    t = pa.table({"id": ["a"], "features": pa.array([[1.0, 2.0, 3.0]])})
    assert decode_batch(t, n_landmarks=N).dead[0].reason == Reason.UNDECODABLE
    dec = decode_batch(t, n_landmarks=N, n_features=3)
    assert dec.kind == "features" and dec.matrix.shape == (1, 3)


def test_event_time_strings_and_naive_timestamps_become_utc() -> None:
    t = pa.table({"id": ["a", "b"], "dissimilarities": list_column(_A(2)),
                  "event_time": pa.array(["2024-01-01T00:00:00Z", "2024-01-01T00:00:01"])})
    dec = decode_batch(t, n_landmarks=N)
    assert dec.event_time.type == pa.timestamp("us", tz="UTC")
    assert [x.value for x in dec.event_time] == [1704067200000000, 1704067201000000]
    bad = t.set_column(2, "event_time", pa.array(["yesterday", "x"]))
    assert {d.reason for d in decode_batch(bad, n_landmarks=N).dead} == {Reason.UNDECODABLE}


def test_block_cross_is_decoded() -> None:
    A = _A(3)
    C = np.array([[0, 1, 2], [1, 0, 3], [2, 3, 0]], dtype=np.float32)
    dec = decode_batch(input_table(["a", "b", "c"], A, cross=C), n_landmarks=N)
    assert dec.blocks is not None and dec.blocks.sizes.tolist() == [3] and dec.blocks.rows.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(dec.blocks.cross[0], C)


def test_block_with_a_bad_member_is_dead_lettered_whole() -> None:
    A = _A(3)
    C = np.array([[0, 1, 2], [1, 0, 3], [2, 3, 0]], dtype=np.float32)
    dec = decode_batch(input_table(["a", None, "c"], A, cross=C), n_landmarks=N)
    assert dec.matrix.shape[0] == 0 and dec.blocks is None
    assert [d.reason for d in dec.dead] == [Reason.BAD_BLOCK, Reason.MISSING_ID, Reason.BAD_BLOCK]


def test_block_with_wrong_cross_width_or_too_many_rows() -> None:
    A = _A(3)
    C = np.zeros((3, 2), dtype=np.float32)
    dec = decode_batch(input_table(["a", "b", "c"], A, cross=C), n_landmarks=N)
    assert {d.reason for d in dec.dead} == {Reason.BAD_BLOCK}
    C3 = np.zeros((3, 3), dtype=np.float32)
    dec = decode_batch(input_table(["a", "b", "c"], A, cross=C3), n_landmarks=N, max_block_rows=2)
    assert {d.reason for d in dec.dead} == {Reason.BAD_BLOCK} and "max_block_rows" in dec.dead[0].detail


def test_every_problem_code_of_the_core_is_a_dead_letter_reason() -> None:
    assert set(PROBLEM_CODES) <= set(REASONS)


def test_flags_to_lists_in_bit_order() -> None:
    names = [f"f{b}" for b in range(32)]
    arr = flags_to_lists(np.array([0, 1, 6, 0, 1 << 31], dtype=np.uint32), names)
    assert arr.to_pylist() == [[], ["f0"], ["f1", "f2"], [], ["f31"]]
    assert flags_to_lists(np.zeros(3, np.uint32), names).to_pylist() == [[], [], []]


def test_encode_result_matches_the_output_schema() -> None:
    from types import SimpleNamespace

    m, d = 3, 2
    res = SimpleNamespace(y=np.arange(6.0).reshape(m, d), beta=np.ones(m), unexplained=np.zeros(m),
                          k0=np.array([np.nan, 0.5, np.nan]), t=np.full(m, np.nan),
                          flags=np.array([0, 1, 0], np.uint32), method="projection")
    out = encode_result(pa.array(["a", "b", "c"]), res, model_version=3,
                        event_time=pa.nulls(m, pa.timestamp("us", tz="UTC")), processed_at_us=1_000_000,
                        bit_names=[f"f{b}" for b in range(32)])
    assert out.schema.equals(output_schema(d))
    assert out.schema.metadata[SCHEMA_VERSION_KEY.encode()] == b"1"
    rows = out.to_pylist()
    assert rows[1]["k0"] == 0.5 and rows[0]["k0"] is None and rows[0]["t"] is None
    assert rows[2]["y"] == [4.0, 5.0] and rows[1]["flags"] == ["f0"] and rows[0]["model_version"] == 3
    assert rows[0]["unexplained_placed"] is None  # projection: it would be `unexplained` again
    res.method = "restricted"
    res.unexplained_placed, res.t = np.array([0.25, -1.0, np.nan]), np.array([-0.25, 1.0, 0.0])
    rows = encode_result(pa.array(["a", "b", "c"]), res, model_version=3,
                         event_time=pa.nulls(m, pa.timestamp("us", tz="UTC")), processed_at_us=1_000_000,
                         bit_names=[f"f{b}" for b in range(32)]).to_pylist()
    assert [r["unexplained_placed"] for r in rows] == [0.25, -1.0, None] and rows[0]["unexplained"] == 0.0


def test_dead_letters_keep_the_raw_record() -> None:
    t = encode_dead_letters([DeadRecord(Reason.UNDECODABLE, "not UTF-8", file="x.jsonl", row=3, raw=b"\xff\xfe")],
                            source="files", model_version=1, failed_at_us=0)
    assert t.schema.equals(dead_letter_schema())
    row = t.to_pylist()[0]
    assert row["raw"] == b"\xff\xfe" and row["row"] == 3 and row["id"] is None
