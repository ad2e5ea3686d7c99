"""Metrics, probes and structured logs."""

from __future__ import annotations

import io
import json
import logging
import os
import select
import socket
import threading
import time
import urllib.error
import urllib.request

import numpy as np
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from streamembed.daemon.health import HealthState, OpsServer
from streamembed.daemon.logs import JsonFormatter
from streamembed.daemon.metrics import LATENCY_BUCKETS, BulkHistogram, Metrics


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _request(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _connect(port: int, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if data:
        s.sendall(data)
    return s


def _closed_by_server(s: socket.socket) -> bool:
    """True once the server has closed ``s`` (end of file or reset), without blocking."""
    if not select.select([s], [], [], 0)[0]:
        return False
    try:
        return s.recv(1 << 16) == b""
    except OSError:
        return True


class _Dribbler(threading.Thread):
    """Sends a request's head one byte every ``gap`` seconds (a slowloris client) until stopped or closed."""

    def __init__(self, port: int, gap: float, seconds: float) -> None:
        super().__init__(daemon=True)
        self.sock = _connect(port)
        self.gap, self.seconds = gap, seconds
        self.stop = threading.Event()
        self.sent = 0
        self.closed_after: float | None = None

    def run(self) -> None:
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100_000
        t0 = time.monotonic()
        while not self.stop.is_set() and time.monotonic() - t0 < self.seconds and self.sent < len(head):
            try:
                self.sock.sendall(head[self.sent:self.sent + 1])
            except OSError:
                self.closed_after = time.monotonic() - t0
                return
            self.sent += 1
            if _closed_by_server(self.sock):
                self.closed_after = time.monotonic() - t0
                return
            self.stop.wait(self.gap)


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


def _server(**kw) -> OpsServer:
    health = HealthState(wedged_after=60)
    health.model_loaded = True
    health.set_state("running")
    return OpsServer(Metrics().registry, health, port=0, **kw).start()


def _wait(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_idle_and_slow_clients_do_not_block_the_probes() -> None:
    # the clients below never finish their requests within the test: only concurrency lets the probes through
    server = _server(request_timeout=30.0)
    port = server.port
    socks = [_connect(port) for _ in range(3)]  # connected, silent
    socks.append(_connect(port, b"GET /healthz HTTP/1.1\r\n"))  # a request line, then nothing
    socks.append(_connect(port, b"GET /hea"))  # half a request line
    dribbler = _Dribbler(port, gap=0.02, seconds=20.0)  # the head a byte at a time
    dribbler.start()
    try:
        _wait(lambda: server.open_connections == 6, 5, "the six slow connections to be accepted")
        worst = 0.0
        for _ in range(10):
            for path, code in (("/healthz", 200), ("/readyz", 200), ("/metrics", 200)):
                t0 = time.monotonic()
                got, _ = _get(f"http://127.0.0.1:{port}{path}", timeout=3)
                worst = max(worst, time.monotonic() - t0)
                assert got == code, path
        assert worst < 1.0, f"a probe took {worst:.2f} s"
        # the slow clients are still connected and unanswered: served concurrently, not dropped to make room
        assert not any(_closed_by_server(s) for s in socks) and dribbler.closed_after is None
        _wait(lambda: server.open_connections == 6, 2, "the probes' connections to close")
    finally:
        dribbler.stop.set()
        dribbler.join(5)
        for s in socks + [dribbler.sock]:
            s.close()
        server.stop()


def test_a_request_must_arrive_within_the_timeout_even_a_byte_at_a_time() -> None:
    timeout = 0.6
    server = _server(request_timeout=timeout)
    port = server.port
    t0 = time.monotonic()
    idle, partial = _connect(port), _connect(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    dribbler = _Dribbler(port, gap=0.05, seconds=10.0)  # a byte every 50 ms: no single read ever times out
    dribbler.start()
    try:
        closed: dict[str, float] = {}
        end = time.monotonic() + 5
        while len(closed) < 2 and time.monotonic() < end:
            for name, s in (("idle", idle), ("partial", partial)):
                if name not in closed and _closed_by_server(s):
                    closed[name] = time.monotonic() - t0
            time.sleep(0.01)
        dribbler.join(5)
        assert set(closed) == {"idle", "partial"}, closed
        assert all(timeout * 0.9 <= t < timeout + 1.0 for t in closed.values()), closed
        assert dribbler.closed_after is not None and timeout * 0.9 <= dribbler.closed_after < timeout + 1.0
        assert 5 < dribbler.sent < 40  # it kept sending until the deadline
        _wait(lambda: server.open_connections == 0, 2, "the slow connections to be forgotten")
        # a client that sends its request in time is answered as usual
        assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    finally:
        dribbler.stop.set()
        for s in (idle, partial, dribbler.sock):
            s.close()
        server.stop()


def test_a_flood_of_idle_sockets_costs_a_bounded_number_of_threads() -> None:
    limit = 16
    server = _server(request_timeout=60.0, max_connections=limit)  # no timeout comes to the rescue
    port = server.port
    threads0 = threading.active_count()
    fds0 = len(os.listdir("/proc/self/fd"))
    flood: list[socket.socket] = []
    try:
        for _ in range(200):
            flood.append(_connect(port))
        # each connection beyond the limit closes the one that has waited longest
        _wait(lambda: sum(_closed_by_server(s) for s in flood) >= 200 - limit, 10, "the oldest idle sockets closed")
        # one thread per open connection (a closed one's thread ends as soon as it is scheduled)
        _wait(lambda: threading.active_count() - threads0 <= limit, 5, f"at most {limit} connection threads")
        assert server.open_connections <= limit
        for _ in range(5):
            t0 = time.monotonic()
            assert _get(f"http://127.0.0.1:{port}/healthz", timeout=3)[0] == 200
            assert time.monotonic() - t0 < 1.0
        # the server side holds at most `limit` sockets (the 200 client ends are this process's too)
        assert len(os.listdir("/proc/self/fd")) - fds0 <= 200 + limit + 4
        assert threading.active_count() - threads0 <= limit + 1
    finally:
        for s in flood:
            s.close()
        server.stop()


def test_only_get_is_served_and_every_response_forbids_sniffing_and_caching() -> None:
    server = _server()
    try:
        for method in ("POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"):
            code, headers, _ = _request(server.port, method, "/healthz")
            assert code == 405 and headers["allow"] == "GET", method
        code, headers, _ = _request(server.port, "BREW", "/healthz")
        assert code == 501
        for path in ("/healthz", "/metrics", "/nope"):
            _, headers, _ = _request(server.port, "GET", path)
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["cache-control"] == "no-store"
            assert headers["content-security-policy"].startswith("default-src 'none'")
    finally:
        server.stop()
