"""Compressed record batches from a foreign producer, and batches no client can read, through the real daemon.

librdkafka (confluent-kafka) and Java producers compress with snappy, lz4 or
zstd as a matter of course; kafka-python decodes them only with the codec
packages installed (they are dependencies). Each compressed batch sits between
plain messages on one partition: every id must come out, with no dead letter
and no restart. Batches that cannot be read at all - a corrupt gzip payload, a
CRC mismatch - must become dead letters naming their offsets while the
messages around them are embedded (before: exit 1 on every start, for ever).
A batch of an unknown codec id cannot be tested here: Tansu refuses to store
it (tests/kafka/test_source_unit.py covers it with a fake consumer).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from . import clients as kafka_clients
from ..e2e.daemon import Daemon, wait_for
from ..stream.helpers import dissimilarities, fitted_model, objects
from .test_daemon_e2e import _env, output_rows, read_topic

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_BATCH = 8


def _confluent() -> Any:
    try:
        import confluent_kafka
    except ImportError:  # the test extra installs it; CI must have it
        if os.environ.get("CI"):
            pytest.fail("CI must install confluent-kafka (the test extra)", pytrace=False)
        pytest.skip("confluent-kafka is not installed")
    return confluent_kafka


def _doc(rid: str, seed: int) -> bytes:
    a = dissimilarities(objects(1, seed=seed))[0].astype(float).tolist()
    return json.dumps({"id": rid, "dissimilarities": a}).encode()


def test_the_codec_packages_are_installed() -> None:
    """kafka-python decodes snappy, lz4 and zstd only with python-snappy, lz4 and zstandard (dependencies)."""
    import kafka.codec as codec

    assert codec.has_gzip() and codec.has_snappy() and codec.has_lz4() and codec.has_zstd()
    payload = b"streamembed " * 100
    for enc, dec in ((codec.snappy_encode, codec.snappy_decode), (codec.lz4_encode, codec.lz4_decode),
                     (codec.zstd_encode, codec.zstd_decode), (codec.gzip_encode, codec.gzip_decode)):
        assert dec(enc(payload)) == payload


@contextlib.contextmanager
def _without(codec: str) -> Iterator[None]:
    """This process's kafka-python as if ``codec``'s package were missing (to check a batch really is compressed)."""
    import kafka.codec as kc

    name = f"has_{codec}"
    old = getattr(kc, name)
    setattr(kc, name, lambda: False)
    try:
        yield
    finally:
        setattr(kc, name, old)


def _first_error(bootstrap: str, topic: str, offset: int) -> str | None:
    """The error kafka-python (in this process) raises reading ``topic`` partition 0 from ``offset``, or None."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    try:
        c.assign([tp])
        c.seek(tp, offset)
        for _ in range(20):
            try:
                if c.poll(timeout_ms=250, max_records=1):
                    return None
            except Exception as exc:  # the answer
                return f"{type(exc).__name__}: {exc}"
        return None
    finally:
        c.close()


@pytest.mark.slow
def test_batches_of_every_codec_from_confluent_kafka_between_plain_messages(broker, topic_factory,
                                                                             tmp_path: Path) -> None:
    ck = _confluent()
    topic, out = topic_factory(prefix="codec"), topic_factory(prefix="codec-out")
    dlq = f"{topic}.dlq"
    broker.create_topic(dlq)
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "plain", "linger.ms": 0})
    want: list[str] = []
    first_offset: dict[str, int] = {}
    offsets: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        offsets.append(msg.offset())

    def send_plain(rid: str, seed: int) -> None:
        plain.produce(topic, value=_doc(rid, seed), partition=0, on_delivery=delivered)
        assert plain.flush(10) == 0
        want.append(rid)

    seed = 0
    for codec in CODECS:
        send_plain(f"before-{codec}", seed := seed + 1)
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "client.id": f"c-{codec}", "compression.type": codec,
                         "linger.ms": 200, "batch.num.messages": 1000})
        n0 = len(offsets)
        for i in range(PER_BATCH):  # one batch: produced together, flushed once
            p.produce(topic, value=_doc(f"{codec}-{i}", seed := seed + 1), partition=0, on_delivery=delivered)
            want.append(f"{codec}-{i}")
        assert p.flush(15) == 0
        first_offset[codec] = min(offsets[n0:])
        send_plain(f"after-{codec}", seed := seed + 1)
    # the batches really are compressed: this process's kafka-python cannot read them without the codec package
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        with _without(codec):
            err = _first_error(broker.bootstrap, topic, first_offset[codec])
        assert err is not None and codec in err, (codec, err)

    model = tmp_path / "model.npz"
    fitted_model().save(model)
    # the daemon's own output compressed with lz4, the README's example of [kafka.client] (in the library's names)
    setting = "compression.type" if kafka_clients.library() == "confluent" else "compression_type"
    d = Daemon(tmp_path, _env(broker, tmp_path / "out", model, f"g-{topic}", topic, out,
                              STREAMEMBED_KAFKA__CLIENT=json.dumps({setting: "lz4"})))
    try:
        d.wait_port()
        recs = read_topic(broker.bootstrap, out, lambda rs: len(output_rows(rs)) >= len(want), timeout=40)
        assert sorted(r["id"] for r in output_rows(recs)) == sorted(want)
        wait_for(lambda: d.metric("streamembed_kafka_commits_total") > 0, 20, "a commit", d)
        assert d.metric("streamembed_dead_letters_total") == 0
        assert not d.dead()  # no restart: the same process did it all
        assert d.terminate() == 0
    finally:
        d.close()
    assert "UnsupportedCodecError" not in d.log()
    with _without("lz4"):
        assert "lz4" in (_first_error(broker.bootstrap, out, 0) or "")


