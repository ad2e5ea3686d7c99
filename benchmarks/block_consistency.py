"""How often is a block flagged ``inconsistent_block``, consistent or contradicted? (docs/math.md §4.3)

    python -m benchmarks.block_consistency [--datasets digits stdlib_docstrings] [--landmarks 100] [--blocks 60]

For each dataset, random landmarks and blocks of k = 2, 4, 8, 16 other objects
with their mutual dissimilarities C as they are ("true") and contradicted:
C·10, C = 0, C with its rows and columns shuffled, another block's C. Printed
per case: the flagged share and quantiles of λ_min(K0)/s (s the block's scale,
``core.place.block.consistency``).

Not a test: it takes a minute. The figures quoted in ``core/place/block/consistency.py``
and docs/math.md §4.3 come from it.
"""

from __future__ import annotations

import argparse

import numpy as np


from streamembed import LandmarkMDS
from streamembed.core.place.block.consistency import block_min_eigenvalues
from streamembed.core.place.block.prepare import prepare_blocks
from streamembed.core.flags import FLAG_INCONSISTENT_BLOCK
from benchmarks.datasets import DatasetUnavailable, load_dataset

KINDS = ("true", "C*10", "C=0", "shuffled", "other block's")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["digits", "wine", "stdlib_docstrings", "random_strings"])
    ap.add_argument("--landmarks", type=int, default=100)
    ap.add_argument("--blocks", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| dataset | negative_ratio | k | C | flagged | min λ_min/s | median λ_min/s |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for name in args.datasets:
        try:
            D = load_dataset(name).dissimilarities()
        except DatasetUnavailable as exc:
            print(f"{name}: skipped ({exc})")
            continue
        rng = np.random.default_rng(args.seed)
        perm = rng.permutation(D.shape[0])
        L, Z = perm[:args.landmarks], perm[args.landmarks:]
        model = LandmarkMDS(2).fit(D[np.ix_(L, L)]).model_
        sp = model.spectrum
        for k in (2, 4, 8, 16):
            for kind in KINDS:
                flagged, ratios = [], []
                for _ in range(args.blocks):
                    idx = rng.choice(Z, size=k, replace=False)
                    A, C = D[np.ix_(idx, L)], D[np.ix_(idx, idx)]
                    if kind == "C*10":
                        C = 10 * C
                    elif kind == "C=0":
                        C = 0 * C
                    elif kind == "shuffled":
                        p = rng.permutation(k)
                        C = C[np.ix_(p, p)]
                    elif kind == "other block's":
                        o = rng.choice(Z, size=k, replace=False)
                        C = D[np.ix_(o, o)]
                    res = model.place(A, C)
                    flagged.append(bool(res.flags[0] & FLAG_INCONSISTENT_BLOCK))
                    prep = prepare_blocks(A, [C], np.array([k]), sp.row_means, sp.grand_mean,
                                          sp.eigenvectors[:, :2], None)
                    lam, scale = block_min_eigenvalues(prep.batch, model.project_r(A)[0])
                    ratios.append(float(lam[0] / scale[0]))
                print(f"| {name} | {model.negative_ratio:.3g} | {k} | {kind} | {np.mean(flagged):.2f} | "
                      f"{min(ratios):.3g} | {np.median(ratios):.3g} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
