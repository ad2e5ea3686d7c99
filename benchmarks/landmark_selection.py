"""Landmark selection measured on real data: the table behind the default of ``model.landmark_selection``.

    python benchmarks/landmark_selection.py [--datasets digits,words,...] [--landmarks 200] [--seeds 7]
                                            [--methods projection,restricted] [--json out.json]

For each dataset (scikit-learn's digits and breast_cancer, Euclidean; the
stdlib docstrings (normalised edit distance), 1,200 English words
(Levenshtein) and breast_cancer with the city-block metric, non-Euclidean),
every landmark selection of ``core.landmarks`` at ``--landmarks`` (at most a
third of the objects) and d = 2 is compared with a full classical MDS of all
objects by ``streamembed.landmark_evaluation.evaluate_landmarks``: Procrustes
share of the full map's radius, trustworthiness (k = 10) against the full
map's own, Spearman ρ, median [min–max] over the seeds. docs/landmarks.md
quotes its output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from streamembed.evaluation.datasets import load_dataset
from streamembed.landmark_evaluation import evaluate_landmarks

DATASETS = ("digits", "breast_cancer", "stdlib_docstrings", "words", "breast_cancer_cityblock")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--landmarks", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=7)
    ap.add_argument("--methods", default="projection,restricted")
    ap.add_argument("--words", type=int, default=1200, help="objects of the words dataset")
    ap.add_argument("--json", help="also write every table here")
    args = ap.parse_args()
    out = {}
    for name in args.datasets.split(","):
        t0 = time.perf_counter()
        if name == "words":
            from streamembed.evaluation.datasets import words

            ds = words(args.words)
        else:
            ds = load_dataset(name)
        n = min(args.landmarks, ds.n_objects // 3)
        D = ds.dissimilarities()
        rep = evaluate_landmarks(D=D, n_landmarks=(n,), seeds=args.seeds, methods=args.methods.split(","),
                                 progress=lambda line, name=name: print(f"  {name}: {line}", file=sys.stderr))
        print(f"\n### {name} ({ds.description}; {n} landmarks, {time.perf_counter() - t0:.0f} s)\n")
        print(rep.to_markdown())
        print(f"\nrecommendation: {rep.recommendation()}")
        out[name] = rep.to_dict()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
