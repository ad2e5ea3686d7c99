"""How often dissimilarity matrices violate the triangle inequality, as given and squared (core/inputs/hints.py).

For each real dataset (scikit-learn's digits, iris, wine, breast_cancer with Euclidean and city-block
distances, the stdlib-docstring and English-word edit distances, DTW between EEG windows) and a few synthetic
ones, the share of sampled triangles violated by D, by D² and by their square roots, and whether the squared-
distance hint warns. It must warn on no D (DTW, which violates the triangle inequality, included) and on the
square of every Euclidean D; the square of a non-Euclidean metric (city-block, edit) cannot be told from a
non-metric dissimilarity like DTW by the matrix alone, and is not flagged.

    python3 -m benchmarks.bench_input_hints [--datasets digits,iris,...] [--n 400]
"""

from __future__ import annotations

import argparse

import numpy as np


from streamembed.core.inputs.hints import squared_evidence
from benchmarks.datasets import load_dataset

DEFAULT = ("digits", "iris", "wine", "breast_cancer", "breast_cancer_cityblock", "stdlib_docstrings",
           "english_words", "swiss_roll", "gaussian_clusters", "random_strings", "eeg_dtw")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DEFAULT))
    ap.add_argument("--n", type=int, default=400, help="objects per dataset (evenly spaced subset)")
    args = ap.parse_args(argv)
    print("| dataset | n | D Euclidean | D violates | √D violates | warns on D | D² violates | warns on D² |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    bad = 0
    for name in args.datasets.split(","):
        ds = load_dataset(name)
        D = ds.dissimilarities()
        idx = np.linspace(0, D.shape[0] - 1, min(args.n, D.shape[0])).round().astype(int)
        D = D[np.ix_(idx, idx)]
        euclidean = ds.X is not None and ds.metric == "euclidean"
        plain, squared = squared_evidence(D), squared_evidence(np.square(D))
        bad += int(plain.likely) + int(squared.likely != euclidean)
        print(f"| {name} | {D.shape[0]} | {'yes' if euclidean else 'no'} | {100 * plain.share:.2f}% | "
              f"{100 * plain.sqrt_share:.2f}% | {'yes' if plain.likely else 'no'} | {100 * squared.share:.1f}% | "
              f"{'yes' if squared.likely else 'no'} |")
    print(f"\nWrong calls: {bad}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
