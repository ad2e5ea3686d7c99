"""Waits on an outside system in progress (the Kafka brokers), so the probes can tell "waiting" from "wedged".

The loop beats once per iteration (``ops.health.HealthState.beat``); a
loop that has not beaten for ``metrics.wedged_after_seconds`` is reported
wedged (``/healthz`` 503, and Kubernetes restarts the pod). But a loop
blocked because the brokers are away is not wedged: it is retrying, and a
restart cannot help (the new process could not start either). So every
place that waits on the brokers runs inside :meth:`ExternalWaits.waiting`
and reports each failed attempt to it; while such a wait keeps making
attempts, the process is alive (``/healthz`` 200) but not ready (``/readyz``
503 naming what it waits for and the last error). A wait that makes no
attempt for ``wedged_after`` seconds no longer counts: a hang stays a hang.

One process-wide registry, :data:`WAITS` (liveness is a property of the
process), usable from every layer.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from dataclasses import dataclass
from collections.abc import Callable, Iterator

__all__ = ["ExternalWaits", "WAITS", "READY_AFTER_SECONDS"]

#: A wait without a failed attempt is reported to /readyz only once it has lasted this long (seconds).
READY_AFTER_SECONDS = 10.0


@dataclass
class _Wait:
    what: str
    system: str
    since: float
    last: float  # the last sign of life: the start, or the last attempt
    detail: str | None = None  # the last failure
    failures: int = 0


class ExternalWaits:
    """The waits on outside systems in progress (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: dict[int, _Wait] = {}
        self._ids = itertools.count()

    @contextlib.contextmanager
    def waiting(self, what: str, system: str = "broker") -> Iterator[Callable[[str], None]]:
        """``with WAITS.waiting("committing offsets") as attempt_failed: ...; attempt_failed("timeout")``."""
        key = next(self._ids)
        now = time.monotonic()
        with self._lock:
            self._waits[key] = _Wait(what, system, now, now)

        def attempt_failed(detail: str) -> None:
            with self._lock:
                w = self._waits.get(key)
                if w is not None:
                    w.last, w.detail, w.failures = time.monotonic(), detail, w.failures + 1

        try:
            yield attempt_failed
        finally:
            with self._lock:
                self._waits.pop(key, None)

    def alive(self, within: float) -> tuple[bool, str | None]:
        """(True, what) if some wait showed a sign of life within ``within`` seconds."""
        now = time.monotonic()
        with self._lock:
            for w in self._waits.values():
                if now - w.last <= within:
                    return True, w.what
        return False, None

    def problems(self) -> dict[str, str]:
        """What the daemon waits for that makes it unready: failed attempts, or a wait of READY_AFTER_SECONDS."""
        now = time.monotonic()
        out: dict[str, str] = {}
        with self._lock:
            for w in self._waits.values():
                if w.failures or now - w.since >= READY_AFTER_SECONDS:
                    tail = f" ({w.failures} failed attempts, the last: {w.detail})" if w.failures else ""
                    out.setdefault(w.system, f"{w.what}: waiting for {now - w.since:.0f} s{tail}")
        return out


#: The process's waits.
WAITS = ExternalWaits()
