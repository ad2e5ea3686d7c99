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
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from streamembed.ops.endpoints import OpsServer
from streamembed.ops.health import HealthState
from streamembed.ops.logs import JsonFormatter
from streamembed.ops.metrics import LATENCY_BUCKETS, BulkHistogram, Metrics


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
        # served next to the slow clients, not queued behind them (that would take request_timeout = 30 s)
        assert worst < 2.5, f"a probe took {worst:.2f} s"
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
            assert time.monotonic() - t0 < 2.5  # a starved accept loop would time out (3 s)
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


def test_headers_a_byte_at_a_time_do_not_escape_the_request_deadline() -> None:
    """The deadline covers the headers too: a request line, then a header byte every 0.1 s (no single read
    ever times out) is closed once ``request_timeout`` has passed since it connected."""
    timeout = 0.6
    server = _server(request_timeout=timeout)
    s = _connect(server.port, b"GET /healthz HTTP/1.1\r\n")
    t0 = time.monotonic()
    closed_after = None
    try:
        for _ in range(50):  # 5 s at most
            try:
                s.sendall(b"a")
            except OSError:
                closed_after = time.monotonic() - t0
                break
            if _closed_by_server(s):
                closed_after = time.monotonic() - t0
                break
            time.sleep(0.1)
        assert closed_after is not None and timeout * 0.9 <= closed_after < timeout + 1.0, closed_after
        assert _get(f"http://127.0.0.1:{server.port}/healthz")[0] == 200
    finally:
        s.close()
        server.stop()


def test_a_slow_metrics_endpoint_cannot_starve_the_probes() -> None:
    """/metrics runs on worker threads; /healthz and /readyz are answered by the server's own thread."""
    from prometheus_client.registry import Collector

    release = threading.Event()

    class Slow(Collector):
        def collect(self):  # prometheus_client API
            release.wait(10)
            return []

    metrics = Metrics()
    metrics.registry.register(Slow())
    health = HealthState(wedged_after=60)
    health.model_loaded = True
    health.set_state("running")
    server = OpsServer(metrics.registry, health, port=0).start()
    scrapes = [threading.Thread(target=_get, args=(f"http://127.0.0.1:{server.port}/metrics", 15), daemon=True)
               for _ in range(12)]
    try:
        for t in scrapes:
            t.start()
        _wait(lambda: server.open_connections >= 12, 5, "the scrapes to be waiting")
        worst = 0.0
        for _ in range(20):
            for path in ("/healthz", "/readyz"):
                t0 = time.monotonic()
                assert _get(f"http://127.0.0.1:{server.port}{path}", timeout=2)[0] == 200
                worst = max(worst, time.monotonic() - t0)
        assert worst < 0.5, worst
    finally:
        release.set()
        for t in scrapes:
            t.join(15)
        server.stop()


def test_one_client_at_its_limit_closes_its_own_oldest_sockets_not_anothers() -> None:
    server = _server(request_timeout=60.0, max_connections=100, max_per_client=8)
    port = server.port
    mine = [_connect(port) for _ in range(4)]  # 127.0.0.1: idle, within its limit
    other = [socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0))
             for _ in range(50)]
    try:
        _wait(lambda: sum(_closed_by_server(s) for s in other) >= 42, 5, "the other client's oldest sockets closed")
        assert not any(_closed_by_server(s) for s in mine)
        assert server.open_connections == 4 + 8
        assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    finally:
        for s in mine + other:
            s.close()
        server.stop()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_refusals_are_logged_rate_limited() -> None:
    caplog = _Records()  # on the logger itself: setup_logging elsewhere may stop propagation to the root
    logging.getLogger("streamembed.health").addHandler(caplog)
    server = _server(request_timeout=60.0, max_connections=16)
    server.refusals.every = 0.5
    flood: list[socket.socket] = []
    try:
        for _ in range(300):
            flood.append(_connect(server.port))
        _wait(lambda: server.refusals.total["total"] >= 250, 10, "the flood to be refused")
        time.sleep(0.7)  # past the interval: the summary line comes with the server's next turn
        _wait(lambda: len(caplog.records) >= 2, 2, "the summary line")
        lines = [r.getMessage() for r in caplog.records if r.name == "streamembed.health"]
        assert len(lines) <= 4, lines  # one at once, then summaries: never one per connection
        assert any("in the last" in line and "total" in line for line in lines), lines
        assert sum(r.counts.get("total", 0) for r in caplog.records) == server.refusals.total["total"] \
            - sum(server.refusals.counts.values())
    finally:
        logging.getLogger("streamembed.health").removeHandler(caplog)
        for s in flood:
            s.close()
        server.stop()


