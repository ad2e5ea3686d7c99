"""The real daemon under a supervisor loop, as systemd runs it: restarted after exit 1 or 3, not after 0 or 2.

``deploy/systemd/streamembed.service`` has ``Restart=on-failure`` and
``RestartPreventExitStatus=2``; a daemon that fails the same way on every start
is a crash loop, which the tests count (``exits``: the codes of exits the daemon
made on its own; a ``kill9`` of the test's own is not one).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..e2e.daemon import Daemon

RESTART_CODES = (1, 3)


class Supervised:
    """Starts the daemon and keeps it running: after exit 1/3 it waits ``delay`` s and starts it again.

    ``current`` is the running :class:`Daemon` (ops port known once ``wait_port`` returned);
    at most ``max_starts`` starts, so a crash loop ends the test instead of running for ever.
    """

    def __init__(self, workdir: Path, env: dict[str, str], *, delay: float = 0.5, max_starts: int = 12) -> None:
        self.workdir, self.env, self.delay, self.max_starts = workdir, env, delay, max_starts
        self.starts = 0
        self.exits: list[int] = []
        self.logs: list[str] = []
        self.current: Daemon | None = None
        self._killed = False
        self._stopping = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._start()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _start(self) -> None:
        self.starts += 1
        self.current = Daemon(self.workdir, self.env)

    def _watch(self) -> None:
        while not self._done.is_set():
            d = self.current
            assert d is not None
            code = d.proc.wait()
            d._log.close()
            with self._lock:
                if self._stopping:
                    return
                killed, self._killed = self._killed, False
                self.logs.append(d.log())
                if not killed:
                    self.exits.append(code)
                    if code not in RESTART_CODES or self.starts >= self.max_starts:
                        self._done.set()
                        return
                    time.sleep(self.delay)
                self._start()

    @property
    def crashes(self) -> list[int]:
        """Exits the daemon made on its own with a code a supervisor restarts."""
        return [c for c in self.exits if c in RESTART_CODES]

    def wait_port(self, timeout: float = 30.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            d = self.current
            if d is not None and d.port_file.exists() and d.port_file.read_text().strip():
                d.port = int(d.port_file.read_text())
                return d.port
            time.sleep(0.05)
        raise AssertionError(f"no ops port within {timeout} s; exits {self.exits}")

    def metric(self, name: str, labels: str = "") -> float:
        d = self.current
        try:
            if d is None or d.port is None:
                self.wait_port()
                d = self.current
            assert d is not None
            return d.metric(name, labels)
        except OSError:
            return 0.0

    def kill9(self) -> None:
        """kill -9 the running daemon; the supervisor starts it again at once."""
        with self._lock:
            self._killed = True
            assert self.current is not None
            self.current.proc.kill()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, and the supervisor stops too; returns the exit code."""
        with self._lock:
            self._stopping = True
            d = self.current
        assert d is not None
        code = d.terminate(timeout)
        self.logs.append(d.log())
        self._done.set()
        return code

    def close(self) -> None:
        with self._lock:
            self._stopping = True
        self._done.set()
        if self.current is not None:
            self.current.close()

    def log(self) -> str:
        return "\n".join(self.logs + ([self.current.log()] if self.current is not None else []))
