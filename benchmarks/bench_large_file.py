"""One large input file through the real daemon under a memory limit: embedded whole, in bounded memory.

    python -m benchmarks.bench_large_file [--gb 1.5] [--limit-mib 1024] [--format parquet|arrows|jsonl]

Writes a file of ``--gb`` GB (float32 dissimilarities to 256 landmarks, 1 KiB
a row, written in a few seconds: one block of rows repeated under new ids),
then runs ``streamembed run`` (directory source, ``exit_when_idle``) under a
memory limit of ``--limit-mib``, enforced by the first of these that works here:

* ``systemd-run --scope -p MemoryMax=...`` (what the shipped unit's
  ``MemoryMax=`` does),
* a cgroup v1 or v2 memory group made for the run (needs root),
* ``RLIMIT_AS`` (``ulimit -v``): a proxy only (it limits address space,
  which allocators and thread stacks reserve far beyond what they touch; the
  run then uses glibc's allocator for Arrow, ``ARROW_DEFAULT_MEMORY_POOL=system``
  and ``MALLOC_ARENA_MAX=2``, whose reservations fit: mimalloc's do not).

Reports which limit was used, the daemon's exit code, wall time, peak RSS
(``VmHWM``, which counts a memory-mapped input's file-backed pages), the
peak anonymous memory (``RssAnon`` sampled every 0.2 s: what the limit
binds) and the cgroup's peak charge, and checks every id was embedded
once. ``tests/e2e/test_large_file.py`` runs it (slow).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
N_LANDMARKS = 256
ROWS_PER_GROUP = 65536


def make_model(path: Path, seed: int = 0) -> np.ndarray:
    """Fit a 256-landmark model on random points; returns the landmark points (for the inputs)."""
    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS

    L = np.random.default_rng(seed).standard_normal((N_LANDMARKS, 8)) * 3.0
    LandmarkMDS(n_components=2).fit(cdist(L, L)).save(path)
    return L


def make_input(path: Path, gb: float, landmarks: np.ndarray, fmt: str = "parquet", seed: int = 1) -> int:
    """Write about ``gb`` GB of rows to ``path`` (hidden name first, then renamed); returns the row count."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(seed)
    block = cdist(rng.standard_normal((ROWS_PER_GROUP, landmarks.shape[1])) * 3.0, landmarks).astype(np.float32)
    values = pa.array(block.reshape(-1))
    col = pa.FixedSizeListArray.from_arrays(values, N_LANDMARKS)
    groups = max(1, int(round(gb * 1e9 / block.nbytes)))
    schema = pa.schema([("id", pa.string()), ("dissimilarities", pa.list_(pa.float32(), N_LANDMARKS))])
    tmp = path.with_name("." + path.name)
    if fmt == "parquet":
        with pq.ParquetWriter(tmp, schema, compression="none", use_dictionary=False) as w:
            for g in range(groups):
                ids = pa.array([f"g{g}-{i}" for i in range(ROWS_PER_GROUP)])
                w.write_table(pa.table([ids, col], schema=schema), row_group_size=ROWS_PER_GROUP)
    elif fmt == "arrows":
        import pyarrow.ipc as ipc

        with pa.OSFile(str(tmp), "wb") as sink, ipc.new_stream(sink, schema) as w:
            for g in range(groups):
                ids = pa.array([f"g{g}-{i}" for i in range(ROWS_PER_GROUP)])
                w.write_table(pa.table([ids, col], schema=schema), max_chunksize=8192)
    else:
        text = [",".join(f"{x:.4g}" for x in row) for row in block[:4096]]
        with open(tmp, "w") as fh:
            for g in range(int(round(gb * 1e9 / (4096 * (len(text[0]) + 40))))):
                fh.writelines(f'{{"id": "g{g}-{i}", "dissimilarities": [{t}]}}\n' for i, t in enumerate(text))
        groups = -1
    os.replace(tmp, path)
    if groups < 0:
        with open(path, "rb") as fh:
            return sum(1 for _ in fh)
    return groups * ROWS_PER_GROUP


@dataclass
class Limited:
    """How the child's memory is limited: argv prefix, a preexec function, a cgroup to read and remove."""

    how: str
    prefix: list[str] = field(default_factory=list)
    cgroup: Path | None = None
    rlimit: int | None = None

    def preexec(self) -> None:
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
        if self.rlimit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (self.rlimit, self.rlimit))

    def peak(self) -> int | None:
        if self.cgroup is None:
            return None
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            try:
                return int((self.cgroup / name).read_text())
            except (OSError, ValueError):
                continue
        return None

    def oom_kills(self) -> int | None:
        if self.cgroup is None:
            return None
        for name in ("memory.oom_control", "memory.events"):
            try:
                for line in (self.cgroup / name).read_text().splitlines():
                    k, _, v = line.partition(" ")
                    if k == "oom_kill":
                        return int(v)
            except (OSError, ValueError):
                continue
        return None

    def close(self) -> None:
        if self.cgroup is not None:
            for _ in range(50):
                try:
                    self.cgroup.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


