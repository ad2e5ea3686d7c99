"""End a finished one-shot command without tearing the interpreter down.

After its last statement a process that imported numpy and pyarrow spends
0.03-0.08 s in the interpreter's finalisation (every module's objects freed
one by one, the BLAS and Arrow thread pools joined) before the shell gets its
prompt back: 5-10 % of ``streamembed embed``'s whole run on a million rows, a
sixth of it on a small file. Nothing is left to do by then: ``embed``
publishes its output and dead letters (fsynced and renamed) before its
``main`` returns, and closes its sources, sinks and threads.

So ``embed``, once its loop has ended and its sinks are closed, says so
(:func:`allow`; its ``--dask`` path does not), the entry points hand
``main``'s exit code to :func:`finish`, and for :data:`QUICK_EXIT_COMMANDS`
that were allowed :func:`finish` flushes what Python buffers (``sys.stdout``,
``sys.stderr``), runs the ``atexit`` handlers (``logging.shutdown`` among
them) and ends the process with ``os._exit(code)``. Anything else returns the
code to ``sys.exit`` as before: the other commands, an ``embed`` on a dask
cluster (its client's own clean-up is left to run) or one that stopped before
its loop ended, an exit raised rather
than returned (``--help``, a usage error), and a flush that fails (a closed
pipe: Python's own exit reports it as usual).
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable, Sequence

__all__ = ["QUICK_EXIT_COMMANDS", "allow", "finish", "quick"]

#: Commands (the first word of the command line) that end through :func:`finish`.
QUICK_EXIT_COMMANDS = ("embed",)


_ALLOWED = [False]


def allow() -> None:
    """Say that nothing this command started is left running or unwritten: :func:`finish` may end the process."""
    _ALLOWED[0] = True


def quick(argv: Sequence[str]) -> bool:
    """Whether the command line ``argv`` (without the program name) ends through ``os._exit``."""
    return bool(argv) and argv[0] in QUICK_EXIT_COMMANDS and not any(
        a == "--dask" or a.startswith("--dask=") for a in argv)


def finish(code: int | None, argv: Sequence[str], *, exit_now: Callable[[int], object] = os._exit) -> int | None:
    """End the process with ``code`` at once for a command :func:`quick` names that called :func:`allow`; else
    return ``code``.

    ``exit_now``: what ends the process (tests pass a recorder).
    """
    if not _ALLOWED[0] or not quick(argv) or not isinstance(code, int):
        return code
    if not _flushed():
        return code
    atexit._run_exitfuncs()
    if not _flushed():  # a handler's output
        return code
    exit_now(code)
    return code  # only with an ``exit_now`` that returns


def _flushed() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True
