"""False-positive rate of the ``non_euclidean`` flag fit by fit, on edit distances (docs/math.md §4.3).

    python -m benchmarks.bench_flag_fpr [--dataset python_attribute_names|stdlib_docstrings] [--seeds 16]
                                        [--sizes 50,100,200] [--before /path/to/an/older/checkout]

For every landmark count n of ``--sizes``, both landmark choices (random,
and max–min from a random first pick) and ``--seeds`` seeds (3 × 2 × 16 =
96 fits by default), a ``LandmarkMDS(n_components=2)`` is fitted on the
landmarks and every other object of the dataset is placed as an arrival
with exact k0 (``k0_rows="all"``). The flag's false-positive rate is the
share of those ordinary arrivals flagged ``non_euclidean``; the power is
the share flagged among the same rows with their columns in a wrong order
(one random permutation per fit, as a user who built rows in another
landmark order). The flag promises at most about 5 % in every fit.

``--before DIR`` runs the same measurement with the streamembed package
found in DIR (an older checkout) for the model, and this checkout's
datasets, for an old-versus-new table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


from benchmarks import datasets
from benchmarks.trees import use_streamembed_from


def measure(D: np.ndarray, sizes: list[int], seeds: int, log: bool) -> list[dict]:
    from streamembed import LandmarkMDS
    from streamembed.core.refit.strategies import maxmin_select, random_select

    N = D.shape[0]
    out = []
    for n in sizes:
        for how in ("random", "maxmin"):
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                L = random_select(n, N, rng) if how == "random" else maxmin_select(n, D, first=int(rng.integers(N)))
                rest = np.setdiff1d(np.arange(N), L)
                t0 = time.perf_counter()
                est = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)])
                fit_s = time.perf_counter() - t0
                A = D[np.ix_(rest, L)]
                fpr = float(np.mean((est.embed(A, k0_rows="all").flags & 2) != 0))
                shuffled = A[:, rng.permutation(n)]
                power = float(np.mean((est.embed(shuffled, k0_rows="all").flags & 2) != 0))
                out.append({"n": n, "how": how, "seed": seed, "fpr": fpr, "power": power, "fit_s": fit_s})
                if log:
                    print(f"n={n} {how} seed={seed}: false positives {fpr:.3f}, shuffled flagged {power:.3f}, "
                          f"fit {fit_s:.2f} s", file=sys.stderr, flush=True)
    return out


def table(rows: list[dict]) -> str:
    lines = ["| landmarks | fits | FPR median | FPR max | fits with FPR > 5 % | shuffled flagged min | "
             "shuffled flagged median | fit s (median) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    groups = sorted({(r["n"], r["how"]) for r in rows}) + [("all", "")]
    for n, how in groups:
        sel = [r for r in rows if n == "all" or (r["n"], r["how"]) == (n, how)]
        f = np.array([r["fpr"] for r in sel])
        p = np.array([r["power"] for r in sel])
        t = np.array([r["fit_s"] for r in sel])
        lines.append(f"| {n} {how} | {len(sel)} | {np.median(f):.3f} | {f.max():.3f} | {(f > 0.05).sum()} | "
                     f"{p.min():.3f} | {np.median(p):.3f} | {np.median(t):.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="python_attribute_names",
                    choices=("python_attribute_names", "stdlib_docstrings"))
    ap.add_argument("--objects", type=int, default=400, help="objects of the dataset (landmarks + arrivals)")
    ap.add_argument("--sizes", default="50,100,200")
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--before", default=None, help="measure the streamembed of this older checkout instead")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    D = getattr(datasets, args.dataset)(n=args.objects).D
    if args.before:
        use_streamembed_from(args.before)
    import streamembed

    t0 = time.perf_counter()
    rows = measure(D, [int(x) for x in args.sizes.split(",")], args.seeds, not args.quiet)
    print(f"{args.dataset}: {D.shape[0]} objects; streamembed from {Path(streamembed.__file__).parent.parent}; "
          f"d = 2; {time.perf_counter() - t0:.0f} s")
    print(table(rows))


if __name__ == "__main__":
    main()
