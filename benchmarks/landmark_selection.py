"""The landmark-selection table of docs/landmarks.md: every selection against a full classical MDS, on real data.

    nice -n 10 python -m benchmarks.landmark_selection [--datasets digits,stdlib_docstrings,english_words,
        python_identifiers,breast_cancer_cityblock] [--landmarks 100,200] [--seeds 5] [--json out.json]
        [--markdown out.md]

For each dataset (``benchmarks.datasets``; nothing is downloaded)
it runs ``streamembed.evaluate_data.evaluate_landmarks``: each selection ×
landmark count × method (projection, restricted reconstruction) × seed
0 … seeds − 1, scored against the classical MDS of all objects (Procrustes
share of the full map's radius, trustworthiness k = 10, Spearman of map
distances vs dissimilarities, subspace angle). Counts ≥ N are skipped.
Progress goes to stderr; the tables, one per dataset, and a summary of the
medians at the largest count go to stdout (Markdown).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from streamembed.core.refit.landmarks import LANDMARK_SELECTIONS
from streamembed.evaluate_data import LandmarkReport, evaluate_landmarks
from benchmarks.datasets import load_dataset

DEFAULT_DATASETS = ("digits", "stdlib_docstrings", "english_words", "python_identifiers", "breast_cancer_cityblock")


def summary(reports: list[LandmarkReport], count: int, method: str = "projection") -> str:
    """Median Procrustes share (range) per selection × dataset at ``count`` landmarks (each dataset's largest
    count when it has fewer objects), plus the trustworthiness gap to the full map."""
    sels = list(dict.fromkeys(r.selection for rep in reports for r in rep.rows))
    at = {rep.name: max((r.n_landmarks for r in rep.rows if r.n_landmarks <= count), default=0) for rep in reports}
    head = "| selection | " + " | ".join(f"{rep.name} (n = {at[rep.name]})" for rep in reports) + " |"
    lines = [head, "| --- |" + " ---: |" * len(reports)]
    for sel in sels:
        cells = []
        for rep in reports:
            n = at[rep.name]
            row = next((r for r in rep.rows if r.selection == sel and r.n_landmarks == n and r.method == method), None)
            if row is None:
                cells.append("")
                continue
            gap = rep.full_trustworthiness - row.trustworthiness.median
            cells.append(f"{row.procrustes.median:.2f} ({row.procrustes.low:.2f}–{row.procrustes.high:.2f}); "
                         f"T −{gap:.3f}" if gap >= 0 else f"{row.procrustes.median:.2f} "
                         f"({row.procrustes.low:.2f}–{row.procrustes.high:.2f}); T +{-gap:.3f}")
        lines.append(f"| {sel} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sweep(args: argparse.Namespace) -> int:
    """Median (range) Procrustes share and selection seconds of max-variance per number of candidate sets."""
    ks = [int(x) for x in args.candidates.split(",")]
    names = [x.strip() for x in args.datasets.split(",") if x.strip()]
    n = max(int(x) for x in args.landmarks.split(","))
    lines = ["| candidate sets | " + " | ".join(names) + " |", "| ---: |" + " ---: |" * len(names)]
    cells: dict[int, list[str]] = {k: [] for k in ks}
    for name in names:
        ds = load_dataset(name)
        for k in ks:
            rep = evaluate_landmarks(D=ds.D, X=ds.X, metric=ds.metric, landmarks=[n], selections=["max-variance"],
                                     methods=["projection"], seeds=args.seeds, n_components=args.n_components,
                                     name=f"{name} k={k}", candidates=k,
                                     progress=lambda line: print(line, file=sys.stderr, flush=True))
            r = rep.rows[0]
            cells[k].append(f"{r.procrustes} ; {r.seconds:.2f} s")
    for k in ks:
        lines.append(f"| {k} | " + " | ".join(cells[k]) + " |")
    print(f"max-variance, {n} landmarks, projection, {args.seeds} seeds: median (range) Procrustes share; "
          "selection seconds\n\n" + "\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(DEFAULT_DATASETS))
    p.add_argument("--landmarks", default="100,200", help="comma-separated landmark counts")
    p.add_argument("--selections", default=",".join(LANDMARK_SELECTIONS))
    p.add_argument("--methods", default="projection,restricted")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("-d", "--n-components", type=int, default=2)
    p.add_argument("--json", metavar="PATH", help="also write every report as JSON")
    p.add_argument("--markdown", metavar="PATH", help="also write the Markdown tables here")
    p.add_argument("--candidates", metavar="K,K,...",
                   help="instead of the table: max-variance with each number of candidate sets (e.g. 1,4,8,16,32)")
    args = p.parse_args(argv)
    if args.candidates:
        return sweep(args)
    reports = []
    out: list[str] = []
    for name in [x.strip() for x in args.datasets.split(",") if x.strip()]:
        t0 = time.perf_counter()
        ds = load_dataset(name)
        rep = evaluate_landmarks(D=ds.D, X=ds.X, metric=ds.metric,
                                 landmarks=[int(x) for x in args.landmarks.split(",")],
                                 selections=args.selections.split(","), methods=args.methods.split(","),
                                 seeds=args.seeds, n_components=args.n_components, name=name,
                                 progress=lambda line: print(line, file=sys.stderr, flush=True))
        reports.append(rep)
        block = f"### {name}\n\n{ds.description}.\n\n{rep.to_markdown()}\n\nRecommendation: {rep.recommendation()}\n"
        out.append(block)
        print(block, flush=True)
        print(f"({name}: {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    summaries = []
    for count in sorted({int(x) for x in args.landmarks.split(",")}, reverse=True):
        block = (f"### Summary at {count} landmarks: median Procrustes share (range over {args.seeds} seeds), "
                 "projection; T: trustworthiness minus the full classical MDS's\n\n" + summary(reports, count) + "\n")
        summaries.append(block)
        print(block)
    out = summaries + out
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as fh:
            fh.write("\n".join(out))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([r.to_dict() for r in reports], fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
