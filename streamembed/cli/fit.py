"""``streamembed fit``: a landmark model (.npz) from a dissimilarity, similarity or feature file.

The landmarks keep the input's ids (an ``id`` column), or their row numbers in
the input when it has none, so input rows can be built in the model's
landmark order; the chosen ids are printed in model order and can be written
with ``--landmarks-out`` (one per line).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamembed.cli.common import EXIT_OK, Refused, Subparsers, subcommand

log = logging.getLogger("streamembed")
if TYPE_CHECKING:
    import numpy as np

__all__ = ["add_parser", "run", "read_matrix"]

#: The subcommand's line in ``streamembed --help``.
HELP = "fit a landmark model (.npz) from a dissimilarity matrix or feature vectors"


def read_matrix(path: str, column: str) -> tuple[np.ndarray, list[str] | None]:
    """(N, w) float matrix and optional ids from .npy, Parquet/Arrow/JSONL (list column or numeric columns) or CSV."""
    import numpy as np
    import pyarrow as pa

    p = Path(path)
    if not p.exists():
        raise Refused(f"{path} does not exist")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
            if arr.ndim != 2:
                raise Refused(f"{path} holds an array of shape {arr.shape}, expected 2-D")
            return arr, None
        if suffix == ".csv":
            table = _read_csv(p)
        else:
            from streamembed.cli.fit_objects import read_table

            table = read_table(path)
    except Refused:
        raise
    except Exception as exc:  # any unreadable input refuses with the reason
        raise Refused(f"cannot read {path}: {exc}") from None
    ids = [str(x) for x in table.column("id").to_pylist()] if "id" in table.schema.names else None
    if column in table.schema.names:
        from streamembed.stream.packed import list_column_to_matrix

        try:
            return list_column_to_matrix(table.column(column)), ids
        except ValueError as exc:
            raise Refused(f"{path}: column '{column}': {exc}") from None
    numeric = [n for n, t in zip(table.schema.names, table.schema.types, strict=True)
               if pa.types.is_integer(t) or pa.types.is_floating(t)]
    if not numeric:
        raise Refused(f"{path} has no '{column}' list column and no numeric columns")
    return np.column_stack([table.column(n).to_numpy().astype(np.float64) for n in numeric]), ids


def _read_csv(p: Path) -> Any:
    import pyarrow.csv as pacsv

    with open(p, encoding="utf-8") as fh:
        first = fh.readline().strip().split(",")
    headerless = True
    for x in first:
        try:
            float(x)
        except ValueError:
            headerless = False
            break
    return pacsv.read_csv(p, read_options=pacsv.ReadOptions(autogenerate_column_names=headerless))


def _select(args: argparse.Namespace, M: np.ndarray, M_select: np.ndarray, features: bool, n: int) -> np.ndarray:
    """The landmarks' rows: the first n (--selection first), else the estimator's rule, seeded by --seed."""
    import numpy as np

    from streamembed.core.refit.landmarks import initial_landmarks

    if args.selection == "first":
        return np.arange(n)
    return initial_landmarks(args.selection, n, D=None if features else M_select, X=M if features else None,
                             metric=args.metric, random_state=args.seed, n_components=args.n_components)


def _check_entries(M: np.ndarray, rows: np.ndarray, ids: list[str] | None, path: str, features: bool,
                   why: str) -> None:
    """Refuse a NaN, infinite or (for dissimilarities) negative entry among the rows ``rows`` of M.

    Dissimilarities are checked on the (rows, rows) submatrix, features on the rows; the first bad
    entry is named by its row and column in the input file (and ids when the file has them), never
    by its position among the landmarks.
    """
    import numpy as np

    step = max(1, 4_000_000 // max(1, rows.size if not features else M.shape[1]))
    for s in range(0, rows.size, step):
        block = M[rows[s:s + step]] if features else M[np.ix_(rows[s:s + step], rows)]
        bad = ~np.isfinite(block) if features else ~(np.isfinite(block) & (block >= 0))
        if not bad.any():
            continue
        r, c = (int(x) for x in np.unravel_index(int(np.argmax(bad)), bad.shape))
        i, j = int(rows[s + r]), (c if features else int(rows[c]))
        value = float(M[i, j])
        what = "not finite" if not np.isfinite(value) else "negative"
        named = "" if ids is None else (f", id {ids[i]!r}" if features else f", ids {ids[i]!r} and {ids[j]!r}")
        raise Refused(f"{path}: {'X' if features else 'D'}[{i}, {j}] = {value} is {what} (row and column of the "
                      f"input{named}; {why})")


def _check_flags(args: argparse.Namespace) -> None:
    """The option table's rules on the flags (``core.options``), and the coverage, before any file is read."""
    from streamembed.core.options import check_options, flag_names
    from streamembed.core.trust.conformal import check_coverage

    try:
        check_options(flag_names, method=args.method, landmark_map=args.landmark_map,
                      kernel_bandwidth=getattr(args, "kernel_bandwidth", None))
        check_coverage(args.coverage)
    except ValueError as exc:
        raise Refused(f"--coverage {args.coverage}: {exc}" if "coverage" in str(exc) else str(exc)) from None


