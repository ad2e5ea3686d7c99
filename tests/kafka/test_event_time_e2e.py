"""A plain producer (confluent-kafka, no streamembed headers, no event_time field, integer ids)
against the real daemon and the Tansu test broker: the message timestamps become event times, the latency
histogram fills, and the StreamembedLatencyP99High alert fires on the histogram the daemon exported
(``promtool test rules`` over the scraped buckets with deploy/prometheus/alerts.yml)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ..deploy.helpers import require_tool
from ..e2e.daemon import Daemon, wait_for
from ..stream.helpers import dissimilarities, objects
from .test_daemon_e2e import _model

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.slow]

ALERTS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
N = 24
#: the producer stamps its messages this long ago: every latency lies in the (60 s, 300 s] bucket
AGE_MS = 120_000


def _buckets(metrics_text: str) -> dict[str, float]:
    """le -> cumulative count of the daemon's end-to-end latency histogram."""
    pat = r'^streamembed_end_to_end_latency_seconds_bucket\{le="([^"]+)"\} ([0-9.e+-]+)$'
    return {le: float(v) for le, v in re.findall(pat, metrics_text, flags=re.MULTILINE)}


def _promtool_fires(buckets: dict[str, float], tmp: Path) -> subprocess.CompletedProcess[str]:
    """Replay the scraped histogram as a steady stream (each bucket grows by its scraped count a minute) and
    ask promtool whether the real alert rule is firing after 20 minutes (and not yet after 5: its `for`)."""
    promtool = require_tool("promtool")
    shutil.copy(ALERTS, tmp / "alerts.yml")
    series = "".join(
        f"      - series: 'streamembed_end_to_end_latency_seconds_bucket{{job=\"streamembed\", instance=\"e2e\", "
        f"le=\"{le}\"}}'\n        values: '0+{int(count)}x30'\n" for le, count in buckets.items())
    firing = ('ALERTS{alertname="StreamembedLatencyP99High", alertstate="firing", job="streamembed", '
              'severity="warning"}')
    (tmp / "latency_test.yml").write_text(f"""rule_files: [alerts.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{series}    promql_expr_test:
      - expr: 'ALERTS{{alertname="StreamembedLatencyP99High", alertstate="firing"}}'
        eval_time: 20m
        exp_samples:
          - labels: '{firing}'
            value: 1
      - expr: 'ALERTS{{alertname="StreamembedLatencyP99High", alertstate="firing"}}'
        eval_time: 5m
        exp_samples: []
""")
    return subprocess.run([promtool, "test", "rules", "latency_test.yml"], check=False, cwd=tmp, capture_output=True,
                          text=True, timeout=120)


def test_a_plain_producers_timestamps_fill_the_latency_histogram_and_the_alert_can_fire(
        broker, topic_factory, tmp_path: Path) -> None:
    try:
        import confluent_kafka
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must install confluent-kafka (the test extra)", pytrace=False)
        pytest.skip("confluent-kafka is not installed")
    topic = topic_factory(partitions=1)
    model = _model(tmp_path / "model.npz", 1)
    A = dissimilarities(objects(N, seed=31)).astype(float)
    stamps = {}
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "plain"})
    for i in range(N):
        stamps[str(1000 + i)] = ts = int(time.time() * 1000) - AGE_MS
        # what a team's own producer sends: an object with a numeric id, no headers, no event_time
        producer.produce(topic, value=json.dumps({"id": 1000 + i, "dissimilarities": A[i].tolist()}), timestamp=ts)
    assert producer.flush(15) == 0
    del producer

    root = tmp_path / "out"
    d = Daemon(tmp_path, {
        "STREAMEMBED_SOURCE__KIND": "kafka",
        "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap,
        "STREAMEMBED_KAFKA__INPUT_TOPIC": topic,
        "STREAMEMBED_KAFKA__GROUP_ID": f"g-{topic}",
        "STREAMEMBED_KAFKA__SESSION_TIMEOUT_MS": "10000",
        "STREAMEMBED_KAFKA__STARTUP_TIMEOUT_SECONDS": "20",
        "STREAMEMBED_KAFKA__MAX_POLL_RECORDS": "6",  # several batches: the progress line has lag to report
        "STREAMEMBED_MODEL__PATH": str(model),
        "STREAMEMBED_OUTPUT__ROOT": str(root),
        "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5",
        "STREAMEMBED_DRIFT__ENABLED": "false",
        "STREAMEMBED_RUN__PROGRESS_SECONDS": "0.01",
    })
    try:
        d.wait_port()
        wait_for(lambda: d.metric("streamembed_end_to_end_latency_seconds_count") >= N, 45, "the latency histogram",
                 d)
        _, text = d.get("/metrics")
        # the dead-letter topic's series exists at 0 (pre-initialised), none was needed
        assert re.search(rf'^streamembed_kafka_messages_out_total\{{topic="{re.escape(topic)}.dlq"\}} 0\.0$', text,
                         flags=re.MULTILINE), text
        assert d.terminate() == 0
    finally:
        d.close()
    buckets = _buckets(text)
    assert buckets["+Inf"] == N and buckets["60.0"] == 0 and buckets["300.0"] == N, buckets
    rows = pq.read_table(root / "embeddings").to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(stamps)  # integer ids, as their decimal text
    assert {r["id"]: int(r["event_time"].timestamp() * 1000) for r in rows} == stamps
    assert not list((root / "dead-letter").glob("*"))
    # (the progress line's backlog from the measured lag is checked in test_event_time_unit.py: against a real
    # broker a run of 24 messages can end before the first lag measurement)
    res = _promtool_fires(buckets, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
