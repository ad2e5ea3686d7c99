"""Metrics, probes and structured logs."""

from __future__ import annotations

import io
import json
import logging
import urllib.error
import urllib.request

import numpy as np
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from streamembed.daemon.health import HealthState, OpsServer
from streamembed.daemon.logs import JsonFormatter
from streamembed.daemon.metrics import LATENCY_BUCKETS, BulkHistogram, Metrics


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_bulk_histogram_exposes_what_a_prometheus_histogram_would() -> None:
    values = np.array([0.0005, 0.001, 0.003, 0.2, 7.0, 1e6, 0.05])
    r1, r2 = CollectorRegistry(), CollectorRegistry()
    h = Histogram("x_seconds", "doc", buckets=LATENCY_BUCKETS, registry=r1)
    for v in values:
        h.observe(v)
    BulkHistogram("x_seconds", "doc", LATENCY_BUCKETS, registry=r2).observe_many(np.append(values, np.nan))

    def samples(r):
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in r.collect() for s in fam.samples
                if not s.name.endswith("_created")}

    got, want = samples(r2), samples(r1)
    assert got.keys() == want.keys()
    for k in want:
        assert np.isclose(got[k], want[k]), k


def test_ops_server_serves_metrics_health_and_readiness() -> None:
    metrics = Metrics()
    metrics.records_in.inc(5)
    health = HealthState(wedged_after=60)
    server = OpsServer(metrics.registry, health, port=0).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        code, body = _get(base + "/metrics")
        assert code == 200 and b"streamembed_records_in_total 5.0" in body
        assert b'streamembed_records_failed_total{reason="unreadable_file"} 0.0' in body
        assert _get(base + "/healthz")[0] == 200
        assert _get(base + "/readyz")[0] == 503
        health.model_loaded = True
        health.set_state("running")
        code, body = _get(base + "/readyz")
        assert code == 200 and json.loads(body)["ready"] is True
        health.wedged_after = 0.0
        assert _get(base + "/healthz")[0] == 503
        assert _get(base + "/nope")[0] == 404
    finally:
        server.stop()


def test_every_required_metric_is_registered() -> None:
    text = generate_latest(Metrics().registry).decode()
    for name in ["streamembed_records_in_total", "streamembed_records_embedded_total",
                 "streamembed_records_failed_total", "streamembed_dead_letters_total",
                 "streamembed_batch_processing_seconds", "streamembed_end_to_end_latency_seconds",
                 "streamembed_relative_unexplained", "streamembed_model_version", "streamembed_model_info",
                 "streamembed_last_batch_timestamp_seconds"]:
        assert f"# TYPE {name.removesuffix('_total')}" in text or f"# TYPE {name}" in text, name


def test_json_log_lines_carry_extra_fields() -> None:
    stream = io.StringIO()
    h = logging.StreamHandler(stream)
    h.setFormatter(JsonFormatter())
    log = logging.getLogger("streamembed.test.json")
    log.addHandler(h)
    log.propagate = False
    log.warning("listening on %d", 9, extra={"port": 9})
    doc = json.loads(stream.getvalue())
    assert doc["msg"] == "listening on 9" and doc["port"] == 9 and doc["level"] == "WARNING"
