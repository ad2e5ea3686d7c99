"""The ``streamembed`` console command: the daemon's signal handlers first, then the command line.

``streamembed run`` must catch SIGTERM, SIGINT, SIGHUP and SIGUSR1 from its first moments (a supervisor or
``streamembed refit`` can signal it while it imports), so the command line, whose imports take a few tenths of a
second, is imported only after ``daemon.signals.install_early_if_daemon``; ``embed`` chooses its one BLAS thread
before numpy is loaded (``blas_threads``) and ends without the interpreter's teardown (``quick_exit``).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int | None:
    from streamembed.blas_threads import one_blas_thread_for
    from streamembed.daemon.signals import install_early_if_daemon

    install_early_if_daemon(sys.argv[1:])
    one_blas_thread_for(sys.argv[1:])
    from streamembed.cli import main as cli_main
    from streamembed.quick_exit import finish

    return finish(cli_main(), sys.argv[1:])
