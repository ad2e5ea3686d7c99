"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for the map page's tests.

No Selenium or Playwright: the browser is started with
``--remote-debugging-port=0``, writes its port to ``DevToolsActivePort`` in
its profile, and this module talks to the page's DevTools websocket with a
minimal RFC 6455 client (text frames, client masking, no extensions).
What the tests need: navigate, evaluate JavaScript, wait for a condition,
move the mouse, type, take a screenshot, and the list of every URL the page
requested and every error it logged.

Name resolution is mapped to nothing except 127.0.0.1, so a page that tried
to reach the internet (a CDN, a font) would fail visibly.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tools.process import stop_process
import contextlib

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    if CHROMIUM is None:
        pytest.skip("headless Chromium is not installed (Debian package `chromium`; .ci/install.sh installs it)")
    return CHROMIUM


class _WebSocket:
    """Just enough of a websocket client for the DevTools protocol."""

    _GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, url: str, timeout: float) -> None:
        u = urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the websocket handshake")
            head += chunk
        head, self._buf = head.split(b"\r\n\r\n", 1)
        accept = base64.b64encode(hashlib.sha1((key + self._GUID).encode()).digest()).decode()
        if not head.startswith(b"HTTP/1.1 101") or accept.encode() not in head:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the browser closed the websocket")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def send(self, text: str) -> None:
        payload = text.encode()
        n = len(payload)
        head = bytes([0x81])  # FIN, text
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def recv(self) -> str:
        parts: list[bytes] = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)  # the server does not mask
            opcode = b0 & 0x0F
            if opcode == 8:
                raise ConnectionError("the browser closed the websocket")
            if opcode in (9, 10):  # ping / pong: not used by the DevTools server
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Browser:
    """One headless Chromium with one page; ``close`` ends it (use as a context manager)."""

    def __init__(self, workdir: Path, width: int = 1400, height: int = 900, timeout: float = 30.0) -> None:
        exe = require_chromium()
        self.profile = workdir / f"chromium-{time.monotonic_ns()}"
        self.profile.mkdir(parents=True)
        self.timeout = timeout
        self.log_path = workdir / f"chromium-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - the child's log stays open for its lifetime
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
               "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
               f"--user-data-dir={self.profile}", "--remote-debugging-port=0", f"--window-size={width},{height}",
               "about:blank"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self._id = 0
        self.events: list[dict[str, Any]] = []
        try:
            self.ws = _WebSocket(self._page_socket(), timeout)
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
        except BaseException:
            self.close()
            raise

    def _page_socket(self) -> str:
        port_file = self.profile / "DevToolsActivePort"
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited ({self.proc.returncode}):\n{self.log_path.read_text()}")
            if port_file.exists() and port_file.read_text().strip():
                port = int(port_file.read_text().split()[0])
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.05)
        raise TimeoutError(f"chromium did not open its DevTools port within {self.timeout} s")

    # ------------------------------------------------------------------ the protocol
    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        my = self._id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"no answer to {method} within {self.timeout} s")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        got = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in got:
            raise RuntimeError(f"{expression!r} raised: {got['exceptionDetails']}")
        return got["result"].get("value")

    def wait(self, expression: str, timeout: float, what: str) -> Any:
        """Poll ``expression`` until it is truthy (at most ``timeout`` seconds); returns its value."""
        end = time.monotonic() + timeout
        value = None
        while time.monotonic() < end:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        pytest.fail(f"timed out after {timeout} s waiting for {what} ({expression} = {value!r})")

    # ------------------------------------------------------------------ what the tests do
    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait("document.readyState === 'complete'", self.timeout, f"{url} to load")

    def mouse_move(self, x: float, y: float) -> None:
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def type_into(self, selector: str, text: str) -> None:
        """Focus the element and type ``text`` as keyboard input (fires ``input`` events)."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def errors(self) -> list[str]:
        """Exceptions and error-level log/console entries the page produced (CSP refusals among them)."""
        out = []
        for e in self.events:
            p = e["params"]
            if e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p["exceptionDetails"])[:500])
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"{p['entry'].get('source')}: {p['entry']['text']} ({p['entry'].get('url', '')})")
            elif e["method"] == "Runtime.consoleAPICalled" and p["type"] == "error":
                out.append(json.dumps(p["args"])[:500])
        return out

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        stop_process(self.proc)
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
