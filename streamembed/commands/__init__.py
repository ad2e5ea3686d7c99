"""The subcommands of the ``streamembed`` command line, one module each (``streamembed.cli`` parses and dispatches).

Exit codes shared by every subcommand: 0 success, 1 done with failures (e.g.
``embed`` wrote dead letters) or failed while running, 2 refused (bad
arguments, configuration, model or input: the message says what to fix),
3 the environment is not ready (``run``: retry later).
"""

from __future__ import annotations

__all__ = ["Refused", "EXIT_OK", "EXIT_FAILED", "EXIT_REFUSED"]

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


class Refused(Exception):
    """Refuse with exit code 2 and this message."""
