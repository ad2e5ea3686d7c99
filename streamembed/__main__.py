"""``python -m streamembed`` runs the command line (see :mod:`streamembed.cli`)."""

import sys

from streamembed.cli import main

sys.exit(main())
