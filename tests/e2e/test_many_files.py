"""After many small files the idle daemon costs (almost) no CPU.

``benchmarks/bench_many_files.py`` writes the files, runs the real daemon at its default settings until every
row is in the output, then measures its CPU while idle. Before the fix every poll listed and stat'ed every file
ever read: 20,000 one-row files left the idle daemon at 0.95 of a core (5,000: 0.29). The benchmark runs
20,000 (``python -m benchmarks.bench_many_files``); this test 5,000, to keep CI short.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cli import clean_env



@pytest.mark.slow
@pytest.mark.e2e
def test_the_idle_daemon_costs_no_cpu_after_5000_files(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "benchmarks.bench_many_files", "--files", "5000",
                        "--idle-seconds", "10", "--workdir", str(tmp_path)], env=clean_env(), capture_output=True,
                       text=True, timeout=900)
    doc = json.loads(r.stdout[r.stdout.index("{"):])
    print(json.dumps(doc, indent=1))
    assert doc["embedded"] == doc["rows"] == 5000 and doc["exit"] == 0, doc
    assert doc["idle_cpu_fraction"] <= 0.05, doc  # was 0.29 at 5,000 files
