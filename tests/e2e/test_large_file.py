"""A 1.5 GB input file under a 1 GiB memory limit is embedded whole by the real daemon.

``benchmarks/bench_large_file.py`` builds the file (a few seconds) and limits the daemon's memory with the
strongest means the machine offers (``systemd-run -p MemoryMax``, a cgroup, else ``RLIMIT_AS`` as a proxy;
the output names which). Before the fix a 0.9 GB file was OOM-killed 2.5-3 s after every start (read whole),
and a 1.5 GB one too (streamed Parquet pre-buffered every row group).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cli import clean_env



@pytest.mark.slow
@pytest.mark.e2e
def test_a_1_5_gb_file_is_embedded_whole_under_a_1_gib_memory_limit(tmp_path: Path) -> None:
    if shutil.disk_usage(tmp_path).free < 4 << 30:
        pytest.skip("needs 4 GB of free disk for the 1.5 GB input and its output")
    r = subprocess.run([sys.executable, "-m", "benchmarks.bench_large_file", "--gb", "1.5",
                        "--limit-mib", "1024", "--workdir", str(tmp_path)], env=clean_env(), capture_output=True,
                       text=True, timeout=900)
    doc = json.loads(r.stdout[r.stdout.index("{"):])
    print(json.dumps(doc, indent=1))
    assert doc["file_bytes"] >= 1.5e9 and doc["limit_mib"] == 1024
    assert doc["exit"] == 0 and doc["oom_kills"] in (None, 0), doc
    assert doc["embedded"] == doc["distinct"] == doc["rows"], doc
    # a memory-mapped input's pages count in the resident set (VmHWM) but are file-backed and evictable: the
    # limit binds the anonymous memory, sampled every 0.2 s, and the cgroup's own peak where it has one
    assert doc["peak_anon_rss_mib"] < 1024, doc
    assert doc["cgroup_peak_mib"] is None or doc["cgroup_peak_mib"] < 1024, doc
    assert r.returncode == 0
