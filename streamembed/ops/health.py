"""Liveness and readiness: what ``/healthz`` and ``/readyz`` report (``ops.endpoints`` serves them).

``/healthz`` is 200 while the process is alive and the loop has beaten within
``wedged_after`` seconds, or waits on the brokers and keeps retrying
(``liveness.py``: a restart cannot bring them back), else 503; ``/readyz`` is
200 once the model is loaded and the loop is running, else 503 (naming the
problems: an unreadable input, the brokers away). The state is kept whether
or not the ops server runs: the loop reports to it either way, and it costs
no import of a server.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from streamembed.liveness import WAITS

__all__ = ["HealthState"]


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
        """Alive: the loop beat within ``wedged_after``, or it waits on the brokers and keeps retrying."""
        with self._lock:
            age = time.monotonic() - self._last_beat
            state = self.state
        ok = age <= self.wedged_after
        doc: dict[str, Any] = {"status": "ok" if ok else "wedged", "state": state,
                               "last_beat_age_seconds": round(age, 3)}
        if not ok:
            waiting, what = WAITS.alive(self.wedged_after)
            if waiting:  # blocked by an outside system, and retrying: restarting the process cannot help
                ok = True
                doc.update(status="waiting", waiting_for=what)
        return ok, doc

    def ready(self) -> tuple[bool, dict[str, Any]]:
        outside = WAITS.problems()  # e.g. the brokers away
        with self._lock:
            problems = {**self._problems, **outside}
            ok = self.model_loaded and self.state == "running" and not problems
            doc: dict[str, Any] = {"ready": ok, "model_loaded": self.model_loaded, "state": self.state}
            if problems:
                doc["problems"] = problems
            return ok, doc
