"""Message sizes against in-memory fakes: output split until it fits, rows no message can hold refused as dead
letters, dead letters cut to fit with the whole record kept in a file, and a broker that refuses a size the
sinks did not know about. The broker tests (test_oversize.py) run the same through the real daemon."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from kafka.errors import MessageSizeTooLargeError

from streamembed.kafka.client import KafkaDeliveryError
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.limits import FULL_RECORD_HEADER, TRUNCATED_HEADER, fit_header, fits, message_size
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.kafka.batches import KafkaDeadRecord
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.records import Reason
from streamembed.stream.sinks import DeadLetterSink, PerLabelSink, dead_letter_path

from ..stream.helpers import dissimilarities, fitted, input_table, objects
from .test_source_unit import FakeFuture


class LimitedProducer:
    """A kafka-python producer stand-in: refuses at send what exceeds ``client`` bytes (as kafka-python does) and
    fails the future of what exceeds ``broker`` bytes (as a broker with a lower message.max.bytes does)."""

    def __init__(self, client: int, broker: int) -> None:
        self.client, self.broker = client, broker
        self.sent: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]]]] = []

    def send(self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None) -> FakeFuture:
        size = message_size(key, value, headers or [])
        if size > self.client:
            raise MessageSizeTooLargeError(f"The message is {size} bytes when serialized")
        if size > self.broker:
            return FakeFuture(MessageSizeTooLargeError("MESSAGE_SIZE_TOO_LARGE"))
        self.sent.append((topic, key, value, list(headers or [])))
        return FakeFuture(None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float = 0) -> None:
        pass


def _output(ids: list[str]) -> pa.Table:
    from streamembed.stream.embedder import BatchEmbedder

    model = fitted()
    t = input_table(ids, dissimilarities(objects(len(ids), seed=4)))
    return BatchEmbedder(model).process(t).output


def _rows(sent: list[Any], topic: str) -> list[str]:
    return [x for t, _, v, _ in sent if t == topic for x in pa.ipc.open_stream(v).read_all().column("id").to_pylist()]


def test_output_is_split_until_every_message_fits_and_a_row_no_message_holds_is_a_dead_letter() -> None:
    fake = LimitedProducer(client=60_000, broker=1 << 30)
    producer = ReliableProducer({}, factory=lambda **s: fake)
    refused: list[tuple[list[DeadRecord], Any, str]] = []
    sink = KafkaOutputSink(producer, "out", max_message_bytes=60_000, refuse=lambda d, v, lab: refused.append((d, v,
                                                                                                             lab)))
    ids = [f"r{i}" for i in range(400)]
    ids[7] = "huge-" + "x" * 100_000  # one row whose message cannot fit whatever the split
    ids[300] = "big-" + "y" * 20_000  # large, but fits alone: the estimate from the average row size is wrong here
    sink.write(_output(ids), "kafka-in-p0-o000000000007")
    sink.flush("x")
    assert sorted(_rows(fake.sent, "out")) == sorted(i for i in ids if not i.startswith("huge"))
    assert all(fits(k, v, h, 60_000) for _, k, v, h in fake.sent)
    (dead, version, label), = refused
    assert label == "kafka-in-p0-o000000000007" and version == fitted().version
    assert [(d.reason, d.id) for d in dead] == [(Reason.TOO_LARGE, ids[7])]
    assert "60,000" in dead[0].detail and json.loads(dead[0].record)["id"] == ids[7]


def test_a_size_the_broker_refuses_lowers_the_limit_and_the_rows_are_sent_again_smaller() -> None:
    fake = LimitedProducer(client=1 << 30, broker=30_000)
    producer = ReliableProducer({}, factory=lambda **s: fake)
    sink = KafkaOutputSink(producer, "out", max_message_bytes=1 << 20, refuse=lambda *a: None)
    ids = [f"r{i}" for i in range(1000)]
    sink.write(_output(ids), "l")
    sink.flush("l")
    assert sorted(_rows(fake.sent, "out")) == sorted(ids) and sink.max_message_bytes < 60_000
    # without a place for refused rows, a row that cannot fit is an error (never a silent loss)
    sink = KafkaOutputSink(ReliableProducer({}, factory=lambda **s: LimitedProducer(5000, 5000)), "out",
                           max_message_bytes=5000)
    with pytest.raises(KafkaDeliveryError, match="cannot be produced"):
        sink.write(_output(["x" * 6000]), "l")


def test_json_output_rows_too_large_are_refused_one_by_one() -> None:
    fake = LimitedProducer(client=1 << 30, broker=3000)
    refused: list[DeadRecord] = []
    sink = KafkaOutputSink(ReliableProducer({}, factory=lambda **s: fake), "out", fmt="json",
                           max_message_bytes=1 << 20, refuse=lambda d, v, lab: refused.extend(d))
    sink.write(_output(["a", "b" * 5000, "c"]), "l")
    sink.flush("l")
    assert sorted(json.loads(v)["id"] for _, _, v, _ in fake.sent) == ["a", "c"]
    assert [d.id for d in refused] == ["b" * 5000]


def _dlq(tmp_path: Path, fake: LimitedProducer, limit: int) -> tuple[KafkaDeadLetterSink, Path]:
    spill_dir = tmp_path / "dead-letter"
    spill = PerLabelSink(lambda: DeadLetterSink(spill_dir, clean=False), spill_dir, "dead")
    sink = KafkaDeadLetterSink(ReliableProducer({}, factory=lambda **s: fake), "in.dlq", max_message_bytes=limit,
                               spill=spill, spill_path=lambda lab: dead_letter_path(spill_dir, "parquet", lab))
    return sink, spill_dir


def test_a_dead_letter_too_large_is_cut_to_fit_and_kept_whole_in_a_file(tmp_path: Path) -> None:
    fake = LimitedProducer(client=50_000, broker=1 << 30)
    sink, spill_dir = _dlq(tmp_path, fake, 50_000)
    raw = b"\x00garbage" * 20_000  # 160 kB: the original message
    big_row = json.dumps({"id": "w" * 70_000, "dissimilarities": [1.5] * 10})
    dead = [KafkaDeadRecord(Reason.UNDECODABLE, "not Arrow", raw=raw, topic="in", partition=0, offset=17),
            DeadRecord(Reason.WRONG_LENGTH, "3 values, 12 landmarks", id="w" * 70_000, record=big_row),
            KafkaDeadRecord(Reason.UNDECODABLE, "small", raw=b"tiny", topic="in", partition=0, offset=18)]
    sink.write(dead, "kafka-in-p0-o000000000017", model_version=3)
    sink.flush("kafka-in-p0-o000000000017")
    assert len(fake.sent) == 3 and all(fits(k, v, h, 50_000) for _, k, v, h in fake.sent)
    (_, k0, v0, h0), (_, k1, v1, h1), (_, k2, v2, h2) = fake.sent
    h0, h1, h2 = dict(h0), dict(h1), dict(h2)
    assert raw.startswith(v0) and len(v0) > 40_000 and h0[TRUNCATED_HEADER] == str(len(raw)).encode()
    assert h0["streamembed-source-offset"] == b"17"
    assert big_row.encode().startswith(v1) and h1[TRUNCATED_HEADER] == str(len(big_row)).encode()
    assert len(h1["streamembed-id"]) < 3000 and len(k1) < 3000  # the id header and key are cut too
    assert (v2, TRUNCATED_HEADER in h2) == (b"tiny", False)
    # each whole record in a file of its own, published before its dead letter was sent, named after the
    # batch's label and the record (a restart that cuts it again writes the same file)
    where0, where1 = Path(h0[FULL_RECORD_HEADER].decode()), Path(h1[FULL_RECORD_HEADER].decode())
    assert where0.parent == where1.parent == spill_dir and where0 != where1
    assert where0.name.startswith("dead-kafka-in-p0-o000000000017-")
    assert [(r["raw"], r["record"]) for r in pq.read_table(where0).to_pylist()] == [(raw, None)]
    assert [(r["raw"], r["record"]) for r in pq.read_table(where1).to_pylist()] == [(None, big_row)]


def test_a_dead_letter_the_broker_refuses_is_cut_below_what_it_refused(tmp_path: Path) -> None:
    fake = LimitedProducer(client=1 << 30, broker=20_000)
    sink, spill_dir = _dlq(tmp_path, fake, 1 << 20)
    raw = b"r" * 100_000
    sink.write([KafkaDeadRecord(Reason.TOO_LARGE, "big", raw=raw, topic="in", partition=1, offset=4)], "lab",
               model_version=None)
    sink.flush("lab")
    (_, _, value, headers), = fake.sent
    assert raw.startswith(value) and dict(headers)[TRUNCATED_HEADER] == b"100000"
    kept = Path(dict(headers)[FULL_RECORD_HEADER].decode())
    assert pq.read_table(kept).column("raw").to_pylist() == [raw] and len(list(spill_dir.iterdir())) == 1


def test_fit_header_marks_what_it_cut() -> None:
    assert fit_header(b"short") == b"short"
    cut = fit_header(b"z" * 5000)
    assert cut.startswith(b"z" * 2000) and cut.endswith(b"(5,000 bytes)") and len(cut) < 2100
