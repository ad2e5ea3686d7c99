"""The daemon's signals, caught from the first moments of the process.

| signal | effect |
| --- | --- |
| SIGTERM, SIGINT, SIGHUP | stop: finish the current batch, flush (at most ``run.stop_seconds``), checkpoint, exit 0 |
| SIGUSR1 | ask for a refit (``streamembed refit`` sends it); ignored with a WARNING when refits are off |

Python's defaults would kill the process on SIGUSR1 and SIGHUP and raise
``KeyboardInterrupt`` anywhere on SIGINT, and a signal can come at any time:
``streamembed refit`` right after a start, a supervisor stopping a daemon
that is still importing or waiting for its brokers. So ``python -m
streamembed run`` and the ``streamembed`` command install these handlers
before importing anything else (:func:`install_early`); until the daemon has
built its loop they only record what arrived (:data:`PENDING`), and
:class:`DaemonSignals` hands that over: a stop asked for during start-up
stops the daemon as soon as it can look (every wait at start-up checks it),
with exit 0; a refit asked for before the refit manager exists is requested
once it does.

This module imports only the standard library.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

__all__ = ["STOP_SIGNALS", "REFIT_SIGNAL", "PENDING", "install_early", "install_early_if_daemon", "DaemonSignals"]

log = logging.getLogger("streamembed.daemon")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
REFIT_SIGNAL = signal.SIGUSR1


class _Pending:
    """What arrived before (or while) a daemon listened: the first stop signal, the refit requests."""

    def __init__(self) -> None:
        self.stop_signal: int | None = None
        self.refits = 0
        self.stop: threading.Event | None = None
        self.on_refit: Callable[[], None] | None = None

    def clear(self) -> None:
        self.stop_signal, self.refits, self.stop, self.on_refit = None, 0, None, None


#: The process-wide record the handlers write to.
PENDING = _Pending()


def _on_stop(signum: int, frame: FrameType | None) -> None:
    if PENDING.stop_signal is None:
        PENDING.stop_signal = signum
    if PENDING.stop is not None:
        if not PENDING.stop.is_set():
            log.info("signal received; stopping after the current batch", extra={"signal": signal.Signals(signum).name})
        PENDING.stop.set()


def _on_refit(signum: int, frame: FrameType | None) -> None:
    if PENDING.on_refit is not None:
        PENDING.on_refit()
    else:
        PENDING.refits += 1


def _install() -> dict[int, Any]:
    """Install the handlers (main thread only); returns the handlers they replace."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    old: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        old[sig] = signal.signal(sig, _on_stop)
    old[REFIT_SIGNAL] = signal.signal(REFIT_SIGNAL, _on_refit)
    return old


def install_early() -> None:
    """Catch the daemon's signals from now on, recording them until a daemon listens (see the module doc)."""
    _install()


def install_early_if_daemon(argv: Sequence[str]) -> None:
    """:func:`install_early` when the command line runs the daemon (``streamembed run ...``)."""
    if list(argv[:1]) == ["run"]:
        install_early()


class DaemonSignals:
    """While the daemon runs: a stop signal sets ``stop``; SIGUSR1 calls :attr:`on_refit` (once set).

    A stop or refit that arrived before (since :func:`install_early`) takes effect on entry, or when
    :attr:`on_refit` is set. The previous handlers are restored on exit.
    """

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self._old: dict[int, Any] = {}

    @property
    def on_refit(self) -> Callable[[], None] | None:
        return PENDING.on_refit

    @on_refit.setter
    def on_refit(self, call: Callable[[], None] | None) -> None:
        PENDING.on_refit = call
        if call is not None and PENDING.refits:
            log.info("a refit asked for during start-up (SIGUSR1) is requested now")
            PENDING.refits = 0
            call()

    def __enter__(self) -> DaemonSignals:
        self._old = _install()
        PENDING.stop = self.stop
        if PENDING.stop_signal is not None:
            log.info("a stop signal (%s) arrived during start-up: stopping", signal.Signals(PENDING.stop_signal).name)
            self.stop.set()
        return self

    def unanswered_refits(self) -> int:
        """Refit requests that arrived while no refit manager listened (refits off)."""
        return PENDING.refits

    def __exit__(self, *exc: object) -> None:
        if PENDING.refits:
            log.warning("%d refit request(s) (SIGUSR1) were ignored: refits are off (drift.enabled = false)",
                        PENDING.refits)
        PENDING.clear()
        for sig, old in self._old.items():
            signal.signal(sig, old)
