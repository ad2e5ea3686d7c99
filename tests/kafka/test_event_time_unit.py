"""Kafka event time: the message timestamp where the record carries none, per kafka.event_time;
the progress line's backlog from the measured lag. No broker (tests/kafka/test_event_time_e2e.py has one)."""

from __future__ import annotations

import json
from collections import namedtuple
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from streamembed.kafka.codec import json_message
from streamembed.kafka.event_time import CREATE_TIME, LOG_APPEND_TIME, with_message_time
from streamembed.kafka.batches import KafkaDeadRecord, cut_batches
from streamembed.stream.embedder import BatchEmbedder

from ..stream.helpers import dissimilarities, fitted_model, objects
from .test_source_unit import FakeConsumer, _source

TS = 1_700_000_000_123  # ms
Rec = namedtuple("Rec", "offset value headers key timestamp timestamp_type")


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _rows(times: list[str | None] | None) -> list[dict]:
    A = dissimilarities(objects(3, seed=2)).astype(float)
    rows = [{"id": f"r{i}", "dissimilarities": A[i].tolist()} for i in range(3)]
    if times is not None:
        for r, t in zip(rows, times, strict=True):
            if t is not None:
                r["event_time"] = t
    return rows


def _embedded_times(rows: list[dict], mode: str, ts: int | None = TS, ts_type: int | None = CREATE_TIME) -> list:
    """event_time of the output rows of one JSON message, through cut_batches and the embedder."""
    value, headers = json_message(rows)

    def dead(d, p, rec, ct):
        return KafkaDeadRecord(reason=d.reason, detail=d.detail)

    (q,) = cut_batches(0, [Rec(5, value, headers, None, ts, ts_type)], 100, dead, event_time=mode)
    done = BatchEmbedder(fitted_model().model_).process(q.tables[0])
    assert not done.dead
    return done.output.column("event_time").to_pylist()


def test_auto_takes_the_message_timestamp_for_rows_without_their_own() -> None:
    assert _embedded_times(_rows(None), "auto") == [_at(TS)] * 3
    own = "2024-01-02T03:04:05Z"
    got = _embedded_times(_rows([own, None, own]), "auto", ts_type=LOG_APPEND_TIME)
    assert got == [datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), _at(TS),
                   datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)]


def test_record_keeps_only_the_rows_own_and_none_drops_every_event_time() -> None:
    own = "2024-01-02T03:04:05Z"
    assert _embedded_times(_rows(None), "record") == [None] * 3
    assert _embedded_times(_rows([own, None, None]), "record")[1:] == [None, None]
    assert _embedded_times(_rows([own, own, own]), "none") == [None] * 3


@pytest.mark.parametrize("mode, kind", [("create_time", CREATE_TIME), ("log_append_time", LOG_APPEND_TIME)])
def test_a_timestamp_type_mode_uses_only_messages_of_that_type(mode: str, kind: int) -> None:
    own = "2024-01-02T03:04:05Z"
    assert _embedded_times(_rows([own, None, own]), mode, ts_type=kind) == [_at(TS)] * 3
    assert _embedded_times(_rows([own, None, own]), mode, ts_type=1 - kind) == [None] * 3


def test_a_message_without_a_timestamp_changes_nothing() -> None:
    assert _embedded_times(_rows(None), "auto", ts=-1, ts_type=None) == [None] * 3


def test_an_arrow_timestamp_column_with_nulls_is_filled_in_its_own_type() -> None:
    t = pa.table({"id": ["a", "b"], "event_time": pa.array([1_000_000, None], pa.timestamp("ms"))})
    out = with_message_time(t, TS, CREATE_TIME, "auto")
    assert out.schema.field("event_time").type == pa.timestamp("ms")
    assert out.column("event_time").cast(pa.int64()).to_pylist() == [1_000_000, TS]
    bad = pa.table({"id": ["a"], "event_time": pa.array([None], pa.int32())})
    assert with_message_time(bad, TS, CREATE_TIME, "auto").equals(bad)  # decoding refuses it and says why


def test_the_backlog_is_the_measured_lag_of_the_assigned_partitions() -> None:
    """The progress line said "backlog unknown" beside a known lag gauge: the backlog is that gauge's sum."""
    from streamembed.ops.metrics import Metrics

    c = FakeConsumer()
    for p in (0, 1):
        for _ in range(3 + p):
            c.add(p, json.dumps(_rows(None)).encode())
    metrics = Metrics()
    src = _source(c, metrics=metrics)
    assert src.backlog is None  # nothing measured yet: "backlog unknown"
    assert src.poll() is not None
    gauge = [metrics.registry.get_sample_value("streamembed_kafka_consumer_lag", {"topic": "in", "partition": p})
             for p in ("0", "1")]
    assert gauge == [3, 4] and src.backlog == 7
