"""``streamembed model info MODEL.npz``: what a model file holds — version, lineage, landmarks, spectrum;
``streamembed model landmarks MODEL.npz -o FILE.parquet``: its landmarks' ids and objects, in model order."""

from __future__ import annotations

import argparse
import json
from typing import Any

from streamembed.cli.common import EXIT_OK, Refused, Subparsers, subcommand

__all__ = ["add_parser", "run", "info"]

#: The subcommand's line in ``streamembed --help``.
HELP = "show what a model file holds (version, lineage, landmarks in order, spectrum)"


def run(args: argparse.Namespace) -> int:
    """``streamembed model WHAT``: dispatch on ``WHAT`` (``info``, ``landmarks``)."""
    return {"info": info, "landmarks": landmarks}[args.model_command](args)


def landmarks(args: argparse.Namespace) -> int:
    """``streamembed model landmarks``: the landmarks' ids and objects, in model order, as Parquet (``id``,
    ``object``: string, binary or list<float64>); what producers measure new objects against."""
    import sys
    from pathlib import Path

    import pyarrow.parquet as pq

    from streamembed.core.errors import ModelFileError
    from streamembed.model_io import read_model_file
    from streamembed.stream.object_tables import landmarks_table

    out = Path(args.output)
    if not out.parent.is_dir():
        raise Refused(f"-o {args.output}: directory {out.parent} does not exist")
    try:
        model, _ = read_model_file(args.model)
    except ModelFileError as exc:
        raise Refused(str(exc)) from None
    if model.features is None:
        raise Refused(f"{args.model} keeps no landmark objects: it was fitted from dissimilarities, so its landmarks "
                      f"are known by id only (`streamembed model info --all {args.model}` lists them in model order); "
                      f"fit with --objects or --features to keep them")
    from streamembed.atomic import atomic_file

    with atomic_file(out) as fh:
        pq.write_table(landmarks_table(model), fh)
    print(f"wrote {out}: {model.n_landmarks} landmarks of model version {model.version} (lineage {model.lineage}), "
          f"metric {model.metric}, in model order", file=sys.stderr)
    return EXIT_OK


def info(args: argparse.Namespace) -> int:
    """``streamembed model info``: print what a model file holds."""
    from streamembed.core.errors import ModelFileError
    from streamembed.core.monitor.explained import explained, warning_text
    from streamembed.model_io import read_model_file

    try:
        model, params = read_model_file(args.model)
    except ModelFileError as exc:
        raise Refused(str(exc)) from None
    doc: dict[str, Any] = {"path": str(args.model), **model.describe(), "method": params.get("method"),
                           "landmark_ids": [str(x) for x in model.landmark_ids],
                           "map": model.map_info,
                           "radius": None if model.radius_calibration is None else {
                               "coverage": model.radius_calibration.coverage,
                               "methods": sorted(model.radius_calibration.methods),
                               **model.radius_calibration.info},
                           "explained": _explained_doc(explained(model)),
                           "drift_baseline": None if model.fit_baseline is None else {
                               **model.fit_baseline.info, "objects": model.fit_baseline.n_objects,
                               "coverage_objects": model.fit_baseline.coverage_objects}}
    if args.json:
        print(json.dumps(doc, indent=1))
        return EXIT_OK
    ids = doc["landmark_ids"]
    limit = len(ids) if args.all else 20
    lines = [
        f"model {doc['path']}",
        f"  version {doc['version']}, lineage {doc['lineage']}",
        f"  {doc['landmarks']} landmarks, d = {doc['dims']}, {doc['input']} input"
        + (f", metric {doc['metric']}" if doc["metric"] else "") + f", default method {doc['method']}",
        f"  fit: geodesic_neighbors={doc['geodesic_neighbors']}, correction={doc['correction']}, "
        f"landmark_map={doc['landmark_map']}, eigensolver={doc['eigensolver']}",
        f"  eigenvalues (kept): {', '.join(f'{x:.6g}' for x in doc['eigenvalues'])}",
        f"  negative eigenvalue share: {doc['negative_share']:.3g}; aligned to an earlier map: {doc['aligned']}",
        "  eigengap at the cut-off (lambda_d - lambda_{d+1}) / lambda_d: " + _eigengap_line(doc),
        f"  eigenpairs monitored for k0: {doc['monitored_eigenpairs']}",
        "  radius: " + _radius_line(doc["radius"]),
        "  kernel bandwidth (method kernel, docs/math.md 8.6): "
        + ("none" if model.bandwidth is None else f"{model.bandwidth:.6g}"
           + (" (given)" if model.kernel_bandwidth is not None else " (the landmarks' rule)")),
        "  explained: " + _explained_line(explained(model), warning_text),
        "  drift: " + _arming_line(doc["drift_baseline"]),
        f"  landmark ids in model order (input rows follow it): {', '.join(ids[:limit])}"
        + ("" if limit >= len(ids) else f", ... ({len(ids) - limit} more; --all shows them)"),
    ]
    print("\n".join(lines))
    return EXIT_OK


