"""Objects and metrics, measured (issue 34; docs/objects.md).

    python -m benchmarks.bench_objects fit [--objects 20000] [--landmarks 200] [--subsample 2000]
    python -m benchmarks.bench_objects rows [--rows 20000] [--landmarks 200]

``fit``: ``streamembed fit --objects`` on N stdlib code lines (normalised Levenshtein) against building the
matrix by hand (rapidfuzz's ``cdist`` of all N × N, then ``fit --dissimilarities``' selection and fit on it):
the wall time, the dissimilarities computed, and each map's Procrustes share to a full classical MDS of a
random subsample of the objects (the subsample's own dissimilarities, computed for the measurement only).

``rows``: rows per second through the ``BatchEmbedder`` of rows that carry their objects (the daemon computes
their dissimilarities on the worker pool), against the ceiling of the metric alone (rapidfuzz ``cdist`` of the
same objects against the landmarks, all threads) and against rows that carry their precomputed dissimilarities
(the placement alone), in the same run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.string_streams import code_lines

__all__ = ["main"]

METRIC = "levenshtein-normalized"


def _share(model: object, objs: np.ndarray, X: np.ndarray) -> float:
    from streamembed.quality import procrustes_share

    return procrustes_share(model.place(model.dissimilarities_to_landmarks(objs)).y, X)  # type: ignore[attr-defined]


def bench_fit(n: int, landmarks: int, subsample: int) -> None:
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    from streamembed.core.inputs.metrics import resolve_metric
    from streamembed.core.inputs.objects import as_object_array
    from streamembed.model_io import load_model
    from streamembed.quality import classical_mds

    lines = code_lines(n, seed=7)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "objects.txt"
        src.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "streamembed", "fit", "--objects", str(src), "--metric", METRIC,
                            "--landmarks", str(landmarks), "-o", f"{tmp}/objects.npz"], capture_output=True,
                           text=True, env=env, check=True)
        t_objects = time.perf_counter() - t0
        computed = next(x for x in r.stderr.splitlines() if x.startswith("dissimilarities computed"))
        t0 = time.perf_counter()
        D = cdist(lines, lines, scorer=Levenshtein.normalized_distance, dtype=np.float32, workers=-1)
        np.save(f"{tmp}/D.npy", D)
        t_matrix = time.perf_counter() - t0
        del D
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "streamembed", "fit", "--dissimilarities", f"{tmp}/D.npy",
                        "--landmarks", str(landmarks), "-o", f"{tmp}/matrix.npz"], capture_output=True, text=True,
                       env=env, check=True)
        t_fit_matrix = time.perf_counter() - t0
        objs = as_object_array(lines)
        pick = np.sort(np.random.default_rng(0).choice(n, min(subsample, n), replace=False))
        X = classical_mds(resolve_metric(METRIC).pairwise(objs[pick]), 2).Y
        by_objects = _share(load_model(f"{tmp}/objects.npz"), objs[pick], X)
        matrix_model = load_model(f"{tmp}/matrix.npz")
        ids = [int(x) for x in matrix_model.landmark_ids]
        from dataclasses import replace

        matrix_model = replace(matrix_model, features=objs[ids], metric=METRIC)
        by_matrix = _share(matrix_model, objs[pick], X)
    full = n * (n - 1) // 2
    print(f"N = {n} code lines, {landmarks} landmarks, d = 2 (load: {os.getloadavg()[0]:.2f})")
    print("| path | seconds | dissimilarities computed | Procrustes share to the full CMDS of "
          f"{len(pick)} objects |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| fit --objects | {t_objects:.1f} | {computed.split(':', 1)[1].split('(')[0].strip()} | "
          f"{by_objects:.3f} |")
    print(f"| the matrix by hand (cdist, all threads) + fit --dissimilarities | {t_matrix:.1f} + {t_fit_matrix:.1f}"
          f" | {n * n:,} ({full:,} distinct) | {by_matrix:.3f} |")


def bench_rows(n_rows: int, landmarks: int) -> None:
    import pyarrow as pa
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    from streamembed import LandmarkMDS
    from streamembed.stream.embedder import BatchEmbedder

    lines = code_lines(n_rows + 3000, seed=3)
    model = LandmarkMDS(n_components=2, n_landmarks=landmarks, metric=METRIC).fit(lines[:3000]).model_
    objs = lines[3000:]
    n_rows = len(objs)  # the corpus has ~21,000 distinct lines
    ids = [f"r{i}" for i in range(n_rows)]
    emb = BatchEmbedder(model)
    batch = 8192
    tables = [pa.table({"id": ids[i:i + batch], "object": objs[i:i + batch]}) for i in range(0, n_rows, batch)]
    t0 = time.perf_counter()
    done = sum(emb.process(t).n_out for t in tables)
    t_objects = time.perf_counter() - t0
    t0 = time.perf_counter()
    A = cdist(objs, list(model.features), scorer=Levenshtein.normalized_distance, dtype=np.float64, workers=-1)
    t_metric = time.perf_counter() - t0
    rows = [pa.table({"id": ids[i:i + batch], "dissimilarities": list(A[i:i + batch])})
            for i in range(0, n_rows, batch)]
    t0 = time.perf_counter()
    sum(emb.process(t).n_out for t in rows)
    t_rows = time.perf_counter() - t0
    print(f"{done} rows of stdlib code lines, {landmarks} landmarks (load: {os.getloadavg()[0]:.2f})")
    print("| what | rows/s | ratio to the metric alone |")
    print("| --- | ---: | ---: |")
    print(f"| rows carrying objects (metric on the worker pool + placement) | {n_rows / t_objects:,.0f} | "
          f"{t_metric / t_objects:.2f} |")
    print(f"| the metric alone (rapidfuzz cdist, all threads) | {n_rows / t_metric:,.0f} | 1.00 |")
    print(f"| rows carrying dissimilarities (placement alone) | {n_rows / t_rows:,.0f} | {t_metric / t_rows:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("fit", "rows"))
    ap.add_argument("--objects", type=int, default=20_000)
    ap.add_argument("--rows", type=int, default=18_000)
    ap.add_argument("--landmarks", type=int, default=200)
    ap.add_argument("--subsample", type=int, default=2000)
    args = ap.parse_args(argv)
    if args.what == "fit":
        bench_fit(args.objects, args.landmarks, args.subsample)
    else:
        bench_rows(args.rows, args.landmarks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
