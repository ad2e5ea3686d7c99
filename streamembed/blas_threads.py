"""One BLAS thread for the commands that never use a second one, chosen before numpy loads BLAS.

OpenBLAS starts its worker threads when numpy is imported, and its first
products (numpy's own at import among them) leave a worker spinning for a
tenth of a second: 0.1 CPU-s of ``streamembed embed``'s 0.4-0.5 on a small
file here, taken from whatever else the machine runs. ``embed`` places rows
with its own compiled kernels and runs every numpy product of its loop on one
BLAS thread anyway (``EmbeddingLoop.run``), so for it a second BLAS thread is
pure cost. The count can only be chosen before the library loads: through
``OPENBLAS_NUM_THREADS``, which this sets - unless the user set a BLAS thread
count of their own (any of :data:`THREAD_VARIABLES`), which is kept.

The other commands keep BLAS's default: ``fit`` and ``refit`` factorise
matrices where a second thread pays; the daemon (``run``) runs its loop on
one BLAS thread already and starts its refit workers with one thread of their
own (``daemon.refits``), but serves more than the loop (the ops pages), so it
is left as it was.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence

__all__ = ["ONE_THREAD_COMMANDS", "THREAD_VARIABLES", "one_blas_thread_for"]

#: Commands whose whole run needs one BLAS thread (the first word of the command line).
ONE_THREAD_COMMANDS = ("embed",)
#: The variables by which a user chooses a BLAS library's thread count (OpenBLAS, OpenMP builds, MKL).
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread_for(argv: Sequence[str], environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``OPENBLAS_NUM_THREADS=1`` for a command of :data:`ONE_THREAD_COMMANDS`; whether it did.

    Nothing is set when the user chose a thread count, or when numpy (and with it BLAS) is loaded already:
    the variable would no longer be read.
    """
    env = os.environ if environ is None else environ
    if not argv or argv[0] not in ONE_THREAD_COMMANDS:
        return False
    if any(name in env for name in THREAD_VARIABLES) or "numpy" in sys.modules:
        return False
    env["OPENBLAS_NUM_THREADS"] = "1"
    return True