def memory_limiter(limit_bytes: int, name: str, how: str = "auto") -> Limited:
    """The strongest memory limit this machine lets us put on a child (see the module doc); ``how`` = rlimit
    forces the proxy."""
    if how == "rlimit":
        return Limited("RLIMIT_AS (ulimit -v), a proxy", rlimit=limit_bytes)
    if shutil.which("systemd-run"):
        probe = subprocess.run(["systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={limit_bytes}", "true"],
                               capture_output=True, timeout=30)
        if probe.returncode == 0:
            return Limited("systemd-run --scope -p MemoryMax", ["systemd-run", "--scope", "--quiet", "-p",
                                                                f"MemoryMax={limit_bytes}", "-p", "MemorySwapMax=0"])
    for base, limit_file in ((Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
                             (Path("/sys/fs/cgroup"), "memory.max")):
        if not (base / limit_file).exists() and not (base / "cgroup.controllers").exists():
            continue
        cg = base / name
        try:
            cg.mkdir(exist_ok=True)
            (cg / limit_file).write_text(str(limit_bytes))
            if limit_file == "memory.max" and (cg / "memory.swap.max").exists():
                (cg / "memory.swap.max").write_text("0")
            return Limited(f"cgroup {'v1' if 'memory/' in str(cg) else 'v2'} {limit_file}", cgroup=cg)
        except OSError:
            with contextlib.suppress(OSError):
                cg.rmdir()
    return Limited("RLIMIT_AS (ulimit -v), a proxy", rlimit=limit_bytes)


def _status_bytes(pid: int, *fields: str) -> dict[str, int]:
    """Fields of /proc/<pid>/status in bytes (VmHWM: peak resident set; RssAnon: anonymous memory now)."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = line.split(":", 1)[0]
            if key in fields:
                out[key] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def run(workdir: Path, gb: float = 1.5, limit_mib: int = 1024, fmt: str = "parquet",
        timeout: float = 900.0, how: str = "auto") -> dict[str, object]:
    """Build the file, run the daemon under the limit, return the measurements (see the module doc)."""
    workdir.mkdir(parents=True, exist_ok=True)
    indir, out = workdir / "in", workdir / "out"
    indir.mkdir(exist_ok=True)
    model = workdir / "model.npz"
    landmarks = make_model(model)
    ext = {"parquet": "parquet", "arrows": "arrows", "jsonl": "jsonl"}[fmt]
    t0 = time.monotonic()
    rows = make_input(indir / f"big.{ext}", gb, landmarks, fmt)
    size = (indir / f"big.{ext}").stat().st_size
    made = time.monotonic() - t0
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    env.update({"PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""), "OPENBLAS_NUM_THREADS": "1",
                "STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_MODEL__PATH": str(model),
                "STREAMEMBED_DIRECTORY__PATH": str(indir), "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0",
                "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true", "STREAMEMBED_OUTPUT__ROOT": str(out),
                "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_DRIFT__ENABLED": "false"})
    limit = memory_limiter(limit_mib << 20, f"streamembed-bench-{os.getpid()}", how)
    if limit.rlimit is not None:
        env.update({"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2"})
    log_path = workdir / "daemon.log"
    t1 = time.monotonic()
    hwm = anon = 0
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([*limit.prefix, sys.executable, "-m", "streamembed", "run"], env=env, cwd=workdir,
                                    stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit.preexec)
            while proc.poll() is None and time.monotonic() - t1 < timeout:
                now = _status_bytes(proc.pid, "VmHWM", "RssAnon")
                hwm, anon = max(hwm, now.get("VmHWM", 0)), max(anon, now.get("RssAnon", 0))
                time.sleep(0.2)
            if proc.poll() is None:
                proc.kill()
            code = proc.wait(30)
        wall = time.monotonic() - t1
        peak, ooms = limit.peak(), limit.oom_kills()
    finally:
        limit.close()
    ids: list[str] = []
    for p in sorted((out / "embeddings").glob("*.parquet")) if (out / "embeddings").is_dir() else []:
        ids += pq.read_table(p, columns=["id"]).column("id").to_pylist()
    return {"format": fmt, "file_bytes": size, "rows": rows, "made_seconds": round(made, 1), "limit": limit.how,
            "limit_mib": limit_mib, "exit": code, "wall_seconds": round(wall, 1),
            "peak_rss_mib": round(hwm / 2**20, 1), "peak_anon_rss_mib": round(anon / 2**20, 1),
            "cgroup_peak_mib": None if peak is None else round(peak / 2**20, 1),
            "oom_kills": ooms, "embedded": len(ids), "distinct": len(set(ids)),
            "log_tail": log_path.read_text(errors="replace").splitlines()[-3:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.5)
    ap.add_argument("--limit-mib", type=int, default=1024)
    ap.add_argument("--format", choices=("parquet", "arrows", "jsonl"), default="parquet")
    ap.add_argument("--limit-with", choices=("auto", "rlimit"), default="auto",
                    help="auto: systemd-run, else a cgroup, else RLIMIT_AS; rlimit: RLIMIT_AS")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-large-", dir=args.workdir) as tmp:
        result = run(Path(tmp), args.gb, args.limit_mib, args.format, how=args.limit_with)
    print(json.dumps(result, indent=1))
    return 0 if result["exit"] == 0 and result["embedded"] == result["rows"] == result["distinct"] else 1


if __name__ == "__main__":
    sys.exit(main())
