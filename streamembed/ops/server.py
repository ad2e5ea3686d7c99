"""A small HTTP/1.0 GET server that keeps answering its probes under slow and hostile clients.

One thread owns every socket (a ``selectors`` loop): it accepts, reads
request heads, writes responses and enforces the limits, so a connection
costs a few hundred bytes and no thread while its request is arriving. What
that buys:

* **A deadline for the whole request.** A connection must deliver its request
  line *and all its headers* within ``request_timeout`` seconds of being
  accepted, however it trickles them in (nothing, half a line, a header byte
  every second), and take its response within as many; otherwise it is
  closed. A head longer than ``MAX_HEAD_BYTES`` is answered 431.
* **Bounded connections, per client and in all.** At most
  ``max_per_client`` open connections per client address and
  ``max_connections`` in all; a new connection beyond either limit closes the
  one (of that client, or of all) that has waited longest for its request to
  arrive, so idle sockets cannot lock anybody out, and an attacker's sockets
  push out its own first.
* **A path that cannot be starved.** ``inline`` paths (the probes: cheap,
  computed in memory) are answered by the loop thread the moment their
  request head is complete; they never wait for a worker. Other paths
  (``/metrics``, ``/map.json``: they take milliseconds) go to ``workers``
  threads; when those are all busy and ``MAX_QUEUED`` requests wait, more are
  answered 503 at once.
* **Refusals logged, rate-limited.** Connections closed or refused by a limit
  are counted and reported in at most one WARNING per
  ``REFUSAL_LOG_SECONDS`` (the first at once), never one line each.

One request per connection (HTTP/1.0, ``Connection: close``); only GET is
served (other known methods 405, unknown ones 501); with ``hosts``, a request
naming a ``Host`` the allow-list refuses is answered 421 (``ops.hosts``).
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from collections.abc import Callable

from streamembed.ops.hosts import HostAllowList, host_header
from streamembed.ops.logs import RateLimitedLog
import contextlib

__all__ = ["Response", "HttpServer", "MAX_HEAD_BYTES"]

log = logging.getLogger("streamembed.health")

#: Longest request head (request line and headers) accepted, in bytes.
MAX_HEAD_BYTES = 16 * 1024
#: Requests waiting for a worker beyond the busy workers; more are answered 503 at once.
MAX_QUEUED = 64
#: At most one WARNING about refused or closed connections this often (seconds).
REFUSAL_LOG_SECONDS = 10.0
#: How often the loop wakes to enforce deadlines (seconds).
POLL_SECONDS = 0.1
#: Connections accepted per readiness event (the rest wait in the kernel's queue for the next turn).
ACCEPT_BURST = 64
_KNOWN_METHODS = frozenset({"POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT"})


@dataclass
class Response:
    """A complete response: status, body, and headers besides Content-Length (Content-Type first)."""

    code: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    def encode(self, common: tuple[tuple[str, str], ...]) -> bytes:
        try:
            reason = HTTPStatus(self.code).phrase
        except ValueError:
            reason = ""
        lines = [f"HTTP/1.0 {self.code} {reason}", "Server: streamembed", f"Date: {formatdate(usegmt=True)}"]
        lines += [f"{k}: {v}" for k, v in self.headers]
        lines += [f"{k}: {v}" for k, v in common]
        lines += [f"Content-Length: {len(self.body)}", "Connection: close"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


def _within_fd_limit(n: int) -> int:
    """``n`` connections, fewer if the process may not open that many files (keeping 256 for the rest)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return int(n)
    if soft == resource.RLIM_INFINITY:
        return int(n)
    return max(16, min(int(n), int(soft) - 256))


def _plain(code: int, text: str, extra: list[tuple[str, str]] | None = None) -> Response:
    return Response(code, f"{code} {text}\n".encode(), [("Content-Type", "text/plain; charset=utf-8"), *(extra or [])])


