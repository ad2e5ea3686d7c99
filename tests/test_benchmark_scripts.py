"""The benchmark scripts still run: each cheap one on a tiny problem, its exit status and its table checked.

Speed is not asserted here (benchmarks measure it, docs/performance.md); this keeps the scripts from rotting
as the package changes under them. The Kafka, two-checkout and browser benchmarks are exercised by the
end-to-end paths they share with ``python -m benchmarks bench``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cli import clean_env


SCRIPTS = {
    "bench_core.py": (["--n", "50", "--d", "2", "--m", "2000", "--repeat", "1"], "proj/read"),
    "bench_block.py": (["--n", "50", "--d", "2", "--ks", "2", "--m-block", "64", "--m-single", "256",
                        "--repeat", "1"], "float64"),
    "bench_embed_file.py": (["--objects", "2000", "--landmarks", "50", "--dims", "2"], "objects/s"),
    "bench_refit.py": (["--candidates", "300", "--landmarks", "50", "--d", "2"], "p99_ratio"),
    "landmark_selection.py": (["--datasets", "breast_cancer", "--landmarks", "20", "--seeds", "1", "--methods",
                               "projection"], "Recommendation: 20 landmarks by"),
    "refit_policies.py": (["--seeds", "1", "--policies", "none,adaptive", "--datasets", "digits"],
                          "| digits | new classes, abrupt | adaptive |"),
    "bench_consistency.py": (["--quick"], "Total false alarms: 0"),
    "alarm_calibration.py": (["--quick", "--ert", "1e4", "--runs", "256", "--streams", "digits,digits runs 256"],
                             "measured / stated"),
    "bench_daemon_startup.py": (["--repeat", "1"], "| off |"),
    "bench_output_bytes.py": (["--objects", "3000", "--landmarks", "40", "--dims", "3", "--repeat", "1"],
                              "| 2 |"),
    "bench_file_ceiling.py": (["--objects", "3000", "--landmarks", "40", "--dims", "3", "--repeat", "1",
                               "--embed-args", "--schema-version 2 --mmap always"], "| parquet-fsb |"),
    "choose_n_components.py": (["--datasets", "flat3,iris", "--n", "120", "--grid", "1,2,3,4", "--folds", "3"],
                               "| flat3 | 120 | 3 | 3 |"),
    "bench_input_hints.py": (["--datasets", "iris,wine", "--n", "100"], "Wrong calls: 0"),
    "nonmetric_vs_sklearn.py": (["--datasets", "iris", "--n", "60"], "(within 1 %: yes)"),
    "bench_model_bytes.py": (["--landmarks", "30", "--dims", "2", "--repeat", "1"], "| 30 |"),
    "roy_tables.py": (["--datasets", "S3", "--centres", "1", "--methods", "pca,lsdr"], "/ 0.012 |"),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_benchmark_script_runs_on_a_tiny_problem(script: str, tmp_path: Path) -> None:
    args, expected = SCRIPTS[script]
    module = f"benchmarks.{script.removesuffix('.py')}"
    r = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, env=clean_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert expected in r.stdout, r.stdout[-2000:]