@contextlib.contextmanager
def _broken_batches(how: str) -> Iterator[None]:
    """kafka-python producers of this process write batches that no client can read: ``corrupt`` - a gzip batch
    whose payload is not gzip (its CRC valid); ``crc`` - a plain batch with a wrong CRC."""
    import kafka.record.default_records as dr

    enc, header = dr.gzip_encode, dr.DefaultRecordBatchBuilder.write_header
    if how == "corrupt":
        dr.gzip_encode = lambda data, *a, **k: b"\x1f\x8b not gzip at all"
    else:
        def write_header(self: Any, use_compression_type: bool = True) -> None:
            header(self, use_compression_type)
            struct.pack_into(">I", self._buffer, self.CRC_OFFSET, 12345)

        dr.DefaultRecordBatchBuilder.write_header = write_header
    try:
        yield
    finally:
        dr.gzip_encode, dr.DefaultRecordBatchBuilder.write_header = enc, header


@pytest.mark.slow
def test_unreadable_batches_are_dead_letters_per_offset_and_the_partition_goes_on(broker, topic_factory,
                                                                                  tmp_path: Path) -> None:
    """A corrupt gzip batch of 3 records and a batch of 2 with a wrong CRC, between plain messages:
    5 dead letters naming offsets 1-3 and 5-6, every plain message embedded, no exit."""
    topic, out = topic_factory(prefix="unread"), topic_factory(prefix="unread-out")
    dlq = f"{topic}.dlq"
    broker.create_topic(dlq)
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap)
    want: list[str] = []
    bad: dict[int, str] = {}

    def send(producer: KafkaProducer, rid: str, seed: int) -> int:
        return producer.send(topic, value=_doc(rid, seed), partition=0).get(10).offset

    try:
        assert send(plain, "p0", 1) == 0
        want.append("p0")
        for how, n, first in (("corrupt", 3, 1), ("crc", 2, 5)):
            with _broken_batches(how):
                comp = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=200, retries=0,
                                     compression_type="gzip" if how == "corrupt" else None)
                futures = [comp.send(topic, value=_doc(f"lost-{first + i}", 10 + i) * 20, partition=0)
                           for i in range(n)]
                comp.flush(10)
                got = [f.get(10).offset for f in futures]
                comp.close(5)
            assert got == list(range(first, first + n)), got
            bad.update({o: how for o in got})
            rid = f"p{first + n}"
            assert send(plain, rid, first + n) == first + n
            want.append(rid)
    finally:
        plain.close(5)
    for offset in (1, 5):
        assert _first_error(broker.bootstrap, topic, offset) is not None  # the batches really cannot be read
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    d = Daemon(tmp_path, _env(broker, tmp_path / "out", model, f"g-{topic}", topic, out))
    try:
        d.wait_port()
        recs = read_topic(broker.bootstrap, out, lambda rs: len(output_rows(rs)) >= len(want), timeout=40)
        assert sorted(r["id"] for r in output_rows(recs)) == sorted(want)
        dead = read_topic(broker.bootstrap, dlq, lambda rs: len(rs) >= len(bad), timeout=20)
        heads = [{k: v.decode() for k, v in r.headers} for r in dead]
        assert sorted(int(h["streamembed-source-offset"]) for h in heads) == sorted(bad)
        assert {h["streamembed-error-reason"] for h in heads} == {"undecodable"}
        assert all("cannot be read" in h["streamembed-error-detail"] for h in heads)
        crc = [h for h in heads if bad[int(h["streamembed-source-offset"])] == "crc"]
        assert all("crc" in h["streamembed-error-detail"].lower() for h in crc), crc
        wait_for(lambda: d.metric("streamembed_kafka_commits_total") > 0, 20, "a commit", d)
        assert not d.dead()
        assert d.terminate() == 0
    finally:
        d.close()
