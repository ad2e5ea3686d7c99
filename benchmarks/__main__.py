"""``python -m benchmarks bench|evaluate|drift [ARGS]``: the benchmarks' one entry point (from a source checkout)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: python -m benchmarks {bench,evaluate,drift} [ARGS...]

  bench     throughput of projection, RR and block RR against the memory-read ceiling, scaling, refit time,
            end-to-end rows (files, daemon, Kafka, Dask)
  evaluate  placement quality of every method on the benchmark datasets (--datasets, --list)
  drift     drift detectors and refit landmark selection on streams with a known change

`python -m benchmarks COMMAND --help` describes each one's arguments."""


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to ``benchmarks.bench``, ``benchmarks.evaluate`` or its drift benchmark; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "bench":
        from benchmarks import bench

        return bench.main(rest)
    if command == "evaluate":
        from benchmarks import evaluate

        return evaluate.main(rest)
    if command == "drift":
        from benchmarks import evaluate

        return evaluate.main(["--drift", *rest])
    print(f"python -m benchmarks: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
