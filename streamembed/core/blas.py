"""BLAS threads: one per Python worker where several would only contend.

OpenBLAS parallelises a matrix product over its own thread pool. Inside the
projection kernel, which already splits a batch over Python threads, and in
block RR, whose L-BFGS makes thousands of tiny products, those extra threads
only busy-wait and steal cores (docs/performance.md: 0.3–1.2× of one thread on narrow
products; block RR 1.6–10× slower under load). ``single_blas_thread()``
limits BLAS to one thread for a ``with`` block through one reused
threadpoolctl controller (about 10 µs per use).

The limit is process-wide (BLAS has one thread count), so the blocks of
several threads are counted: the first to enter sets it, the last to leave
restores the original. (Each block restoring what it saw on entry would,
with two threads interleaving, leave BLAS at one thread for good.)
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any
from collections.abc import Iterator

_CONTROLLER: Any = None
_LOCK = threading.Lock()
_DEPTH = 0
_LIMITER: Any = None


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """Context manager: BLAS runs on one thread inside the block (and while any thread is in one)."""
    global _CONTROLLER, _DEPTH, _LIMITER
    with _LOCK:
        if _DEPTH == 0:
            if _CONTROLLER is None:
                from threadpoolctl import ThreadpoolController

                _CONTROLLER = ThreadpoolController()
            _LIMITER = _CONTROLLER.limit(limits=1, user_api="blas")
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                _LIMITER.restore_original_limits()
                _LIMITER = None
