"""``streamembed bench``: a pointer. The benchmarks measure rather than serve and are not installed with the
package; from a source checkout they run as ``python -m benchmarks bench`` (docs/benchmarks.md).

``bench`` is not listed by ``streamembed --help``; it answers any arguments with where the benchmarks went.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from streamembed.cli.common import EXIT_REFUSED

__all__ = ["main", "MOVED_TO"]

#: Where the former subcommand went.
MOVED_TO = "python -m benchmarks bench"


def main(argv: Sequence[str] | None = None) -> int:
    """Say where the benchmarks are (exit code 2, whatever the arguments)."""
    print(f"streamembed bench: benchmarks are not installed with the package; run `{MOVED_TO}` from a source "
          f"checkout", file=sys.stderr)
    return EXIT_REFUSED
