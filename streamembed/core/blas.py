"""BLAS threads: one per Python worker where several would only contend.

OpenBLAS parallelises a matrix product over its own thread pool. Inside the
projection kernel, which already splits a batch over Python threads, and in
block RR, whose L-BFGS makes thousands of tiny products, those extra threads
only busy-wait and steal cores (docs/performance.md: 0.3–1.2× of one thread on narrow
products; block RR 1.6–10× slower under load). ``single_blas_thread()``
limits BLAS to one thread for a ``with`` block through one reused
threadpoolctl controller (about 10 µs per use).
"""

from __future__ import annotations

import contextlib
from typing import Any

_CONTROLLER: Any = None


def single_blas_thread() -> contextlib.AbstractContextManager:
    """Context manager: BLAS runs on one thread inside the block."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")