def _check_output_dirs(args: argparse.Namespace, out: Path) -> None:
    """Refuse before any work if the model's or the landmark list's directory does not exist."""
    if not out.parent.is_dir():
        raise Refused(f"-o {args.output}: directory {out.parent} does not exist")
    if args.landmarks_out and not Path(args.landmarks_out).parent.is_dir():
        raise Refused(f"--landmarks-out {args.landmarks_out}: directory {Path(args.landmarks_out).parent} "
                      f"does not exist")


def _check_square(M: np.ndarray, path: str, sims: bool) -> None:
    """Refuse a (dis)similarity matrix M (N, N') that is not square, or dissimilarities that look like similarities."""
    import numpy as np

    N = M.shape[0]
    if M.shape[1] != N:
        raise Refused(f"{path}: a {'similarity' if sims else 'dissimilarity'} matrix must be square, "
                      f"got shape {M.shape}"
                      + ("" if sims else f"; if its rows are feature vectors, fit them with --features {path} "
                         f"(and --metric)"))
    if not sims:
        from streamembed.core.inputs.hints import looks_like_similarity

        if looks_like_similarity(M):
            i = int(np.argmax(np.abs(np.diagonal(M))))
            raise Refused(f"{path}: a dissimilarity matrix has a zero diagonal, but D[{i}, {i}] = {M[i, i]:.6g} and "
                          f"each diagonal entry bounds its row as in a similarity (kernel) matrix: did you mean "
                          f"--similarities {path}?")