def _explained_line(e: Any, warning_text: Any) -> str:
    why = warning_text(e)
    return e.line() if why is None else f"{e.line()} -- WARNING: positions show a small part of the structure" + \
        why[why.index(";"):]


def _explained_doc(e: Any) -> dict[str, Any]:
    return {"share": e.share, "median_unexplained": e.median_unexplained, "objects": e.objects, "of": e.of,
            "half_dimension": e.half_dimension, "low": e.low}


def _arming_line(baseline: dict[str, Any] | None) -> str:
    if baseline is None:
        return ("no fit baseline: a daemon's detectors arm after drift.baseline_objects objects of the stream "
                "(fit with more objects than landmarks to arm them from the first record; docs/math.md 7.8)")
    cov = int(baseline.get("coverage_samples", 0))
    return (f"armed from the fit: {baseline['objects']:,} non-landmark fit objects"
            + (f", {cov} coverage samples of {baseline.get('coverage_objects', '?')}" if cov else "")
            + " (docs/math.md 7.8)")


def _radius_line(radius: dict[str, Any] | None) -> str:
    if radius is None:
        return "none (the output's radius is null; docs/math.md 9)"
    return (f"coverage {radius['coverage']:g} for {', '.join(radius['methods'])}, calibrated on "
            f"{radius.get('calibration_objects')} of {radius.get('objects')} non-landmark fit objects")


def _eigengap_line(doc: dict[str, Any]) -> str:
    from streamembed.core.model import EIGENGAP_RTOL

    gap = doc["eigengap"]
    if gap is None:
        return "unknown (lambda_{d+1} was not computed)"
    if doc["map_unique"]:
        return f"{gap:.3g}"
    return (f"{gap:.3g} -- WARNING: at most {EIGENGAP_RTOL:g}, the map is not unique: it and every placement "
            f"depend on the landmark order (docs/math.md 4.6)")


def add_parser(subparsers: Subparsers) -> None:
    m = subcommand(subparsers, "model", HELP, run, "Inspect a model file.")
    msub = m.add_subparsers(dest="model_command", metavar="WHAT", required=True)
    i = msub.add_parser("info", help="version, lineage, landmark ids in model order, spectrum",
                        description="Print what MODEL.npz holds: its version and lineage, its landmark ids in "
                                    "model order (input rows must follow it), the kept eigenvalues, the "
                                    "eigengap at the cut-off (whether the map is unique) and fit parameters.")
    i.add_argument("model", metavar="MODEL.npz")
    i.add_argument("--json", action="store_true", help="one JSON document")
    i.add_argument("--all", action="store_true", help="list every landmark id")
    lm = msub.add_parser("landmarks", help="export the landmarks' ids and objects, in model order (Parquet)",
                         description="Write MODEL.npz's landmarks as Parquet: columns id and object (string, binary "
                                     "or list<float64>), in model order, with the model's version, lineage and "
                                     "metric in the schema metadata: what a producer measures new objects "
                                     "against (streamembed.producer does it for you).")
    lm.add_argument("model", metavar="MODEL.npz")
    lm.add_argument("-o", "--output", required=True, metavar="FILE.parquet")


