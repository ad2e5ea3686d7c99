"""The ops server answers only requests naming a loopback name, an IP address or a configured host (attack #6).

Issue 35, attack #6: a request with ``Host: evil.example`` (DNS rebinding through an operator's tunnel) was
served ``/map.json`` and ``/metrics`` 8 times of 8. Every route now answers it 421.
"""

from __future__ import annotations

import socket

import pytest

from streamembed.ops.endpoints import OpsServer
from streamembed.ops.health import HealthState
from streamembed.ops.hosts import HostAllowList, host_header
from streamembed.ops.metrics import Metrics


def _get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    head = f"GET {path} HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host is not None else "") + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head.encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    health = HealthState(60.0)
    health.model_loaded = True
    srv = OpsServer(Metrics().registry, health, port=0, allowed_hosts="streamembed.example.org, scrape-me")
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("path", ["/metrics", "/map.json", "/map", "/healthz", "/readyz", "/nowhere"])
@pytest.mark.parametrize("host", ["evil.example", "evil.example:9108", "127.0.0.1.evil.example",
                                  "localhost.evil.example", "streamembed.example.org.evil.example"])
def test_another_host_name_is_answered_421_on_every_route(server: OpsServer, path: str, host: str) -> None:
    status, body = _get(server.port, path, host)
    assert status == 421 and b"streamembed" not in body


@pytest.mark.parametrize("host", [None, "127.0.0.1", "127.0.0.1:9108", "[::1]:9108", "10.1.2.3:9108", "localhost",
                                  "LOCALHOST:9108", "grafana.localhost", "streamembed.example.org:9108",
                                  "Scrape-Me", "localhost."])
def test_loopback_names_ip_addresses_and_configured_names_are_served(server: OpsServer, host: str | None) -> None:
    status, body = _get(server.port, "/metrics", host)
    assert status == 200 and b"streamembed_records_in_total" in body


def test_star_allows_any_name_and_the_header_is_found_in_any_case() -> None:
    assert HostAllowList("*").allowed("evil.example")
    assert not HostAllowList("").allowed("evil.example")
    assert host_header(b"GET / HTTP/1.1\r\nX: y\r\nhOsT:  a.b:1 \r\n") == "a.b:1"
    assert host_header(b"GET / HTTP/1.0\r\n") is None
