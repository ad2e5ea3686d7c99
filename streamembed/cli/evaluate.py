"""``streamembed evaluate``: which landmarks give a map close to the classical MDS of *your* objects.

With ``--dissimilarities D`` (N × N) or ``--features X`` (N × p, ``--metric``),
the table of ``streamembed.evaluate_data.evaluate_landmarks``: every landmark
selection × landmark count × method over seeds, against the full classical
MDS (docs/landmarks.md), progress on stderr, the table and a one-line
recommendation on stdout. The benchmark datasets (``--datasets``, ``--drift``,
``--list``) are not installed with the package: ``python -m benchmarks evaluate``
(or ``drift``) from a source checkout runs them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from collections.abc import Sequence

from streamembed.cli.common import EXIT_OK, EXIT_REFUSED, Refused, Subparsers

__all__ = ["add_parser", "main", "build_parser", "run"]

_USER_FLAGS = ("--dissimilarities", "--features")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``streamembed evaluate``; defaults from ``evaluate_landmarks`` and the option table."""
    import inspect

    from streamembed.config.schema import default
    from streamembed.core.options import DEFAULTS
    from streamembed.evaluate_data import EVALUATED_METHODS, REFERENCE_MAX, evaluate_landmarks

    table = {k: v.default for k, v in inspect.signature(evaluate_landmarks).parameters.items()}
    counts = ",".join(str(n) for n in table["landmarks"])

    p = argparse.ArgumentParser(
        prog="streamembed evaluate",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "How close each landmark choice comes to a classical MDS of all your objects (docs/landmarks.md):\n"
            "for every selection x landmark count x method and seeds 0..K-1, the Procrustes distance to the\n"
            "full map (share of its RMS radius), trustworthiness (k nearest neighbours) beside the full map's,\n"
            "Spearman of map distances vs your dissimilarities, and the spread over seeds; then the\n"
            "recommended setting for `streamembed fit --landmarks N --selection S`.\n"
            f"Above --reference objects (default {REFERENCE_MAX}) the full map is the classical MDS of a\n"
            "random sample of that many (seed 0); landmarks are still chosen among all objects.\n\n"
            "The benchmark datasets (--datasets, --list, --drift) are not installed with the package:\n"
            "`python -m benchmarks evaluate --help` from a source checkout."),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dissimilarities", metavar="FILE", help="N x N dissimilarities (not squared): .npy, .csv, "
                     "Parquet/Arrow/JSONL ('dissimilarities' list column or numeric columns; optional 'id')")
    src.add_argument("--features", metavar="FILE", help="N x p feature vectors (same formats; 'features' column)")
    p.add_argument("--metric", default=default("model.metric"),
                   help="metric for --features: a scipy cdist name or package.module:function "
                   "(default: %(default)s)")
    p.add_argument("--ids", metavar="FILE",
                   help="object ids, one per line (else the file's 'id' column, or row numbers)")
    p.add_argument("--landmarks", default=counts, metavar="N,N", help=f"landmark counts (default: {counts})")
    from streamembed.core.refit.landmarks import LANDMARK_SELECTIONS

    selections = LANDMARK_SELECTIONS  # the strategies evaluate_landmarks compares (not the LSDR skeleton)
    p.add_argument("--selections", default=",".join(selections), metavar="S,S",
                   help=f"landmark selections (default: all of {', '.join(selections)})")
    p.add_argument("--methods", default=",".join(EVALUATED_METHODS), metavar="M,M",
                   help=f"placement methods (default: {', '.join(EVALUATED_METHODS)})")
    p.add_argument("--seeds", type=int, default=table["seeds"], metavar="K",
                   help="seeds 0..K-1 per selection (default: %(default)s)")
    p.add_argument("-d", "--n-components", type=int, default=DEFAULTS["n_components"], metavar="D",
                   help="map dimensions (default: %(default)s)")
    p.add_argument("--knn", type=int, default=table["knn"], metavar="K",
                   help="neighbours of trustworthiness (default: %(default)s)")
    p.add_argument("--reference", type=int, default=REFERENCE_MAX, metavar="N",
                   help=f"largest full classical MDS computed (default: {REFERENCE_MAX}; a sample above)")
    p.add_argument("--json", metavar="PATH", help="also write the table, the recommendation and its landmark ids "
                   "(seed 0) as JSON")
    return p


def _names(spec: str) -> list[str]:
    return [x.strip() for x in spec.split(",") if x.strip()]


def run(args: argparse.Namespace) -> int:
    """Evaluate the landmark choices on the user's objects (the arguments of :func:`build_parser`)."""
    import numpy as np

    from streamembed.cli.fit import read_matrix
    from streamembed.core.refit.landmarks import select_landmarks
    from streamembed.evaluate_data import evaluate_landmarks

    features = args.features is not None
    path = args.features if features else args.dissimilarities
    M, ids = read_matrix(path, "features" if features else "dissimilarities")
    N = M.shape[0]
    if not features and M.shape[1] != N:
        raise Refused(f"{path}: a dissimilarity matrix must be square, got shape {M.shape}")
    if args.ids:
        p = Path(args.ids)
        if not p.exists():
            raise Refused(f"--ids {args.ids} does not exist")
        ids = [line.strip() for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        if len(ids) != N:
            raise Refused(f"--ids {args.ids} has {len(ids)} ids for the {N} objects of {path}")
    try:
        counts = [int(x) for x in _names(args.landmarks)]
    except ValueError:
        raise Refused(f"--landmarks expects comma-separated integers, got {args.landmarks!r}") from None
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    try:
        rep = evaluate_landmarks(D=None if features else M, X=M if features else None, metric=args.metric,
                                 landmarks=counts, selections=_names(args.selections), methods=_names(args.methods),
                                 seeds=args.seeds, n_components=args.n_components, knn=args.knn,
                                 reference_max=args.reference, name=Path(path).name, progress=say)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    best = rep.best()
    print(rep.to_markdown())
    print()
    print(f"recommendation: {rep.recommendation()}")
    print(f"  streamembed fit --{'features' if features else 'dissimilarities'} {path}"
          f"{' --metric ' + args.metric if features else ''} --landmarks {best.n_landmarks} "
          f"--selection {best.selection} --seed 0 -d {args.n_components} -o model.npz")
    if args.json:
        L = select_landmarks(best.selection, best.n_landmarks, D=None if features else M, X=M if features else None,
                             metric=args.metric, seed=0, n_components=args.n_components)
        out = rep.to_dict()
        out["recommended_landmark_ids"] = [ids[i] if ids is not None else str(int(i)) for i in np.asarray(L)]
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return EXIT_OK


def add_parser(subparsers: Subparsers) -> None:
    """List ``evaluate`` in ``streamembed --help``; :func:`main` parses its arguments with :func:`build_parser`."""
    subparsers.add_parser("evaluate", help="landmark choice for your data against a full classical MDS "
                          "(--features/--dissimilarities)", add_help=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``streamembed evaluate``: your data (``--dissimilarities``/``--features``) or the datasets."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a.split("=")[0] in _USER_FLAGS for a in argv) or argv in (["-h"], ["--help"]):
        try:
            return run(build_parser().parse_args(argv))
        except Refused as exc:
            print(f"streamembed evaluate: {exc}", file=sys.stderr)
            return EXIT_REFUSED
    print("streamembed evaluate: the benchmark datasets (--datasets, --drift, --list) are not installed with the "
          "package: run `python -m benchmarks evaluate` from a source checkout; for your own data give "
          "--dissimilarities FILE or --features FILE", file=sys.stderr)
    return EXIT_REFUSED
