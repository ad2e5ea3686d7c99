"""Many small files through the real daemon: wall time, then the idle daemon's CPU.

    python -m benchmarks.bench_many_files [--files 20000] [--rows 1] [--idle-seconds 20] [--format jsonl]

Writes ``--files`` files of ``--rows`` rows each into a watched directory (a
hidden name, then renamed, as a careful writer does; their modification
times are set a minute back, so they are settled at once), starts
``streamembed run`` at the default settings (directory source; only the
paths, the model and the metrics port are set), waits until every row is in
the output (the Parquet files' row count), then measures the idle daemon's
CPU time (utime + stime from ``/proc/<pid>/stat``) over ``--idle-seconds``
as a fraction of one core. Reports the wall time, files/s and the idle CPU.
``tests/e2e/test_many_files.py`` runs it (slow).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def make_model(path: Path, n: int = 16, seed: int = 0) -> np.ndarray:
    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS

    L = np.random.default_rng(seed).standard_normal((n, 3)) * 3.0
    LandmarkMDS(n_components=2).fit(cdist(L, L)).save(path)
    return L


def make_files(indir: Path, files: int, rows: int, landmarks: np.ndarray, fmt: str = "jsonl") -> int:
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(1)
    back = time.time() - 60
    for f in range(files):
        D = cdist(rng.standard_normal((rows, landmarks.shape[1])) * 3.0, landmarks)
        name = f"f{f:06d}.{fmt}"
        tmp = indir / f".{name}.tmp"
        if fmt == "jsonl":
            tmp.write_text("".join(json.dumps({"id": f"f{f}-{i}", "dissimilarities": [round(float(x), 5) for x in d]})
                                   + "\n" for i, d in enumerate(D)))
        else:
            import pyarrow as pa

            pq.write_table(pa.table({"id": [f"f{f}-{i}" for i in range(rows)],
                                     "dissimilarities": [list(map(float, d)) for d in D]}), tmp)
        os.utime(tmp, (back, back))
        os.replace(tmp, indir / name)
    return files * rows


def cpu_seconds(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def output_rows(directory: Path) -> int:
    n = 0
    for p in list(directory.glob("*.parquet")) if directory.is_dir() else []:
        with contextlib.suppress(Exception):  # renamed away meanwhile: counted at the next look
            n += pq.ParquetFile(p).metadata.num_rows
    return n


def run(workdir: Path, files: int = 20_000, rows: int = 1, idle_seconds: float = 20.0, fmt: str = "jsonl",
        timeout: float = 1800.0, env_extra: dict[str, str] | None = None) -> dict[str, object]:
    workdir.mkdir(parents=True, exist_ok=True)
    indir, out = workdir / "in", workdir / "out"
    indir.mkdir(exist_ok=True)
    model = workdir / "model.npz"
    landmarks = make_model(model)
    t0 = time.monotonic()
    total = make_files(indir, files, rows, landmarks, fmt)
    made = time.monotonic() - t0
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    env.update({"PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""), "OPENBLAS_NUM_THREADS": "1",
                "STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_MODEL__PATH": str(model),
                "STREAMEMBED_DIRECTORY__PATH": str(indir), "STREAMEMBED_OUTPUT__ROOT": str(out),
                "STREAMEMBED_METRICS__PORT": "0"})
    env.update(env_extra or {})
    log_path = workdir / "daemon.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "streamembed", "run"], env=env, cwd=workdir, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            t1 = time.monotonic()
            done = 0
            while time.monotonic() - t1 < timeout and proc.poll() is None:
                done = output_rows(out / "embeddings")
                if done >= total:
                    break
                time.sleep(1.0)
            wall = time.monotonic() - t1
            cpu_busy = cpu_seconds(proc.pid)
            time.sleep(3.0)  # the last commit, the read-ahead going quiet
            c0, i0 = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(idle_seconds)
            idle = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - i0)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait(10)
    return {"files": files, "rows": total, "format": fmt, "made_seconds": round(made, 1), "embedded": done,
            "wall_seconds": round(wall, 1), "files_per_second": round(files / wall, 1),
            "busy_cpu_seconds": round(cpu_busy, 1), "idle_cpu_fraction": round(idle, 4), "exit": code}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-files-", dir=args.workdir) as tmp:
        result = run(Path(tmp), args.files, args.rows, args.idle_seconds, args.format)
    print(json.dumps(result, indent=1))
    return 0 if result["embedded"] == result["rows"] and result["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
