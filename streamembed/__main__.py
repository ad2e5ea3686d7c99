"""``python -m streamembed`` runs the command line (see :mod:`streamembed.cli`).

``run`` catches its signals before anything else is imported (``daemon.signals``).
"""

import sys

from streamembed.daemon.signals import install_early_if_daemon

install_early_if_daemon(sys.argv[1:])

from streamembed.cli import main  # noqa: E402 - after the signal handlers, on purpose

sys.exit(main())