def _fit_skeleton(args: argparse.Namespace, M: np.ndarray, ids: list[str] | None, path: str) -> Any:
    """--selection skeleton: the LSDR skeleton map of feature vectors (every row read and checked first)."""
    import numpy as np

    from streamembed import LandmarkMDS
    from streamembed.core.options import check_options, flag_names

    try:
        check_options(flag_names, landmark_selection=args.selection, skeleton_alpha=args.skeleton_alpha,
                      skeleton_neighbors=args.skeleton_neighbors, geodesic_neighbors=args.geodesic_neighbors)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    if args.features is None:
        raise Refused("--selection skeleton finds the skeleton of feature vectors: give --features FILE")
    if args.landmarks is not None:
        raise Refused("--selection skeleton decides its number of landmarks from the data: drop --landmarks")
    if args.metric != "euclidean":
        raise Refused(f"--selection skeleton needs --metric euclidean, got {args.metric!r}")
    _check_entries(M, np.arange(M.shape[0]), ids, path, True, "the skeleton reads every row")
    est = LandmarkMDS(n_components=args.n_components, method=args.method, geodesic_neighbors=args.geodesic_neighbors,
                      correction=args.correction, landmark_map=args.landmark_map, random_state=args.seed,
                      landmark_selection="skeleton", skeleton_alpha=args.skeleton_alpha,
                      skeleton_neighbors=args.skeleton_neighbors, metric="euclidean",
                      kernel_bandwidth=args.kernel_bandwidth)
    try:
        est.fit_features(M, landmark_ids=ids)
    except ValueError as exc:
        raise Refused(f"cannot fit the skeleton: {exc}") from None
    return est


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from streamembed import LandmarkMDS
    from streamembed.model_io import save_model

    _check_flags(args)
    out = Path(args.output)
    _check_output_dirs(args, out)
    if args.objects is not None:  # objects and a metric: cli.fit_objects
        from streamembed.cli.fit_objects import run_objects

        return run_objects(args)
    features = args.features is not None
    sims = args.similarities is not None
    path = args.features if features else (args.similarities if sims else args.dissimilarities)
    M, ids = read_matrix(path, "features" if features else "dissimilarities")
    N = M.shape[0]
    if args.selection == "skeleton":
        t0 = time.perf_counter()
        est = _fit_skeleton(args, M, ids, path)
        save_model(est.model_, out, params=est.get_params())
        lm_ids = [str(x) for x in est.landmark_ids_]
        sk = est.skeleton_
        print(f"skeleton: {sk.graph.n_removed} of {sk.graph.edges.shape[0]} Delaunay edges removed, "
              f"{sk.n_boundary} boundary points, {sk.size} skeleton points, bandwidth {sk.bandwidth:.6g}",
              file=sys.stderr)
        return _report(args, est, lm_ids, N, ids is not None, f"features/{args.metric}", t0)
    if not features:
        _check_square(M, path, sims)
    M_select = M
    if sims:  # landmarks are chosen on the equivalent dissimilarities (docs/math.md §2)
        from streamembed.core.inputs.kernel import check_similarity_matrix, landmark_dissimilarities

        try:
            M_select = landmark_dissimilarities(check_similarity_matrix(M, "similarities"))
        except ValueError as exc:
            raise Refused(f"{path}: {exc}") from None
    n = args.landmarks or N
    if not 2 <= n <= N:
        raise Refused(f"--landmarks {n} must be between 2 and the {N} objects in {path}")
    # every selection but the first n or a random draw reads rows of every object (a NaN anywhere would
    # steer it); otherwise only the chosen landmarks' entries matter (checked after choosing)
    reads_all = n < N and args.selection not in ("first", "random")
    if reads_all and not sims:  # similarities: check_similarity_matrix checked the whole matrix above
        _check_entries(M, np.arange(N), ids, path, features, f"{args.selection} selection reads every row")
    try:
        idx = _select(args, M, M_select, features, n)
    except ValueError as exc:
        raise Refused(f"cannot choose landmarks: {exc}") from None
    if idx.size < n:
        n = int(idx.size)  # fewer distinct objects than asked: the selection warned with the count
    if not reads_all and not sims:
        _check_entries(M, idx, ids, path, features, "an entry of the chosen landmarks")
    # the input's ids, or its row numbers: what a user needs to build rows in the model's landmark order
    lm_ids = [ids[i] for i in idx] if ids is not None else [str(int(i)) for i in idx]
    est = LandmarkMDS(n_components=args.n_components, method=args.method,
                      input="similarity" if sims else "dissimilarity", geodesic_neighbors=args.geodesic_neighbors,
                      correction=args.correction, landmark_map=args.landmark_map, random_state=args.seed,
                      coverage=args.coverage, kernel_bandwidth=args.kernel_bandwidth)
    t0 = time.perf_counter()
    try:
        if features:
            est.fit_features(M[idx], metric=args.metric, landmark_ids=lm_ids)
        else:
            est.fit(M[np.ix_(idx, idx)], landmark_ids=lm_ids)
        if n < N:  # the objects that are not landmarks calibrate the radius (a WARNING says why when they cannot)
            est.calibrate_radius(M, idx)
    except ValueError as exc:
        raise Refused(f"cannot fit: {exc}") from None
    save_model(est.model_, out, params=est.get_params())
    kind = "features/" + args.metric if features else ("similarities" if sims else "dissimilarities")
    return _report(args, est, lm_ids, N, ids is not None, kind, t0)


