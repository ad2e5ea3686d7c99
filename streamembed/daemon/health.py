"""Liveness/readiness state and the one small HTTP server that exposes it.

``/metrics``  Prometheus text format (``generate_latest`` of the registry)
``/healthz``  200 while the process is alive and the loop has beaten within
              ``wedged_after`` seconds, else 503
``/readyz``   200 once the model is loaded and the loop is running, else 503

One ``http.server.HTTPServer`` on one daemon thread: requests are served one
at a time, which is plenty for a scraper and a probe.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
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


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body = generate_latest(self.server.registry)
            self._send(200, body, CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            ok, doc = self.server.health.healthy()
            self._send(200 if ok else 503, json.dumps(doc).encode(), "application/json")
        elif path == "/readyz":
            ok, doc = self.server.health.ready()
            self._send(200 if ok else 503, json.dumps(doc).encode(), "application/json")
        else:
            self._send(404, b'{"error": "not found"}', "application/json")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server API
        log.debug("http %s", format % args)


class _Server(HTTPServer):
    registry: CollectorRegistry
    health: HealthState


class OpsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` (port 0 = ephemeral)."""

    def __init__(self, registry: CollectorRegistry, health: HealthState, host: str = "127.0.0.1",
                 port: int = 9108) -> None:
        self._server = _Server((host, port), _Handler)
        self._server.registry = registry
        self._server.health = health
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="streamembed-ops", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    def start(self) -> "OpsServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