def test_oversized_and_malformed_heads_are_refused() -> None:
    server = _server()
    try:
        s = _connect(server.port, b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
        s.settimeout(5)
        assert s.recv(100).startswith(b"HTTP/1.0 431")
        s.close()
        s = _connect(server.port, b"this is not http\r\n\r\n")
        s.settimeout(5)
        assert s.recv(100).startswith(b"HTTP/1.0 400")
        s.close()
        assert _get(f"http://127.0.0.1:{server.port}/healthz")[0] == 200
    finally:
        server.stop()


@pytest.mark.slow
def test_probes_answer_under_64_header_dribblers_and_300_slowloris_sockets() -> None:
    """64 sockets sending a request line then a header byte every 2 s, and 300 slowloris sockets (a partial
    head, a header line every 3 s), all reopened as soon as the server closes them, from the probes' own
    address: /healthz answers at least 99 % of probes within 1 s (a thread-per-connection server answers
    none: the dribblers hold every slot)."""
    from tests.ops.slow_clients import ProbeStats, SlowClients, probe

    server = _server()
    attack = SlowClients(server.port, dribblers=64, loris=300)
    attack.start()
    stats = ProbeStats()
    try:
        assert attack.ready.wait(30)
        _wait(lambda: attack.live() >= 364, 10, "the 364 slow sockets")
        time.sleep(1.0)
        end = time.monotonic() + 12.0
        while time.monotonic() < end:
            code, seconds = probe(server.port, "/healthz", timeout=1.0)
            (stats.answered if code == 200 else stats.failed).append(seconds if code == 200 else f"{code}")
            time.sleep(0.1)
        assert attack.live() >= 300  # the attack was still on at the end
    finally:
        attack.stop()
        server.stop()
    assert stats.total >= 80
    assert stats.within(1.0) >= 0.99 * stats.total, (stats.within(1.0), stats.total, stats.failed[:5])


def _formatted(fmt: str, *args, exc: BaseException | None = None, **extra) -> str:
    from streamembed.ops.logs import setup_logging

    stream = io.StringIO()
    setup_logging("INFO", fmt)
    logger = logging.getLogger("streamembed")
    handler = logger.handlers[0]
    handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        if exc is not None:
            try:
                raise exc
            except BaseException:
                logging.getLogger("streamembed.test").exception(*args, extra=extra)
        else:
            logging.getLogger("streamembed.test").error(*args, extra=extra)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


EVIL = "in\n2026-01-01 00:00:00,000 ERROR streamembed.daemon: forged\r\x1b[2J\x1b]0;title\x07\x9b31m\u2028x.jsonl"


def test_no_log_field_can_forge_a_line_or_reach_the_terminal_raw() -> None:
    """A file name with a newline and ESC bytes, in the message, an extra field and an exception's message:
    one line per call (a traceback's lines all indented), no control character."""
    for fmt in ("text", "json"):
        out = _formatted(fmt, "reading %s", EVIL, file=EVIL)
        assert out.count("\n") == 1, (fmt, out)
        assert not any(ord(ch) < 0x20 and ch != "\n" or 0x7F <= ord(ch) <= 0x9F or ch == "\u2028" for ch in out)
        if fmt == "json":
            doc = json.loads(out)
            assert doc["msg"] == f"reading {EVIL}" and doc["file"] == EVIL  # escaped, not altered
        else:
            assert "reading in\\n2026-01-01" in out and "\\x1b[2J" in out and "file=in\\n" in out
        out = _formatted(fmt, "failed", exc=ValueError(EVIL))
        lines = out.splitlines()
        if fmt == "json":
            assert len(lines) == 1 and EVIL in json.loads(out)["exc"]
        else:
            assert all(line.startswith("  | ") for line in lines[1:]) and "forged" in out
            assert not any(ord(ch) < 0x20 and ch != "\n" or 0x7F <= ord(ch) <= 0x9F for ch in out)