def _report(args: argparse.Namespace, est: Any, lm_ids: list[str], N: int, named_ids: bool, kind: str,
            t0: float) -> int:
    """Write --landmarks-out and tell what was written (stderr)."""
    n = len(lm_ids)
    if args.landmarks_out:
        Path(args.landmarks_out).write_text("".join(f"{x}\n" for x in lm_ids), encoding="utf-8")
    named = "ids" if named_ids else "row numbers of the input"
    shown = ", ".join(lm_ids[:12]) + (f", ... ({n - 12} more)" if n > 12 else "")
    from streamembed.core.monitor.explained import explained, warning_text

    e = explained(est.model_)
    if warning_text(e):
        log.warning("%s", warning_text(e))
    print(f"wrote {args.output}: {n} landmarks (of {N}), d = {args.n_components}, {kind}, lineage "
          f"{est.lineage_}, fitted in {time.perf_counter() - t0:.2f} s\n"
          f"{_radius_line(est.model_, N - n)}\n"
          f"explained: {e.line()}\n"
          f"drift: {_arming(est.model_)}\n"
          f"landmarks in model order ({named}): {shown}"
          + (f"\n(all {n} written to {args.landmarks_out})" if args.landmarks_out else
             "\n(--landmarks-out FILE writes them all, one per line; `streamembed model info` shows them)"),
          file=sys.stderr)
    return EXIT_OK


def _arming(model: Any) -> str:
    """What the model's fit baseline arms a daemon's drift detectors with (docs/math.md §7.8)."""
    b = model.fit_baseline
    if b is None:
        return ("no fit baseline (every object is a landmark): a daemon's detectors arm after "
                "drift.baseline_objects objects of the stream")
    return f"armed from the fit: a daemon monitors from the first record ({b.n_objects:,} non-landmark fit objects)"


def _radius_line(model: Any, others: int) -> str:
    """What the summary says about the radius: its coverage and calibration, or why there is none."""
    cal = model.radius_calibration
    if cal is None:
        why = "every object is a landmark" if others == 0 else "see the WARNING above"
        return f"no radius ({why}; --landmarks n below N calibrates one on the other objects)"
    info = cal.info
    return (f"radius: coverage {cal.coverage:g}, calibrated on {info.get('calibration_objects')} of "
            f"{info.get('objects')} non-landmark objects against their full classical MDS (docs/math.md §9)")


