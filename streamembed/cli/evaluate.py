"""``streamembed evaluate``: which landmarks give a map close to the classical MDS of *your* objects.

With ``--dissimilarities D`` (N × N) or ``--features X`` (N × p, ``--metric``),
the table of ``streamembed.evaluate_data.evaluate_landmarks``: every landmark
selection × landmark count × method over seeds, against the full classical
MDS (docs/landmarks.md), progress on stderr, the table and a one-line
recommendation on stdout. ``--indices trustability,consistency`` (features only)
adds Roy's indices of every map's pipeline and of the full classical MDS
(``quality_indices.PIPELINE_INDICES``, docs/math.md §8): a second table, the
JSON's ``"full_indices"`` and each row's ``"indices"``; the consistency index's
refits report their progress on stderr, at most one line per ``PROGRESS_SECONDS``
per map. The benchmark datasets (``--datasets``, ``--drift``,
``--list``) are not installed with the package: ``python -m benchmarks evaluate``
(or ``drift``) from a source checkout runs them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from streamembed.cli.common import EXIT_OK, EXIT_REFUSED, Refused, Subparsers

__all__ = ["add_parser", "main", "build_parser", "run", "default_margin", "fit_command", "PROGRESS_SECONDS",
           "RefitProgress"]

#: The subcommand's line in ``streamembed --help``.
HELP = ("landmark choice for your data against a full classical MDS"
        " (--features/--dissimilarities)")

_USER_FLAGS = ("--dissimilarities", "--features")
#: Longest quiet spell of the indices' progress lines on stderr (and the shortest interval between two).
PROGRESS_SECONDS = 10.0


class RefitProgress:
    """Prints the indices' refits on stderr: a map's first and last call, and between them at most one line per
    ``every`` seconds (the consistency index refits its pipeline once per candidate: minutes per map)."""

    def __init__(self, every: float = PROGRESS_SECONDS, clock: Any = None, out: Any = None) -> None:
        import time

        self.every = float(every)
        self.clock = clock or time.monotonic
        self.out = out
        self.label: str | None = None
        self.start = self.last = 0.0

    def __call__(self, label: str, done: int, total: int) -> None:
        now = self.clock()
        if label != self.label:
            self.label, self.start, self.last = label, now, float("-inf")
        if done < total and now - self.last < self.every:
            return
        self.last = now
        spent = now - self.start
        left = f", ~{spent * (total - done) / done:.0f} s left" if 0 < done < total else ""
        print(f"{label}: consistency refits {done}/{total} in {spent:.0f} s{left}", file=self.out or sys.stderr,
              flush=True)


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
            "recommended setting, its margin over the default (max-variance at the same count), and the\n"
            "`streamembed fit` command of the recommendation (of the default when the margin is within\n"
            "the spread over the seeds).\n"
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
    from streamembed.quality_indices import PIPELINE_INDICES

    p.add_argument("--indices", metavar="I,I", default="",
                   help=f"also Roy's indices of every map and of the full classical MDS (--features only; "
                        f"docs/math.md §8): any of {', '.join(PIPELINE_INDICES.names())}; consistency refits each "
                        f"map once per candidate (minutes per map)")
    p.add_argument("--consistency-centres", type=int, metavar="M",
                   help="the consistency index over the p coordinates of M farthest-point centres, a lower bound "
                        "(default: all objects, n*p candidates)")
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
    indices = _names(args.indices)
    if indices and not features:
        raise Refused(f"--indices {args.indices} needs --features: Roy's indices compare each map with the feature "
                      f"vectors themselves (docs/math.md §8), which --dissimilarities does not give")
    if args.consistency_centres is not None and "consistency" not in indices:
        raise Refused("--consistency-centres sets the consistency index's candidates: add --indices consistency")
    if args.consistency_centres is not None and args.consistency_centres < 1:
        raise Refused(f"--consistency-centres must be a positive integer, got {args.consistency_centres}")
    try:
        rep = evaluate_landmarks(D=None if features else M, X=M if features else None, metric=args.metric,
                                 landmarks=counts, selections=_names(args.selections), methods=_names(args.methods),
                                 seeds=args.seeds, n_components=args.n_components, knn=args.knn,
                                 reference_max=args.reference, name=Path(path).name, progress=say,
                                 indices=indices, consistency_centres=args.consistency_centres,
                                 index_progress=RefitProgress() if indices else None)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    best = rep.best()
    print(rep.to_markdown())
    print()
    print(f"recommendation: {rep.recommendation()}")
    verdict, chosen = default_margin(rep.rows, best)
    print(f"  {verdict}")
    kind = "features" if features else "dissimilarities"
    print(f"  {fit_command(kind, path, args.metric if features else None, chosen, args.n_components)}")
    if args.json:
        L = select_landmarks(best.selection, best.n_landmarks, D=None if features else M, X=M if features else None,
                             metric=args.metric, seed=0, n_components=args.n_components)
        out = rep.to_dict()
        out["recommended_landmark_ids"] = [ids[i] if ids is not None else str(int(i)) for i in np.asarray(L)]
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return EXIT_OK


def default_margin(rows: Sequence[Any], best: Any) -> tuple[str, Any]:
    """(one line on how much ``best`` beats the default setting, the row whose command to print).

    The default setting is ``streamembed fit``'s: the default landmark selection (and the default method) at the
    same landmark count. Its margin is the difference of the median Procrustes shares; when the two ranges over the
    seeds overlap, the margin is inside the spread and the default is as good: its command is printed instead.
    """
    from streamembed.core.options import DEFAULTS
    from streamembed.core.refit.landmarks import DEFAULT_LANDMARK_SELECTION

    same = [r for r in rows if r.n_landmarks == best.n_landmarks and r.selection == DEFAULT_LANDMARK_SELECTION]
    default = next((r for r in same if r.method == DEFAULTS["method"]), same[0] if same else None)
    if default is None:
        return (f"the default ({DEFAULT_LANDMARK_SELECTION}) was not evaluated at {best.n_landmarks} landmarks: "
                f"add it to --selections to see the margin over it"), best
    what = f"{DEFAULT_LANDMARK_SELECTION}, {default.method}, {best.n_landmarks} landmarks"
    if default is best:
        return f"that is the default setting ({what})", best
    margin = default.procrustes.median - best.procrustes.median
    b, d = best.procrustes, default.procrustes
    spread = f"seeds {b.low:.3f}-{b.high:.3f} against the default's {d.low:.3f}-{d.high:.3f}"
    if b.high >= d.low:  # the ranges over the seeds overlap: no better than the default within the spread
        return (f"margin over the default ({what}: Procrustes {d.median:.3f}): {margin:.3f}, inside the spread over "
                f"the seeds ({spread}): the default is as good, and this is its command"), default
    return (f"margin over the default ({what}: Procrustes {d.median:.3f}): {margin:.3f} Procrustes, beyond the "
            f"spread over the seeds ({spread})"), best


def fit_command(kind: str, path: str | Path, metric: str | None, row: Any, n_components: int) -> str:
    """The ``streamembed fit`` command line of ``row``'s setting (every flag one ``fit`` takes)."""
    import shlex

    parts = ["streamembed", "fit", f"--{kind}", str(path)]
    if metric is not None:
        parts += ["--metric", metric]
    parts += ["--landmarks", str(row.n_landmarks), "--selection", row.selection, "--seed", "0", "--n-components",
              str(n_components), "--method", row.method, "-o", "model.npz"]
    return shlex.join(parts)


def add_parser(subparsers: Subparsers) -> None:
    """List ``evaluate`` in ``streamembed --help``; :func:`main` parses its arguments with :func:`build_parser`."""
    subparsers.add_parser("evaluate", help=HELP, add_help=False)


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
