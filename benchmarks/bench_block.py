"""Block RR throughput against single-object RR: ``streamembed.evaluation.bench_block``.

    python benchmarks/bench_block.py [--n 500] [--d 10] [--ks 2,8,64] [--hard] [--profile] [--json PATH]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's streamembed

from streamembed.evaluation.bench_block import main  # noqa: E402

if __name__ == "__main__":
    main()