def add_parser(subparsers: Subparsers) -> None:
    from streamembed.config.schema import default
    from streamembed.core.options import DEFAULTS, OPTIONS

    description = (
        "Fit a landmark model. Input: --dissimilarities (N x N, not squared), --similarities (N x N kernel)\n"
        "or --features (N x p) from .npy, .csv (numeric columns; an 'id' column names objects), or\n"
        "--objects (strings, bytes or series: text lines, JSON lines or Parquet 'id'/'object', with --metric), or\n"
        "Parquet/Arrow/JSONL (a 'dissimilarities' / 'features' list column, or numeric columns; optional\n"
        "'id'). With --landmarks n < N, n landmarks are chosen by --selection (docs/landmarks.md);\n"
        "--selection skeleton (--features, Euclidean) keeps the LSDR skeleton (docs/math.md §8.4).\n"
        "The landmarks keep the input's ids, or their row numbers in the input when it has none; input\n"
        "rows must follow the model's landmark order, which fit prints (and --landmarks-out writes).")
    f = subcommand(subparsers, "fit", HELP, run, description)
    src = f.add_mutually_exclusive_group(required=True)
    src.add_argument("--dissimilarities", metavar="FILE", help="N x N dissimilarity matrix")
    src.add_argument("--features", metavar="FILE", help="N x p feature vectors (feature-mode model)")
    src.add_argument("--objects", metavar="FILE",
                     help="N objects: text lines, JSON lines or Parquet with 'id' and 'object' (strings, bytes or "
                          "lists of numbers), compared by --metric (docs/objects.md); the model keeps the landmarks' "
                          "objects")
    src.add_argument("--similarities", metavar="FILE",
                     help="N x N similarity (kernel) matrix: a model whose input rows are similarities "
                          "(docs/math.md §2)")
    f.add_argument("--metric", default=default("model.metric"),
                   help="metric for --features or --objects: a scipy cdist name, levenshtein, "
                   "levenshtein-normalized, indel, indel-normalized, jaro-winkler, dtw, or package.module:function "
                   "(default: %(default)s)")
    f.add_argument("--landmarks", type=int, metavar="N", help="number of landmarks (default: all objects)")
    f.add_argument("--selection", choices=(*OPTIONS["landmark_selection"].values, "first"),
                   default=DEFAULTS["landmark_selection"],
                   help="how to choose the landmarks (default: %(default)s; docs/landmarks.md compares them; first: "
                        "the first N rows)")
    f.add_argument("--skeleton-alpha", type=float, default=DEFAULTS["skeleton_alpha"], metavar="A",
                   help="--selection skeleton: level of the edge tests (default: %(default)s)")
    f.add_argument("--skeleton-neighbors", type=int, default=DEFAULTS["skeleton_neighbors"], metavar="K",
                   help="--selection skeleton: geodesic neighbours of the skeleton test (default: %(default)s)")
    f.add_argument("--n-components", type=int, default=DEFAULTS["n_components"], metavar="D",
                   help="map dimensions (default: %(default)s)")
    f.add_argument("--method", choices=OPTIONS["method"].values, default=DEFAULTS["method"],
                   help="the embedding method stored with the model: embed's default for it "
                        "(the daemon's is model.method)")
    f.add_argument("--kernel-bandwidth", type=float, default=DEFAULTS["kernel_bandwidth"], metavar="SIGMA",
                   help="bandwidth of --method kernel, in the units of the dissimilarities (default: Roy's rule "
                        "from the landmarks, docs/math.md §8.6), stored with the model")
    f.add_argument("--geodesic-neighbors", type=int, metavar="K",
                   help="landmark Isomap: geodesic distances through the K-nearest-neighbour graph (docs/math.md §3)")
    f.add_argument("--correction", choices=OPTIONS["correction"].values, default=DEFAULTS["correction"],
                   help="non-Euclidean correction: cailliez adds the constant making the kernel PSD")
    f.add_argument("--landmark-map", choices=OPTIONS["landmark_map"].values, default=DEFAULTS["landmark_map"],
                   help="refine the landmark map by SMACOF or Sammon, or fit an ordinal one (nonmetric: only the "
                        "order of the dissimilarities counts); needs --method stress or l1")
    f.add_argument("--seed", type=int, default=DEFAULTS["random_state"],
                   help="seed of the landmark selection, kept as the model's random_state (default %(default)s)")
    f.add_argument("--coverage", type=float, default=default("trust.coverage"), metavar="C",
                   help="stated coverage of the placements' radius (docs/math.md §9), calibrated on the objects that "
                        "are not landmarks (needs --landmarks below N; default %(default)s)")
    f.add_argument("-o", "--output", required=True, metavar="MODEL.npz", help="where to write the model")
    f.add_argument("--landmarks-out", metavar="FILE", help="also write the landmark ids in model order, one per line")
