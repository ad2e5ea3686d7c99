"""Liveness/readiness state and the one small HTTP server that exposes it.

``/metrics``   Prometheus text format (``generate_latest`` of the registry)
``/healthz``   200 while the process is alive and the loop has beaten within
               ``wedged_after`` seconds, else 503
``/readyz``    200 once the model is loaded and the loop is running, else 503
``/map``       the live map page (``daemon/static/map.html``), and
``/map.json``  the data behind it (``daemon.mapview.MapView``)

Each connection is served on its own thread, so a slow or idle client cannot
hold up a probe: a connection must deliver its request within
``request_timeout`` seconds in all (whether it sends nothing, half a request
line, or its headers a byte at a time) and take its response within as many,
or it is closed. At most ``max_connections`` are open at once (one thread
each); a new connection beyond that closes the one that has waited longest
for its request to arrive, so a flood of idle sockets costs a bounded number
of threads and cannot lock the probes out. Only GET is served; the responses
are small, computed in memory, and never read a file named by the request.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["HealthState", "OpsServer"]

log = logging.getLogger("streamembed.health")


class HealthState:
    """What the probes report; the loop calls :meth:`beat` every iteration."""

    def __init__(self, wedged_after: float = 120.0) -> None:
        self.wedged_after = float(wedged_after)
        self.model_loaded = False
        self.state = "starting"  # starting | running | stopping | stopped
        self._last_beat = time.monotonic()
        self._lock = threading.Lock()
        self._problems: dict[str, str] = {}

    def beat(self) -> None:
        with self._lock:
            self._last_beat = time.monotonic()

    def set_state(self, state: str) -> None:
        with self._lock:
            self.state = state
            self._last_beat = time.monotonic()

    def set_problem(self, name: str, problem: str | None) -> None:
        """Record (or clear, with None) a condition that makes the daemon unready, e.g. an unreadable input."""
        with self._lock:
            if problem is None:
                self._problems.pop(name, None)
            else:
                self._problems[name] = problem

    def healthy(self) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            age = time.monotonic() - self._last_beat
            state = self.state
        ok = age <= self.wedged_after
        return ok, {"status": "ok" if ok else "wedged", "state": state, "last_beat_age_seconds": round(age, 3)}

    def ready(self) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            ok = self.model_loaded and self.state == "running" and not self._problems
            doc: dict[str, Any] = {"ready": ok, "model_loaded": self.model_loaded, "state": self.state}
            if self._problems:
                doc["problems"] = dict(self._problems)
            return ok, doc


#: Headers on every response: no MIME sniffing, no caching, no referrer.
_COMMON_HEADERS = (("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"),
                   ("Referrer-Policy", "no-referrer"))
#: The policy of every response but the map page: nothing may load or run.
_NOTHING_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(code)d %(message)s\n"

    def setup(self) -> None:
        self.timeout = self.server.request_timeout  # per read and per write (StreamRequestHandler.setup)
        super().setup()

    def parse_request(self) -> bool:
        # the request has arrived: from now on the connection is answered, not evicted
        if not self.server.connections.responding(self.connection):
            self.close_connection = True
            return False
        return super().parse_request()

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        path = self.path.split("?", 1)[0]  # query strings are ignored
        srv = self.server
        if path == "/metrics":
            body = generate_latest(srv.registry)
            self._send(200, body, CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            ok, doc = srv.health.healthy()
            self._send(200 if ok else 503, json.dumps(doc).encode(), "application/json")
        elif path == "/readyz":
            ok, doc = srv.health.ready()
            self._send(200 if ok else 503, json.dumps(doc).encode(), "application/json")
        elif path == "/map" and srv.map_page is not None:
            self._send(200, srv.map_page.html, "text/html; charset=utf-8", policy=srv.map_page.policy)
        elif path == "/map.json" and srv.map_page is not None:
            view = srv.map_view
            if view is None:
                self._send(503, b'{"error": "the daemon is starting"}', "application/json")
                return
            try:
                body = view.json_bytes()
            except Exception:  # noqa: BLE001 - a bug in the view must not cost the probes their server
                log.exception("building /map.json failed")
                self._send(500, b'{"error": "the map could not be built; see the daemon log"}', "application/json")
                return
            self._send(200, body, "application/json")
        else:
            self._send(404, b'{"error": "not found"}', "application/json")

    def _not_allowed(self) -> None:
        self.close_connection = True
        self.send_response(405)
        self.send_header("Allow", "GET")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed

    def _send(self, code: int, body: bytes, ctype: str, policy: str = _NOTHING_POLICY) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", policy)
        self.end_headers()
        self.wfile.write(body)

    def end_headers(self) -> None:
        for name, value in _COMMON_HEADERS:
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server API
        log.debug("http %s", format % args)


class _Connections:
    """The open connections, oldest first, and whether each is still waiting for its request."""

    def __init__(self, limit: int, timeout: float) -> None:
        self.limit = int(limit)
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._open: dict[socket.socket, list[Any]] = {}  # insertion order = accept order; [accepted, waiting]

    def admit(self, conn: socket.socket) -> bool:
        """Count a new connection in; at the limit close the longest-waiting one (False: all are answering)."""
        with self._lock:
            if len(self._open) >= self.limit:
                oldest = next((c for c, (_, waiting) in self._open.items() if waiting), None)
                if oldest is None:
                    return False
                del self._open[oldest]
                _hang_up(oldest)
            self._open[conn] = [time.monotonic(), True]
            return True

    def responding(self, conn: socket.socket) -> bool:
        """The request of ``conn`` has arrived; False when it was closed meanwhile (evicted or too slow)."""
        with self._lock:
            entry = self._open.get(conn)
            if entry is None:
                return False
            entry[1] = False
            return True

    def closed(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.pop(conn, None)

    def expire(self) -> None:
        """Close the connections whose request has not arrived within the timeout."""
        deadline = time.monotonic() - self.timeout
        with self._lock:
            late = [c for c, (t, waiting) in self._open.items() if waiting and t < deadline]
            for c in late:
                del self._open[c]
                _hang_up(c)

    def close_all(self) -> None:
        with self._lock:
            for c in self._open:
                _hang_up(c)
            self._open.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)


def _hang_up(conn: socket.socket) -> None:
    """End a connection another thread may be blocked reading: its read returns end-of-file at once."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # a burst of connections waits in the kernel, not refused

    registry: CollectorRegistry
    health: HealthState
    map_page: Any = None  # mapview.MapPage: the page is served (else /map is 404)
    map_view: Any = None  # mapview.MapView, attached once the daemon has assembled its model
    request_timeout: float
    connections: _Connections

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.connections.admit(request):
            log.warning("ops server: %d connections are being answered; refusing another", self.connections.limit)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.connections.closed(request)
        super().shutdown_request(request)

    def service_actions(self) -> None:  # called by serve_forever at least every poll interval
        self.connections.expire()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("ops server: connection from %s failed", client_address, exc_info=True)


