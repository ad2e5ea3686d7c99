"""The ops server's endpoints: the one small HTTP server of the daemon, and what it answers.

``/metrics``   Prometheus text format (``generate_latest`` of the registry)
``/healthz``   200 while the process is alive and the loop has beaten within
               ``wedged_after`` seconds, or waits on the brokers and keeps
               retrying (``liveness.py``: a restart cannot bring them back), else 503
``/readyz``    200 once the model is loaded and the loop is running, else 503
               (naming the problems: an unreadable input, the brokers away)
``/map``       the live map page (``ops/static/map.html``, ``ops.map_page``), and
``/map.json``  the data behind it (``ops.map_view.MapView``)

The probes' state is ``ops.health.HealthState``. The server (``ops.server``)
keeps the probes answering under slow and hostile clients: one thread reads every request head, so a waiting connection
costs no thread; a connection must deliver its request line and headers
within ``request_timeout`` seconds in all (whether it sends nothing, half a
request line, or its headers a byte at a time) and take its response within
as many, or it is closed; open connections are bounded per client address and
in all, a new one beyond a limit closing the one that has waited longest for
its request; ``/healthz`` and ``/readyz`` are answered the moment their
request has arrived, never queued behind ``/metrics``; refusals are logged
rate-limited. Only GET is served, and only to requests whose ``Host`` is a
loopback name, an IP address or one of ``metrics.allowed_hosts`` (421
otherwise: ``ops.hosts``); the responses are small, computed in
memory, and never read a file named by the request.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from streamembed.ops.health import HealthState
from streamembed.ops.hosts import HostAllowList
from streamembed.ops.server import HttpServer, Response

__all__ = ["OpsServer"]

log = logging.getLogger("streamembed.health")


#: Headers on every response: no MIME sniffing, no caching, no referrer.
_COMMON_HEADERS = (("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"),
                   ("Referrer-Policy", "no-referrer"))
#: The policy of every response but the map page: nothing may load or run.
_NOTHING_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def _response(code: int, body: bytes, ctype: str, policy: str = _NOTHING_POLICY) -> Response:
    return Response(code, body, [("Content-Type", ctype), ("Content-Security-Policy", policy)])


class OpsServer:
    """``/metrics``, ``/healthz``, ``/readyz`` (and ``/map``, ``/map.json``) on ``host:port`` (port 0 = ephemeral).

    Served by :class:`~streamembed.ops.server.HttpServer`: the probes and
    the map page are answered on its own thread as soon as their request has
    arrived (they cannot be starved by slow clients or a slow ``/metrics``);
    ``/metrics`` and ``/map.json`` on worker threads. ``map_page`` (a
    ``ops.map_page.MapPage``) serves the map page; its data come from
    ``map_view`` once set (503 until then). ``max_connections`` bounds the
    open connections, ``max_per_client`` those of one client address;
    ``request_timeout`` is the seconds a client has to send its whole
    request, and to take its response; ``allowed_hosts`` the names a request's
    ``Host`` may give besides loopback names and IP addresses (``ops.hosts``:
    others are answered 421, against DNS rebinding).
    """

    def __init__(self, registry: CollectorRegistry, health: HealthState, host: str = "127.0.0.1",
                 port: int = 9108, *, map_page: Any = None, max_connections: int = 512, max_per_client: int = 64,
                 request_timeout: float = 5.0, allowed_hosts: str = "") -> None:
        self.registry = registry
        self.health = health
        self.map_page = map_page
        self.map_view: Any = None  # ops.map_view.MapView, attached once the daemon has assembled its model
        self._server = HttpServer(host, port, inline=self._inline, routes=self._routes,
                                  common_headers=_COMMON_HEADERS, max_connections=max_connections,
                                  max_per_client=max_per_client, request_timeout=request_timeout,
                                  hosts=HostAllowList(allowed_hosts))

    def _inline(self, path: str) -> Response | None:
        """The probes (and the constant map page): answered at once, on the server's own thread."""
        if path == "/healthz":
            ok, doc = self.health.healthy()
            return _response(200 if ok else 503, json.dumps(doc).encode(), "application/json")
        if path == "/readyz":
            ok, doc = self.health.ready()
            return _response(200 if ok else 503, json.dumps(doc).encode(), "application/json")
        if path == "/map" and self.map_page is not None:
            return _response(200, self.map_page.html, "text/html; charset=utf-8", policy=self.map_page.policy)
        if path in ("/metrics", "/map.json"):
            return None
        return _response(404, b'{"error": "not found"}', "application/json")

    def _routes(self, path: str) -> Response:
        """What takes longer: on a worker thread."""
        if path == "/metrics":
            return _response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
        if path == "/map.json" and self.map_page is not None:
            view = self.map_view
            if view is None:
                return _response(503, b'{"error": "the daemon is starting"}', "application/json")
            try:
                body = view.json_bytes()
            except Exception:  # a bug in the view must not cost the probes their server
                log.exception("building /map.json failed")
                return _response(500, b'{"error": "the map could not be built; see the daemon log"}',
                                 "application/json")
            return _response(200, body, "application/json")
        return _response(404, b'{"error": "not found"}', "application/json")

    @property
    def port(self) -> int:
        return self._server.address[1]

    @property
    def host(self) -> str:
        return self._server.address[0]

    @property
    def open_connections(self) -> int:
        return self._server.open_connections

    @property
    def refusals(self) -> Any:
        """The rate-limited log of refused and closed connections (``ops.logs.RateLimitedLog``)."""
        return self._server.refusals

    def start(self) -> OpsServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()
