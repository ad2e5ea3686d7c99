"""Time budgets for the iterative solvers: a per-batch deadline and a cancel flag.

Every iterative method has an iteration cap of its own; this adds a wall-time
bound per batch and a way to stop mid-batch, without threading a parameter
through every solver's signature. The caller (the streaming layer) opens a
budget around one batch::

    with budget.limit(seconds=30.0, cancelled=stop.is_set):
        model.place(A, method="stress")

and the solvers call :func:`spent` between iterations: True means the time
is up (stop, keep the best iterate so far, report those rows as not
converged); if the cancel flag is set it raises :class:`Cancelled` instead,
which is not an error of any record (the batch is simply not finished: its
input is read again after the restart). Without a budget, :func:`spent` is
always False. The state is a context variable, so threads do not share it.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass
from collections.abc import Callable, Iterator

__all__ = ["Cancelled", "limit", "spent"]


class Cancelled(BaseException):
    """The caller asked to stop now (e.g. SIGTERM); a BaseException so that no record-level guard contains it."""


@dataclass(frozen=True)
class _Budget:
    deadline: float
    cancelled: Callable[[], bool] | None


_current: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("streamembed_budget", default=None)


@contextlib.contextmanager
def limit(seconds: float | None, cancelled: Callable[[], bool] | None = None) -> Iterator[None]:
    """Bound the iterative work inside the block by ``seconds`` of wall time (None: unbounded)."""
    deadline = float("inf") if seconds is None or seconds <= 0 else time.monotonic() + seconds
    token = _current.set(_Budget(deadline, cancelled))
    try:
        yield
    finally:
        _current.reset(token)


def spent() -> bool:
    """True once the current budget's time is up; raises Cancelled when its cancel flag is set."""
    b = _current.get()
    if b is None:
        return False
    if b.cancelled is not None and b.cancelled():
        raise Cancelled("stop requested")
    return time.monotonic() > b.deadline