class _Conn:
    """One connection: its client address, when it was accepted, what has arrived, what is left to send."""

    __slots__ = ("sock", "client", "since", "inbuf", "outbuf", "state", "deadline")

    def __init__(self, sock: socket.socket, client: str, now: float, timeout: float) -> None:
        self.sock, self.client, self.since = sock, client, now
        self.inbuf = bytearray()
        self.outbuf = memoryview(b"")
        self.state = "reading"  # reading -> working (a worker computes the response) -> writing
        self.deadline = now + timeout


class _Limits:
    """Open connections per client and in all, and which of them are still waiting for their request (oldest first)."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = int(total), int(per_client)
        self.open: dict[socket.socket, _Conn] = {}
        self.reading: OrderedDict[socket.socket, _Conn] = OrderedDict()  # accept order
        self.by_client: dict[str, OrderedDict[socket.socket, _Conn]] = {}  # reading ones, accept order
        self.count: dict[str, int] = {}

    def victim(self, client: str) -> tuple[_Conn | None, str | None]:
        """The connection to close so that one more from ``client`` fits: (victim, limit hit); (None, limit): refuse."""
        if self.count.get(client, 0) >= self.per_client:
            mine = self.by_client.get(client)
            return (next(iter(mine.values())) if mine else None), "per_client"
        if len(self.open) >= self.total:
            return (next(iter(self.reading.values())) if self.reading else None), "total"
        return None, None

    def add(self, c: _Conn) -> None:
        self.open[c.sock] = c
        self.reading[c.sock] = c
        self.by_client.setdefault(c.client, OrderedDict())[c.sock] = c
        self.count[c.client] = self.count.get(c.client, 0) + 1

    def request_arrived(self, c: _Conn) -> None:
        self.reading.pop(c.sock, None)
        self._unread(c)

    def _unread(self, c: _Conn) -> None:
        mine = self.by_client.get(c.client)
        if mine is not None:
            mine.pop(c.sock, None)
            if not mine:
                del self.by_client[c.client]

    def remove(self, c: _Conn) -> None:
        if self.open.pop(c.sock, None) is None:
            return
        self.reading.pop(c.sock, None)
        self._unread(c)
        n = self.count.get(c.client, 1) - 1
        if n:
            self.count[c.client] = n
        else:
            self.count.pop(c.client, None)


class HttpServer:
    """GET ``path -> Response`` over HTTP/1.0 on ``host:port`` (see the module doc).

    ``inline(path)`` returns the response for a path answered on the loop
    thread (cheap, in memory), or None to hand the request to ``routes(path)``
    on a worker thread. Exceptions of either become 500.
    """

    def __init__(self, host: str, port: int, *, inline: Callable[[str], Response | None],
                 routes: Callable[[str], Response], common_headers: tuple[tuple[str, str], ...] = (),
                 max_connections: int = 512, max_per_client: int = 64, request_timeout: float = 5.0,
                 workers: int = 4, name: str = "streamembed-ops", hosts: HostAllowList | None = None) -> None:
        self.inline, self.routes, self.common = inline, routes, tuple(common_headers)
        self.hosts = hosts
        self.request_timeout = float(request_timeout)
        self.name = name
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listen = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listen.bind((host, port))
            self._listen.listen(4096)  # a burst waits in the kernel (capped by net.core.somaxconn), not refused
            self._listen.setblocking(False)
        except OSError:
            self._listen.close()
            raise
        self._limits = _Limits(_within_fd_limit(max_connections), max_per_client)
        self._accept_paused = 0.0
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._done: deque[tuple[_Conn, Response]] = deque()  # worker results for the loop thread
        self._pool = ThreadPoolExecutor(max_workers=max(1, int(workers)), thread_name_prefix=f"{name}-worker")
        self._queued = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.refusals = RateLimitedLog(log, REFUSAL_LOG_SECONDS, what="ops server: connections closed or refused")

    # ------------------------------------------------------------------ public
    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listen.getsockname()[:2]
        return str(host), int(port)

    @property
    def open_connections(self) -> int:
        return len(self._limits.open)

    def start(self) -> HttpServer:
        self._sel.register(self._listen, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for c in list(self._limits.open.values()):
            self._close(c)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._listen.close()
        self._sel.close()

    # ------------------------------------------------------------------ the loop
    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                events = self._sel.select(timeout=POLL_SECONDS)
            except OSError:  # closed under us while stopping
                return
            accept = False
            # requests that have arrived first, new connections last: a connection accepted in this turn
            # cannot push out one whose request is already waiting to be read
            for key, mask in events:
                if key.data == "listen":
                    accept = True
                elif key.data == "wake":
                    self._drain_wake()
                else:
                    c: _Conn = key.data
                    if mask & selectors.EVENT_READ:
                        self._read(c)
                    if mask & selectors.EVENT_WRITE and c.state == "writing":
                        self._write(c)
            self._finish_work()
            if accept:
                self._accept()
            now = time.monotonic()
            if self._accept_paused and now >= self._accept_paused:
                self._accept_paused = 0.0
                self._sel.register(self._listen, selectors.EVENT_READ, "listen")
            self._expire(now)
            self.refusals.tick()

    def _accept(self) -> None:
        for _ in range(ACCEPT_BURST):
            try:
                sock, addr = self._listen.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors: make room, or pause accepting for a moment
                self.refusals.event("accept_failed", f"accepting a connection failed: {exc}")
                if self._limits.reading:
                    self._close(next(iter(self._limits.reading.values())))
                    continue
                self._sel.unregister(self._listen)
                self._accept_paused = time.monotonic() + POLL_SECONDS
                return
            sock.setblocking(False)
            c = _Conn(sock, str(addr[0]), time.monotonic(), self.request_timeout)
            # a request that is already there is answered without taking a waiting slot, so no limit and no
            # eviction can keep a complete request (a probe) from being answered
            try:
                first = sock.recv(MAX_HEAD_BYTES)
            except (BlockingIOError, InterruptedError):
                first = None
            except OSError:
                first = b""
            if first == b"":
                sock.close()
                continue
            if first is not None:
                c.inbuf += first
                if self._head_end(c, 0) is not None or len(c.inbuf) > MAX_HEAD_BYTES:
                    self._limits.add(c)
                    self._sel.register(sock, selectors.EVENT_READ, c)
                    self._parse(c, 0)
                    continue
            if not self._admit(c):
                sock.close()
                continue
            self._limits.add(c)
            self._sel.register(sock, selectors.EVENT_READ, c)

    def _admit(self, c: _Conn) -> bool:
        """Make room for one more waiting connection of ``c.client`` (closing the longest-waiting); False: refuse."""
        while True:
            victim, limit = self._limits.victim(c.client)
            if limit is None:
                return True
            what = limit.replace("_", " ")
            if victim is None:  # every connection within the limit is being answered: refuse this one
                self.refusals.event(limit, f"refused a connection from {c.client}: at the {what} connection limit "
                                           f"and every connection is being answered")
                return False
            self.refusals.event(limit, f"closed the connection from {victim.client} that had waited longest for its "
                                       f"request: at the {what} connection limit")
            self._close(victim)

    def _read(self, c: _Conn) -> None:
        try:
            data = c.sock.recv(MAX_HEAD_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away
            self._close(c)
            return
        if c.state != "reading":
            return  # bytes after the head (a body, a pipelined request): ignored
        start = max(0, len(c.inbuf) - 3)
        c.inbuf += data
        self._parse(c, start)

    @staticmethod
    def _head_end(c: _Conn, start: int) -> tuple[int, int] | None:
        """(end of the head, length of its blank-line separator) once the head is complete, else None."""
        end = c.inbuf.find(b"\r\n\r\n", start)
        if end >= 0:
            return end, 4
        end = c.inbuf.find(b"\n\n", start)
        return (end, 2) if end >= 0 else None

    def _parse(self, c: _Conn, start: int) -> None:
        found = self._head_end(c, start)
        if found is None:
            if len(c.inbuf) > MAX_HEAD_BYTES:
                self._respond(c, _plain(431, "Request Header Fields Too Large"))
            return
        end, sep = found
        if end + sep > MAX_HEAD_BYTES:
            self._respond(c, _plain(431, "Request Header Fields Too Large"))
            return
        self._dispatch(c, bytes(c.inbuf[:end]))

    def _dispatch(self, c: _Conn, head: bytes) -> None:
        self._limits.request_arrived(c)
        line = head.split(b"\n", 1)[0].rstrip(b"\r")
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/") or not parts[0].isalpha():
            self._respond(c, _plain(400, "Bad Request"))
            return
        method = parts[0].decode("ascii", "replace")
        if method != "GET":
            if method in _KNOWN_METHODS:
                self._respond(c, _plain(405, "Method Not Allowed", [("Allow", "GET")]))
            else:
                self._respond(c, _plain(501, "Not Implemented"))
            return
        if self.hosts is not None and not self.hosts.allowed(host_header(head)):
            self.refusals.event("host", "answered 421: a Host name not in metrics.allowed_hosts")
            self._respond(c, _plain(421, "Misdirected Request"))
            return
        path = parts[1].decode("latin-1").split("?", 1)[0]  # query strings are ignored
        try:
            now = self.inline(path)
        except Exception:  # a bug must not cost the probes their server
            log.exception("answering %r failed", path[:100])
            now = _plain(500, "Internal Server Error")
        if now is not None:
            self._respond(c, now)
            return
        if self._queued >= MAX_QUEUED:
            self.refusals.event("busy", "answered 503: every worker is busy and the queue is full")
            self._respond(c, _plain(503, "Service Unavailable"))
            return
        c.state = "working"
        self._sel.unregister(c.sock)
        self._queued += 1
        self._pool.submit(self._work, c, path)

    def _work(self, c: _Conn, path: str) -> None:
        try:
            resp = self.routes(path)
        except Exception:
            log.exception("answering %r failed", path[:100])
            resp = _plain(500, "Internal Server Error")
        self._done.append((c, resp))
        self._wake()

    def _finish_work(self) -> None:
        while self._done:
            c, resp = self._done.popleft()
            self._queued -= 1
            if c.sock in self._limits.open:
                self._respond(c, resp, registered=False)

    def _respond(self, c: _Conn, resp: Response, registered: bool = True) -> None:
        self._limits.request_arrived(c)
        c.state = "writing"
        c.outbuf = memoryview(resp.encode(self.common))
        c.deadline = time.monotonic() + self.request_timeout
        if registered:
            self._sel.modify(c.sock, selectors.EVENT_WRITE, c)
        else:
            self._sel.register(c.sock, selectors.EVENT_WRITE, c)
        self._write(c)

    def _write(self, c: _Conn) -> None:
        try:
            n = c.sock.send(c.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(c)
            return
        c.outbuf = c.outbuf[n:]
        if not c.outbuf:
            with contextlib.suppress(OSError):
                c.sock.shutdown(socket.SHUT_WR)
            self._close(c)

    def _expire(self, now: float) -> None:
        # reading connections are in accept order: the first one not yet due ends the scan
        while self._limits.reading:
            c = next(iter(self._limits.reading.values()))
            if c.deadline > now:
                break
            self.refusals.event("slow", f"closed a connection from {c.client} that did not send its request within "
                                        f"{self.request_timeout:g} s")
            self._close(c)
        late = [c for c in self._limits.open.values() if c.state == "writing" and c.deadline <= now]
        for c in late:
            self.refusals.event("slow", f"closed a connection from {c.client} that did not take its response within "
                                        f"{self.request_timeout:g} s")
            self._close(c)

    def _close(self, c: _Conn) -> None:
        self._limits.remove(c)
        if c.state != "working":
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(c.sock)
        c.state = "closed"
        with contextlib.suppress(OSError):
            c.sock.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a wake-up is already pending (or the server is closing)
            os.write(self._wake_w, b"x")

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
