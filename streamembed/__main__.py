"""``python -m streamembed`` runs the command line (see :mod:`streamembed.cli`).

``run`` catches its signals before anything else is imported (``daemon.signals``); ``embed`` chooses one BLAS
thread before numpy is loaded (``blas_threads``) and ends without the interpreter's teardown (``quick_exit``).
"""

import sys

from streamembed.blas_threads import one_blas_thread_for
from streamembed.daemon.signals import install_early_if_daemon

install_early_if_daemon(sys.argv[1:])
one_blas_thread_for(sys.argv[1:])

from streamembed.cli import main  # noqa: E402 - after the signal handlers, on purpose
from streamembed.quick_exit import finish  # noqa: E402

sys.exit(finish(main(), sys.argv[1:]))
