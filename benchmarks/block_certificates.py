"""Which blocks of real objects block RR certifies, by block size (issue 34, item 6; docs/objects.md).

    python -m benchmarks.block_certificates [--sizes 5,20,50,100,250,500] [--rows 1000]

Two real datasets: stdlib source lines by normalised Levenshtein distance and windows of matplotlib's EEG
recording by DTW (``benchmarks.string_streams``); a map of 200 (code) or 100 (EEG) landmarks, d = 2, fitted on
other objects; ``--rows`` arrivals cut into blocks of each size, each block carrying its mutual dissimilarities
(its ``cross``). Per size: the share of block rows certified (docs/math.md §3.3), and the block's margin
m = λ_d + λ_min(Y*Y*ᵀ − β) at its solution (the certificate needs m > 0: below it no multiplier of the duality
bound certifies, the bound being at least the squared shortfall of R*'s eigenvalues under −λ_d).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.string_streams import code_lines, recording_windows

__all__ = ["certified_share", "main"]


def certified_share(model: object, metric: object, objects: np.ndarray, k: int) -> tuple[float, float, float]:
    """(certified share of rows, median margin m over the blocks, seconds) of ``objects`` placed in blocks of ``k``
    rows (an unaligned model: its output frame is its own)."""
    nb = len(objects) // k
    blocks = [objects[i * k:(i + 1) * k] for i in range(nb)]
    A = np.vstack([model.dissimilarities_to_landmarks(b, metric=metric) for b in blocks])  # type: ignore[attr-defined]
    C = [metric.pairwise(b) for b in blocks]  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    res = model.place_blocks(A, C, [k] * nb, max_block_rows=max(k, 1))  # type: ignore[attr-defined]
    seconds = time.perf_counter() - t0
    lam_d = float(model.eigenvalues[-1])  # type: ignore[attr-defined]
    margins = []
    for b in range(nb):
        rows = slice(b * k, (b + 1) * k)
        core, _ = model.core_dissimilarities(A[rows])  # type: ignore[attr-defined]
        y_r, _ = model.project_r(core)  # type: ignore[attr-defined]
        beta = model.block_residual(A[rows], C[b]) + y_r @ y_r.T  # type: ignore[attr-defined]
        Y = np.asarray(res.y[rows])
        margins.append(lam_d + float(np.linalg.eigvalsh(Y @ Y.T - beta)[0]))
    uncertified = (np.asarray(res.flags) & 64) != 0
    return float(1.0 - uncertified.mean()), float(np.median(margins)), seconds


def main(argv: list[str] | None = None) -> int:
    from streamembed import LandmarkMDS
    from streamembed.core.inputs.metrics import resolve_metric
    from streamembed.core.inputs.objects import as_object_array

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="5,20,50,100,250,500")
    ap.add_argument("--rows", type=int, default=1000)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    data = {"stdlib code lines, levenshtein-normalized": (as_object_array(code_lines(2000 + args.rows, seed=1)),
                                                         "levenshtein-normalized", 200),
            "EEG windows, dtw": (as_object_array(recording_windows(1000 + args.rows, seed=3)), "dtw", 100)}
    print("| dataset | block rows | certified share | median margin m | seconds |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (objs, metric_name, n) in data.items():
        fit = len(objs) - args.rows
        model = LandmarkMDS(n_components=2, n_landmarks=n, metric=metric_name).fit(objs[:fit]).model_
        metric = resolve_metric(metric_name)
        for k in sizes:
            share, margin, seconds = certified_share(model, metric, objs[fit:], k)
            print(f"| {name} | {k} | {share:.2f} | {margin:.3g} | {seconds:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
