"""Hostile HTTP clients for the ops-server tests: slow headers, slowloris, and a probe that times them.

``SlowClients`` keeps ``dribblers`` sockets that send a request line and then
one header byte every ``dribble_gap`` seconds, and ``loris`` sockets that send
a partial request head and then a whole header line every ``loris_gap``
seconds (the classic slowloris), all from one thread with a selector. A
socket the server closes is opened again at once (an attacker does not give
up), so the pressure never drops. ``probe`` times one ``GET`` on a fresh
connection, the way a Kubernetes probe does.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
import contextlib

__all__ = ["SlowClients", "probe", "ProbeStats"]


@dataclass
class _Slow:
    sock: socket.socket
    kind: str  # "dribble" | "loris"
    next_at: float
    sent: int = 0


class SlowClients(threading.Thread):
    """Slow-header and slowloris connections to ``127.0.0.1:port``, reopened whenever the server closes one."""

    def __init__(self, port: int, *, dribblers: int = 64, loris: int = 300, dribble_gap: float = 2.0,
                 loris_gap: float = 3.0, source: str = "127.0.0.1") -> None:
        super().__init__(daemon=True, name="slow-clients")
        self.port, self.source = port, source
        self.counts = {"dribble": dribblers, "loris": loris}
        self.gaps = {"dribble": dribble_gap, "loris": loris_gap}
        self.stop_event = threading.Event()
        self.opened = 0
        self.closed_by_server = 0
        self.failed_connects = 0
        self._sel = selectors.DefaultSelector()
        self._live: dict[int, _Slow] = {}
        self.ready = threading.Event()

    def _open(self, kind: str, now: float) -> None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=2, source_address=(self.source, 0))
        except OSError:
            self.failed_connects += 1
            return
        s.setblocking(False)
        head = (b"GET /healthz HTTP/1.1\r\n" if kind == "dribble"
                else b"GET /?slow HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris\r\n")
        try:
            s.send(head)
        except OSError:
            s.close()
            return
        gap = self.gaps[kind]
        # spread the sends over the gap, as many independent attackers would be
        slow = _Slow(s, kind, now + gap * ((self.opened % 97) / 97.0))
        self._live[s.fileno()] = slow
        self._sel.register(s, selectors.EVENT_READ, slow)
        self.opened += 1

    def _drop(self, slow: _Slow) -> None:
        self._live.pop(slow.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(slow.sock)
        slow.sock.close()
        self.closed_by_server += 1
        self._open(slow.kind, time.monotonic())

    def live(self, kind: str | None = None) -> int:
        return sum(1 for s in self._live.values() if kind is None or s.kind == kind)

    def run(self) -> None:
        now = time.monotonic()
        for kind, n in self.counts.items():
            for _ in range(n):
                self._open(kind, now)
        self.ready.set()
        while not self.stop_event.is_set():
            self._read()
            now = time.monotonic()
            self._dribble(now)
            # keep the numbers up: connections that could not be reopened are retried
            for kind, n in self.counts.items():
                for _ in range(n - self.live(kind)):
                    self._open(kind, now)
        for slow in list(self._live.values()):
            slow.sock.close()
        self._sel.close()

    def _read(self) -> None:
        """Drop the connections the server closed (or answered, then closed)."""
        for key, _ in self._sel.select(timeout=0.05):
            slow: _Slow = key.data
            try:
                data = slow.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self._drop(slow)

    def _dribble(self, now: float) -> None:
        """Send the next piece of every connection whose gap has passed."""
        for slow in list(self._live.values()):
            if slow.next_at > now:
                continue
            piece = b"a" if slow.kind == "dribble" else b"X-Slow-%d: x\r\n" % slow.sent
            try:
                slow.sock.send(piece)
                slow.sent += 1
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                    self._drop(slow)
                    continue
            slow.next_at = now + self.gaps[slow.kind]

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)


@dataclass
class ProbeStats:
    """Outcomes of timed probes: latencies of those answered with the expected code, and the others."""

    answered: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.answered) + len(self.failed)

    def within(self, seconds: float) -> int:
        return sum(1 for t in self.answered if t <= seconds)


def probe(port: int, path: str = "/healthz", timeout: float = 1.0, source: str = "127.0.0.1") -> tuple[int, float]:
    """(HTTP status, seconds) of one GET on a fresh connection; status 0 when it failed or timed out."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            buf = b""
            while b"\r\n" not in buf:
                left = timeout - (time.monotonic() - t0)
                if left <= 0:
                    return 0, time.monotonic() - t0
                s.settimeout(left)
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        parts = buf.split(b" ", 2)
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        return code, time.monotonic() - t0
    except OSError:
        return 0, time.monotonic() - t0
