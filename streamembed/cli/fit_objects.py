"""``streamembed fit --objects FILE --metric NAME``: a model from objects (strings, bytes, series), no matrix needed.

FILE: Parquet or Arrow with an ``object`` column (and optionally ``id``),
JSON lines ``{"id": ..., "object": ...}``, or any other file as text lines
(one object per line; ids are the line numbers from 0). The metric (a
built-in name or ``package.module:function``, ``core.inputs.metrics``)
computes only the dissimilarities the fit asks for: the landmark selection's
(``core.inputs.dissimilarities.Dissimilarities`` counts them), the landmarks'
among themselves, and those of the radius calibration and the drift detectors'
fit baseline, on one seeded sample of at most ``core.trust.calibrate.MAX_OBJECTS``
other objects (so drift monitoring is armed from the first record). The model keeps the
landmarks' objects (``streamembed model landmarks`` exports them) and the
metric's name, so rows carrying objects are placed by the daemon, and the
summary states how many dissimilarities were computed against the N(N - 1)/2
of the full matrix.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamembed.cli.common import EXIT_OK, Refused

__all__ = ["read_objects", "read_table", "run_objects"]

#: Suffixes read as tables (an ``object`` column); anything else is text lines.
_TABLES = (".parquet", ".pq", ".arrow", ".arrows", ".ipc", ".feather", ".jsonl", ".ndjson", ".json")


def read_objects(path: str, metric: Any, max_length: int | None = None) -> tuple[Any, list[str] | None]:
    """(the N objects ``metric`` takes, their ids or None) of FILE (see the module doc); Refused naming the first
    object the metric cannot take (its row and id)."""
    import pyarrow as pa

    from streamembed.stream.objects import ObjectSpec, object_rows

    p = Path(path)
    if not p.is_file():
        raise Refused(f"--objects {path} does not exist" if not p.exists() else f"--objects {path} is not a file")
    if p.suffix.lower() in _TABLES:
        table = read_table(path)
        if "object" not in table.schema.names:
            raise Refused(f"{path} has no 'object' column (columns: {', '.join(table.schema.names)})")
    else:
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            raise Refused(f"cannot read {path} as text lines: {exc}") from None
        lines = text.splitlines()
        table = pa.table({"object": pa.array(lines, pa.string())})
    ids = [str(x) for x in table.column("id").to_pylist()] if "id" in table.schema.names else None
    spec = ObjectSpec(metric.name, metric.takes)
    if max_length is not None:
        spec = ObjectSpec(metric.name, metric.takes, max_length=max_length)
    width = None
    if metric.takes in ("vectors", "booleans") and table.num_rows:
        first = table.column("object")[0].as_py()
        width = len(first) if isinstance(first, list) else None
    rows = object_rows(table.combine_chunks().to_batches()[0] if table.num_rows else table, spec, width)
    if rows.problems:
        i, why = next(iter(rows.problems.items()))
        named = f" (id {ids[i]!r})" if ids is not None else ""
        raise Refused(f"{path}: row {i}{named}: {why}; {len(rows.problems)} row(s) refused in all")
    return rows.objects, ids


def read_table(path: str) -> Any:
    """The whole of a Parquet, Arrow IPC or JSON lines file as one ``pyarrow.Table`` (the stream's readers, so
    the same formats and checks); Refused with the reason when it cannot be read, has a bad row or no rows."""
    import pyarrow as pa

    from streamembed.stream.readers import iter_file

    try:
        chunks = list(iter_file(Path(path), batch_rows=1 << 30, max_block_rows=1 << 30))
    except Exception as exc:  # any unreadable input refuses with the reason
        raise Refused(f"cannot read {path}: {exc}") from None
    dead = [d for c in chunks for d in c.dead]
    if dead:
        raise Refused(f"{path}: {dead[0].reason}: {dead[0].detail}")
    tables = [c.table for c in chunks if c.table is not None]
    if not tables:
        raise Refused(f"{path} holds no rows")
    return pa.concat_tables(tables)


def run_objects(args: argparse.Namespace) -> int:
    """``fit --objects``: read, select, fit, calibrate, save (see the module doc)."""
    from streamembed import LandmarkMDS
    from streamembed.core.errors import InputError
    from streamembed.core.inputs.dissimilarities import Dissimilarities
    from streamembed.core.inputs.metrics import resolve_metric
    from streamembed.core.refit.landmarks import select_landmarks
    from streamembed.model_io import save_model

    try:
        metric = resolve_metric(args.metric)
    except InputError as exc:
        raise Refused(f"--metric {args.metric}: {exc}") from None
    t0 = time.perf_counter()
    objs, ids = read_objects(args.objects, metric)
    N = len(objs)
    n = args.landmarks or N
    if not 2 <= n <= N:
        raise Refused(f"--landmarks {n} must be between 2 and the {N} objects in {args.objects}")
    dis = Dissimilarities(X=objs, metric=metric)
    try:
        if n == N or args.selection == "first":
            idx = np.arange(n)
        else:
            idx = select_landmarks(args.selection, n, D=dis, seed=args.seed, n_components=args.n_components)
    except ValueError as exc:
        raise Refused(f"cannot choose landmarks: {exc}") from None
    lm_ids = [ids[i] for i in idx] if ids is not None else [str(int(i)) for i in idx]
    est = LandmarkMDS(n_components=args.n_components, method=args.method, geodesic_neighbors=args.geodesic_neighbors,
                      correction=args.correction, landmark_map=args.landmark_map, random_state=args.seed,
                      coverage=args.coverage)
    try:
        est.fit_features(objs[idx], metric=metric.name if ":" not in args.metric else args.metric,
                         landmark_ids=lm_ids)
        computed = dis.computed + idx.size * idx.size
        if idx.size < N:
            computed += _calibrate(est, objs, idx, metric, args.seed)
    except ValueError as exc:
        raise Refused(f"cannot fit: {exc}") from None
    save_model(est.model_, args.output, params=est.get_params())
    _report(args, est, lm_ids, N, ids is not None, metric.name, computed, dis.computed, t0)
    return EXIT_OK


def _calibrate(est: Any, objs: Any, idx: np.ndarray, metric: Any, seed: int) -> int:
    """Calibrate the radius, then the drift detectors' fit baseline, on a seeded sample of the other objects (their
    rows and mutual dissimilarities only); returns the dissimilarities it computed."""
    from streamembed.core.monitor.fit_baseline import fit_baseline_on_matrix
    from streamembed.core.trust.calibrate import MAX_OBJECTS, calibrate

    model = est.model_
    others = np.setdiff1d(np.arange(len(objs)), idx)
    if others.size > MAX_OBJECTS:
        others = np.sort(np.random.default_rng(seed).choice(others, MAX_OBJECTS, replace=False))
    rows = model.dissimilarities_to_landmarks(objs[others], metric=metric)
    mutual = metric.pairwise(objs[others])
    n = idx.size
    D = np.empty((n + others.size, n + others.size))
    D[:n, :n] = model.dissimilarities
    D[n:, :n], D[:n, n:], D[n:, n:] = rows, rows.T, mutual
    result = calibrate(model, rows, D, coverage=est.coverage, random_state=int(seed))
    if result.calibration is None:
        print(f"WARNING: {result.reason}", file=sys.stderr)
    est.model_ = model.with_radius_calibration(result.calibration)
    if result.calibration is not None:
        result.calibration.info.update(sampled=bool(len(objs) - n > others.size), fit_objects=int(len(objs) - n))
    est.model_ = est.model_.with_fit_baseline(fit_baseline_on_matrix(est.model_, D, np.arange(n),
                                                                     random_state=int(seed)))
    return int(rows.size + mutual.size)


def _report(args: argparse.Namespace, est: Any, lm_ids: list[str], N: int, named_ids: bool, metric: str,
            computed: int, selection: int, t0: float) -> None:
    """Write --landmarks-out and tell what was written and what it cost (stderr)."""
    n = len(lm_ids)
    if args.landmarks_out:
        Path(args.landmarks_out).write_text("".join(f"{x}\n" for x in lm_ids), encoding="utf-8")
    full = N * (N - 1) // 2
    shown = ", ".join(lm_ids[:12]) + (f", ... ({n - 12} more)" if n > 12 else "")
    print(f"wrote {args.output}: {n} landmarks (of {N} objects), d = {args.n_components}, objects/{metric}, lineage "
          f"{est.lineage_}, in {time.perf_counter() - t0:.2f} s\n"
          f"dissimilarities computed: {computed:,} ({selection:,} by the landmark selection, the rest by the fit "
          f"and the radius calibration), {computed / max(full, 1):.2%} of the {full:,} of the full matrix\n"
          f"{_radius(est.model_, N - n)}\n"
          f"landmarks in model order ({'ids' if named_ids else 'line numbers of the input'}): {shown}\n"
          f"(`streamembed model landmarks {args.output} -o landmarks.parquet` exports their ids and objects)",
          file=sys.stderr)


def _radius(model: Any, others: int) -> str:
    cal = model.radius_calibration
    if cal is None:
        return "no radius (" + ("every object is a landmark" if others == 0 else "see the WARNING above") + ")"
    return (f"radius: coverage {cal.coverage:g}, calibrated on {cal.info.get('calibration_objects')} of "
            f"{cal.info.get('objects')} sampled non-landmark objects against their full classical MDS "
            f"(docs/math.md §9)")
