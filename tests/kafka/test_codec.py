"""Kafka message codecs (no broker): Arrow IPC and JSON, single and block messages, headers, refusals."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from scipy.spatial.distance import cdist

from streamembed.kafka.codec import (
    ARROW_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    LANDMARK_VERSION_HEADER,
    SCHEMA_VERSION_HEADER,
    arrow_message,
    decode_message,
    encode_arrow,
    json_message,
    output_arrow_messages,
    output_json_messages,
)
from streamembed.kafka.sink import dead_letter_headers
from streamembed.kafka.batches import Coordinates, KafkaDeadRecord
from streamembed.stream.codecs import DeadRecord, decode_batch
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.records import SCHEMA_VERSION_KEY, Reason
from streamembed.stream.output import flag_names_of, y_matrix

from ..stream.helpers import N_LANDMARKS, dissimilarities, fitted_model, input_table, objects


def _ids(prefix: str, m: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(m)]


def _rows(m: int, seed: int = 1) -> np.ndarray:
    return dissimilarities(objects(m, seed=seed))


# --------------------------------------------------------------------------- Arrow


def test_arrow_message_decodes_zero_copy_into_the_matrix() -> None:
    A = _rows(50)
    value, headers = arrow_message(input_table(_ids("a", 50), A))
    msg = decode_message(value, headers)
    assert msg.content_type == ARROW_CONTENT_TYPE and not msg.block and not msg.dead
    dec = decode_batch(msg.table, n_landmarks=N_LANDMARKS)
    np.testing.assert_array_equal(dec.matrix, A)
    assert dec.matrix.dtype == np.float32
    # the matrix points into the message bytes: nothing was copied
    base = pa.py_buffer(value).address
    assert base <= dec.matrix.__array_interface__["data"][0] < base + len(value)


def test_arrow_message_with_several_record_batches_keeps_every_row() -> None:
    table = input_table(_ids("a", 30), _rows(30))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=7):
            w.write_batch(b)
    msg = decode_message(sink.getvalue().to_pybytes(), [])
    assert msg.n_rows == 30 and msg.table.column("id").to_pylist() == _ids("a", 30)


def test_arrow_block_message_is_one_block_and_embeds_as_a_block() -> None:
    Z = objects(4, seed=9)
    table = input_table(_ids("b", 4), dissimilarities(Z), cross=cdist(Z, Z))
    value, headers = arrow_message(table)
    msg = decode_message(value, headers)
    assert msg.block
    done = BatchEmbedder(fitted_model().model_).process(msg.table)
    out, dead = done.output, done.dead
    assert dead == [] and out.num_rows == 4
    assert all("block" in f for f in flag_names_of(out))


def test_content_type_is_sniffed_when_the_header_is_absent() -> None:
    value, _ = arrow_message(input_table(_ids("a", 3), _rows(3)))
    assert decode_message(value, None).content_type == ARROW_CONTENT_TYPE
    assert decode_message(b'  {"id": "x", "dissimilarities": []}', None).content_type == JSON_CONTENT_TYPE
    refused = decode_message(b"hello", None)
    assert refused.whole and refused.dead[0].reason == Reason.UNDECODABLE and refused.dead[0].raw == b"hello"


@pytest.mark.parametrize("cut", [3, 40, -9])
def test_truncated_arrow_bytes_become_one_dead_letter_with_the_original_bytes(cut: int) -> None:
    value, headers = arrow_message(input_table(_ids("a", 20), _rows(20)))
    broken = value[:cut]
    msg = decode_message(broken, headers)
    assert msg.whole and msg.table is None
    (d,) = msg.dead
    assert d.reason == Reason.UNDECODABLE and d.raw == broken and "Arrow" in d.detail


def test_wrong_schema_version_header_is_refused_whole() -> None:
    value, headers = arrow_message(input_table(_ids("a", 3), _rows(3)), schema_version=2)
    msg = decode_message(value, headers)
    assert msg.whole and msg.dead[0].reason == Reason.UNDECODABLE
    assert SCHEMA_VERSION_HEADER in msg.dead[0].detail and msg.dead[0].raw == value
    # the same check for JSON, and for the Arrow schema's own metadata
    jv, jh = json_message({"id": "x", "dissimilarities": [1.0] * N_LANDMARKS}, schema_version=9)
    assert decode_message(jv, jh).dead[0].reason == Reason.UNDECODABLE
    t = input_table(_ids("a", 3), _rows(3))
    t = t.replace_schema_metadata({SCHEMA_VERSION_KEY: "7"})
    assert decode_message(encode_arrow(t), []).dead[0].reason == Reason.UNDECODABLE


def test_unsupported_content_type_is_refused() -> None:
    msg = decode_message(b"a,b,c", [("Content-Type", b"text/csv")])
    assert msg.whole and "text/csv" in msg.dead[0].detail


def test_landmark_version_header_applies_to_every_row_and_is_checked_downstream() -> None:
    value, headers = arrow_message(input_table(_ids("a", 4), _rows(4)), landmark_version=7)
    msg = decode_message(value, headers)
    assert msg.table.column("landmark_version").to_pylist() == [7] * 4
    dec = decode_batch(msg.table, n_landmarks=N_LANDMARKS, model_version=1)
    assert [d.reason for d in dec.dead] == [Reason.UNKNOWN_LANDMARK_VERSION] * 4
    ok = decode_message(*arrow_message(input_table(_ids("a", 4), _rows(4)), landmark_version=1))
    assert decode_batch(ok.table, n_landmarks=N_LANDMARKS, model_version=1).dead == []
    bad = decode_message(value, [(LANDMARK_VERSION_HEADER, b"seven")])
    assert bad.whole and bad.dead[0].reason == Reason.UNKNOWN_LANDMARK_VERSION


# --------------------------------------------------------------------------- JSON


def test_json_single_object_and_list_messages() -> None:
    A = _rows(3).astype(float)
    one = decode_message(*json_message({"id": "x", "dissimilarities": A[0].tolist(),
                                        "event_time": "2024-05-01T12:00:00Z"}))
    assert one.n_rows == 1 and not one.block and one.content_type == JSON_CONTENT_TYPE
    many = decode_message(*json_message([{"id": f"x{i}", "dissimilarities": a.tolist()} for i, a in enumerate(A)]))
    assert many.table.column("id").to_pylist() == ["x0", "x1", "x2"]
    dec = decode_batch(many.table, n_landmarks=N_LANDMARKS)
    np.testing.assert_allclose(dec.matrix, A)


def test_json_block_message_carries_its_cross_matrix() -> None:
    Z = objects(3, seed=4)
    A, C = dissimilarities(Z).astype(float), cdist(Z, Z)
    doc = {"objects": [{"id": f"b{i}", "dissimilarities": a.tolist()} for i, a in enumerate(A)], "cross": C.tolist()}
    msg = decode_message(*json_message(doc))
    assert msg.block and msg.n_rows == 3
    done = BatchEmbedder(fitted_model().model_).process(msg.table)
    out, dead = done.output, done.dead
    assert dead == [] and out.column("method").to_pylist() == ["block"] * 3


def test_json_block_with_a_bad_cross_matrix_is_refused_whole() -> None:
    doc = {"objects": [{"id": "a", "dissimilarities": [1.0] * N_LANDMARKS}] * 2, "cross": [[0.0, 1.0]]}
    msg = decode_message(*json_message(doc))
    assert msg.whole and msg.dead[0].reason == Reason.BAD_BLOCK


def test_json_bad_rows_inside_a_good_message_are_refused_one_by_one() -> None:
    good = {"id": "g", "dissimilarities": [1.0] * N_LANDMARKS}
    msg = decode_message(*json_message([good, 5, {"id": 3.5, "dissimilarities": []}, good | {"id": "h"}]))
    assert msg.table.column("id").to_pylist() == ["g", "h"]
    assert msg.rows.tolist() == [0, 3]  # each kept row's index within the message
    assert [(d.reason, d.row) for d in msg.dead] == [(Reason.UNDECODABLE, 1), (Reason.BAD_ID, 2)]


@pytest.mark.parametrize("value", [b"{not json", b"\xff\xfe{}", b'"a string"'])
def test_undecodable_json_is_refused_whole(value: bytes) -> None:
    msg = decode_message(value, [("content-type", b"application/json")])
    assert msg.whole and msg.dead[0].reason == Reason.UNDECODABLE and msg.dead[0].raw == value


def test_empty_message_is_refused() -> None:
    assert decode_message(None, []).dead[0].reason == Reason.UNDECODABLE


# --------------------------------------------------------------------------- output and dead letters


def _output(m: int):
    table = input_table(_ids("o", m), _rows(m))
    out = BatchEmbedder(fitted_model().model_).process(table).output
    return out


def test_output_arrow_messages_split_under_the_size_limit_keyed_by_first_id() -> None:
    out = _output(300)
    msgs = list(output_arrow_messages(out, max_bytes=8192))
    assert len(msgs) > 1 and all(len(v) <= 8192 for _, v, _ in msgs)
    ids: list[str] = []
    for key, value, headers in msgs:
        t = pa.ipc.open_stream(value).read_all()
        assert key == t.column("id")[0].as_py().encode()
        assert dict(headers)["content-type"] == ARROW_CONTENT_TYPE.encode()
        ids += t.column("id").to_pylist()
    assert ids == _ids("o", 300)


def test_output_json_messages_one_per_row_keyed_by_id() -> None:
    out = _output(5)
    msgs = list(output_json_messages(out))
    assert [k for k, _, _ in msgs] == [f"o{i}".encode() for i in range(5)]
    doc = json.loads(msgs[0][1])
    assert doc["model_version"] == 1 and [doc["y0"], doc["y1"]] == y_matrix(out)[0].tolist() and doc["k0"] is None
    assert dict(msgs[0][2])["streamembed-model-version"] == b"1"


def test_dead_letter_headers_name_reason_and_source_coordinates() -> None:
    whole = KafkaDeadRecord(Reason.UNDECODABLE, "truncated", raw=b"xx", topic="in", partition=3, offset=41,
                            content_type=ARROW_CONTENT_TYPE)
    h = dict(dead_letter_headers(whole, whole, model_version=2, failed_at="t"))
    assert h["streamembed-error-reason"] == b"undecodable" and h["streamembed-error-detail"] == b"truncated"
    assert (h["streamembed-source-topic"], h["streamembed-source-partition"], h["streamembed-source-offset"]) == \
        (b"in", b"3", b"41")
    assert "streamembed-source-row" not in h and h["content-type"] == ARROW_CONTENT_TYPE.encode()
    row = DeadRecord(Reason.NEGATIVE, "negative: A[0, 1] = -1", id="o7", record='{"id": "o7"}')
    h = dict(dead_letter_headers(row, Coordinates("in", 1, 9, 7), model_version=2, failed_at="t"))
    assert h["streamembed-source-row"] == b"7" and h["streamembed-id"] == b"o7"
    assert h["content-type"] == JSON_CONTENT_TYPE.encode() and h["streamembed-model-version"] == b"2"


# --------------------------------------------------------------------------- named landmark orders


def _named_model() -> Any:
    from streamembed import LandmarkMDS

    from ..stream.helpers import landmark_points

    L = landmark_points()
    return LandmarkMDS().fit(cdist(L, L), landmark_ids=[f"mol-{i}" for i in range(N_LANDMARKS)]).model_


def _y(processed: Any) -> dict[str, np.ndarray]:
    out = processed.output
    return dict(zip(out.column("id").to_pylist(), y_matrix(out), strict=True))


def test_messages_name_their_landmark_order_and_a_permutation_embeds_bit_identically() -> None:
    """An Arrow message with field metadata, a JSON message with a shared order, JSON objects with their own."""
    from streamembed.stream.landmark_order import order_metadata

    model = _named_model()
    ids = [str(x) for x in model.landmark_ids]
    perm = np.random.default_rng(5).permutation(N_LANDMARKS)
    named = [ids[p] for p in perm]
    A = _rows(6).astype(np.float64)
    emb = BatchEmbedder(model)
    want = _y(emb.process(input_table(_ids("r", 6), A, event_time=False)))
    t = input_table(_ids("r", 6), A[:, perm], event_time=False)
    field = t.schema.field("dissimilarities").with_metadata(order_metadata(named))
    t = t.cast(pa.schema([t.schema.field("id"), field]))
    messages = [arrow_message(t),
                json_message({"objects": [{"id": f"r{i}", "dissimilarities": a[perm].tolist()} for i, a in
                                          enumerate(A)], "landmarks": named}),
                json_message([{"id": f"r{i}", "dissimilarities": a[perm].tolist(), "landmarks": named}
                              for i, a in enumerate(A)])]
    for value, headers in messages:
        msg = decode_message(value, headers)
        got = _y(emb.process(msg.table))
        assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)


def test_a_message_order_that_is_not_a_permutation_is_refused_as_landmark_mismatch() -> None:
    model = _named_model()
    A = _rows(3).astype(np.float64)
    own = [None, ["mol-0"] * N_LANDMARKS, None]  # the second object names mol-0 twelve times
    value, headers = json_message({"objects": [{"id": f"r{i}", "dissimilarities": a.tolist(),
                                                **({"landmarks": o} if o else {})} for i, (a, o) in
                                               enumerate(zip(A, own, strict=True))],
                                   "landmarks": [f"mol-{i}" for i in range(N_LANDMARKS - 1)] + ["other"]})
    p = BatchEmbedder(model).process(decode_message(value, headers).table)
    assert p.n_out == 0 and [(d.row, d.reason) for d in p.dead] == [(i, Reason.LANDMARK_MISMATCH) for i in range(3)]
    assert "'other'" in p.dead[0].detail and "'mol-0' 12 times" in p.dead[1].detail


def test_consecutive_messages_naming_different_orders_do_not_share_a_batch() -> None:
    """Concatenated tables keep the first schema's metadata: the second message's order would be lost."""
    from collections import namedtuple

    from streamembed.kafka.batches import cut_batches
    from streamembed.stream.landmark_order import order_metadata

    Rec = namedtuple("Rec", "offset value headers")
    A = _rows(4)
    t = input_table(_ids("r", 4), A, event_time=False)
    f = t.schema.field("dissimilarities")
    ids = [f"mol-{i}" for i in range(N_LANDMARKS)]
    orders = [ids, ids[::-1], ids[::-1], None]
    recs = []
    for k, o in enumerate(orders):
        schema = pa.schema([t.schema.field("id"), f.with_metadata(order_metadata(o) if o else None)])
        recs.append(Rec(k, *arrow_message(t.cast(schema))))
    batches = cut_batches(0, recs, 1000, lambda d, *a: d)
    assert [q.offsets for q in batches] == [[0], [1, 2], [3]]


def test_json_integer_ids_are_embedded_under_their_decimal_text() -> None:
    """A plain producer's {"id": 12345, ...} is embedded as id "12345", not dead-lettered as bad_id."""
    A = dissimilarities(objects(3, seed=5)).astype(float)
    msg = decode_message(*json_message([{"id": 10 + i, "dissimilarities": A[i].tolist()} for i in range(3)]))
    assert not msg.dead and msg.table.column("id").to_pylist() == ["10", "11", "12"]
    done = BatchEmbedder(fitted_model().model_).process(msg.table)
    assert done.dead == [] and done.output.column("id").to_pylist() == ["10", "11", "12"]
