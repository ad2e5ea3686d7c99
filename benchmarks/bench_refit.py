"""Batch latency before and during a background refit, and the refit's duration.

    python -m benchmarks.bench_refit [--candidates 5000] [--landmarks 500] [--d 10]

The stream side embeds batches of 1024 objects against n landmarks in this
process (the daemon's hot path); the refit side runs the daemon's real refit
worker (``python -m streamembed.daemon.refit_worker``, one BLAS thread) on
``--candidates`` candidate landmarks: max–min selection, classical MDS with
the partial eigensolver, Procrustes alignment, an atomic save. It prints
p50/p99 batch latency before and during the refit (target: p99 during ≤ 2×
p99 before) and the duration of the refit and of its CMDS alone (target:
top-d CMDS of 5,000 landmarks under 1 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from streamembed import LandmarkMDS
from streamembed.daemon.refits import worker_environment


def points(rng: np.random.Generator, m: int, p: int) -> np.ndarray:
    return rng.normal(size=(m, p)) * np.linspace(3, 0.5, p)


def dist(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    sq = (P**2).sum(1)[:, None] + (Q**2).sum(1)[None] - 2 * P @ Q.T
    return np.sqrt(np.maximum(sq, 0))


def latencies(est: LandmarkMDS, batches: list[np.ndarray], seconds: float, stop=None) -> np.ndarray:
    out = []
    t_end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < t_end and (stop is None or stop()):
        t0 = time.perf_counter()
        est.embed(batches[i % len(batches)], method="restricted")
        out.append(time.perf_counter() - t0)
        i += 1
    return np.asarray(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=5000)
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--p", type=int, default=30, help="feature dimension of the synthetic objects")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    L = points(rng, args.landmarks, args.p)
    est = LandmarkMDS(n_components=args.d, method="restricted").fit(dist(L, L))
    batches = [dist(points(rng, 1024, args.p), L).astype(np.float32) for _ in range(8)]
    cand = np.vstack([L, points(rng, args.candidates - args.landmarks, args.p) + 1.0])
    D = dist(cand, cand)
    np.fill_diagonal(D, 0.0)
    D = 0.5 * (D + D.T)

    t0 = time.perf_counter()
    LandmarkMDS(n_components=args.d, eigensolver="partial").fit(D)
    cmds_seconds = time.perf_counter() - t0

    before = latencies(est, batches, 3.0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ids = [str(x) for x in est.landmark_ids_] + [f"c{i}" for i in range(args.candidates - args.landmarks)]
        np.savez(tmp / "job.npz", dissimilarities=D, ids=np.asarray(ids), n_landmarks=np.asarray(args.landmarks))
        est.save(tmp / "old.npz")
        cmd = [sys.executable, "-m", "streamembed.daemon.refit_worker", str(tmp / "job.npz"), str(tmp / "old.npz"),
               str(tmp / "new.npz"), str(tmp / "record.json")]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=worker_environment())
        during = latencies(est, batches, 600.0, stop=lambda: proc.poll() is None)
        proc.wait()
        refit_seconds = time.perf_counter() - t0
        record = json.loads((tmp / "record.json").read_text())
    row = {
        "candidates": args.candidates,
        "landmarks": args.landmarks,
        "d": args.d,
        "cmds_seconds_top_d_of_candidates": cmds_seconds,
        "refit_process_seconds": refit_seconds,
        "refit_fit_seconds": record.get("fit_seconds"),
        "alignment_rms": record.get("alignment_rms"),
        "batches_before": int(before.size),
        "batches_during": int(during.size),
        "p50_before_ms": float(np.percentile(before, 50) * 1e3),
        "p99_before_ms": float(np.percentile(before, 99) * 1e3),
        "p50_during_ms": float(np.percentile(during, 50) * 1e3) if during.size else float("nan"),
        "p99_during_ms": float(np.percentile(during, 99) * 1e3) if during.size else float("nan"),
    }
    row["p99_ratio"] = row["p99_during_ms"] / row["p99_before_ms"]
    for k, v in row.items():
        print(f"{k:34} {v:.4g}" if isinstance(v, float) else f"{k:34} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