class OpsServer:
    """``/metrics``, ``/healthz``, ``/readyz`` (and ``/map``, ``/map.json``) on ``host:port`` (port 0 = ephemeral).

    ``map_page`` (a ``mapview.MapPage``) serves the map page; its data come
    from ``map_view`` once set (503 until then). ``max_connections`` bounds
    the threads; ``request_timeout`` the seconds a client has to send its
    request, and to take its response.
    """

    #: How often expired connections are closed (seconds; serve_forever's poll interval).
    POLL_SECONDS = 0.1

    def __init__(self, registry: CollectorRegistry, health: HealthState, host: str = "127.0.0.1",
                 port: int = 9108, *, map_page: Any = None, max_connections: int = 32,
                 request_timeout: float = 5.0) -> None:
        self._server = _Server((host, port), _Handler)
        self._server.registry = registry
        self._server.health = health
        self._server.map_page = map_page
        self._server.request_timeout = float(request_timeout)
        self._server.connections = _Connections(max_connections, request_timeout)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": self.POLL_SECONDS},
                                        name="streamembed-ops", daemon=True)

    @property
    def map_view(self) -> Any:
        return self._server.map_view

    @map_view.setter
    def map_view(self, view: Any) -> None:
        self._server.map_view = view

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def open_connections(self) -> int:
        return len(self._server.connections)

    def start(self) -> "OpsServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._server.connections.close_all()
        self._thread.join(timeout=5)
