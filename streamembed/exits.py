"""Why a process of streamembed stops: its exit codes (0 ok, 1 a bug, 2 refused, 3 the environment; the table
is ``daemon.errors``') and the two errors that choose codes 2 and 3 at start-up.

Any layer that builds part of a run (a source kind's builder under ``stream/sources/`` or ``kafka/``, the
daemon's assembly) raises :class:`StartupError` or :class:`EnvironmentUnavailable`; ``daemon.app`` turns them
into codes 2 and 3 (``daemon.errors`` re-exports them with the environment-error test).
"""

from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_REFUSED", "EXIT_UNAVAILABLE", "StartupError", "EnvironmentUnavailable"]

EXIT_OK, EXIT_FAILED, EXIT_REFUSED, EXIT_UNAVAILABLE = 0, 1, 2, 3


class StartupError(RuntimeError):
    """The daemon refuses to start (exit 2): configuration, model or state a restart cannot fix."""


class EnvironmentUnavailable(RuntimeError):
    """The environment is not ready (exit 3): retrying later may succeed."""
