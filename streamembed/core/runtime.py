"""The compute resources the core uses: worker threads, BLAS threads, time budgets.

**Worker threads.** ``default_threads()`` = min(2, CPUs) is how many threads
the hot paths split a batch over when the caller does not say
(``n_threads=None``). They run on the process's one pool,
``worker_pool()``: the projection kernel (``core.place.projection``), single-object
RR (``core.place.restricted``) and block RR (``core.place.block.solve``) submit their chunks
to it. Work already running on a pool thread (``in_worker()``) runs its
chunks itself instead of submitting more and waiting on them, so no pool
thread ever waits for a task queued behind it.

**BLAS threads.** OpenBLAS parallelises a matrix product over its own thread
pool. Inside the projection kernel, which already splits a batch over Python
threads, and in block RR, whose trust-region steps make thousands of tiny
products, those extra threads only busy-wait and steal cores
(docs/performance.md: 0.3–1.2× of one thread on narrow products; block RR
1.6–10× slower under load). ``single_blas_thread()`` limits BLAS to one
thread for a ``with`` block (a few µs per use: threadpoolctl's controllers of
the BLAS libraries loaded, found once and again when scipy's linear algebra,
which brings its own OpenBLAS, has been imported: import it before the block,
a library loaded inside one is limited only from the next block that starts,
nested ones included). The limit is process-wide (BLAS has one thread
count), so the blocks of several threads are counted: the first to enter
sets it, the last to leave restores the original. (Each block restoring
what it saw on entry would, with two threads interleaving, leave BLAS at
one thread for good.)

**Time budgets.** Every iterative method has an iteration cap of its own;
``limit`` adds a wall-time bound per batch and a way to stop mid-batch,
without threading a parameter through every solver's signature. The caller
(the streaming layer) opens a budget around one batch::

    with runtime.limit(seconds=30.0, cancelled=stop.is_set):
        model.place(A, method="stress")

and the solvers call ``spent()`` between iterations: True means the time is
up (stop, keep the best iterate so far, report those rows as not
converged); if the cancel flag is set it raises ``Cancelled`` instead, which
is not an error of any record (the batch is simply not finished: its input
is read again after the restart). Without a budget ``spent()`` is always
False. The state is a context variable, so threads do not share it; pool
tasks that must see it run in a copy of the submitter's context
(``contextvars.copy_context().run``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = ["default_threads", "resolve_threads", "worker_pool", "in_worker", "single_blas_thread",
           "Cancelled", "limit", "spent"]

# ---------------------------------------------------------------------- worker threads
_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_POOL_LOCK = threading.Lock()
_LOCAL = threading.local()


def default_threads() -> int:
    """Threads a batch is split over when the caller does not say: min(2, CPUs), at least 1."""
    return max(1, min(2, os.cpu_count() or 1))


def resolve_threads(n_threads: int | None) -> int:
    """``n_threads``, or ``default_threads()`` for None."""
    return default_threads() if n_threads is None else int(n_threads)


def _mark_worker() -> None:
    _LOCAL.worker = True


def in_worker() -> bool:
    """Whether the calling thread is one of ``worker_pool()``'s (its work must not wait on the pool)."""
    return getattr(_LOCAL, "worker", False)


def worker_pool(n_workers: int | None = None) -> ThreadPoolExecutor:
    """The process's one pool of compute threads, with at least ``n_workers`` (None: ``default_threads()``).

    Created on first use under a lock (threads sharing a model never create
    two); a caller asking for more threads than it has gets a larger pool
    that replaces it (the former one ends once its last user drops it).
    """
    global _POOL, _POOL_SIZE
    want = resolve_threads(n_workers)
    pool = _POOL
    if pool is not None and want <= _POOL_SIZE:
        return pool
    with _POOL_LOCK:
        if _POOL is None or want > _POOL_SIZE:
            size = max(want, default_threads())
            _POOL = ThreadPoolExecutor(max_workers=size, thread_name_prefix="streamembed-worker",
                                       initializer=_mark_worker)
            _POOL_SIZE = size
        return _POOL


# ---------------------------------------------------------------------- BLAS threads
_BLAS_LOCK = threading.Lock()
_DEPTH = 0
_LIBRARIES: list[Any] | None = None  # threadpoolctl's controllers of the BLAS libraries found at the last scan
_SCANNED: tuple[bool, ...] = ()
_SAVED: dict[int, tuple[Any, int]] = {}  # id(library) -> (library, its thread count before the outermost block)
#: Modules whose import loads a BLAS library of its own (scipy's OpenBLAS): a new scan once they are imported.
_BLAS_MODULES = ("numpy", "scipy.linalg", "scipy.sparse.linalg")


def _blas_libraries() -> list[Any]:
    """The BLAS libraries loaded in the process (threadpoolctl), scanned again when one of ``_BLAS_MODULES``
    has been imported since the last scan (a scan costs milliseconds, the check a few dictionary lookups)."""
    global _LIBRARIES, _SCANNED
    key = tuple(name in sys.modules for name in _BLAS_MODULES)
    if _LIBRARIES is None or key != _SCANNED:
        from threadpoolctl import ThreadpoolController

        _LIBRARIES = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
        _SCANNED = key
    return _LIBRARIES


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """Context manager: BLAS runs on one thread inside the block (and while any thread is in one)."""
    global _DEPTH
    with _BLAS_LOCK:
        _DEPTH += 1
        _limit(_blas_libraries())
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                for lib, threads in _SAVED.values():
                    if threads != 1:
                        lib.set_num_threads(threads)
                _SAVED.clear()


def _limit(libraries: list[Any]) -> None:
    """One thread for each library not limited yet in the current blocks (also one loaded inside a block)."""
    for lib in libraries:
        if id(lib) not in _SAVED:
            threads = int(lib.get_num_threads())
            _SAVED[id(lib)] = (lib, threads)
            if threads != 1:
                lib.set_num_threads(1)


# ---------------------------------------------------------------------- time budgets
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
