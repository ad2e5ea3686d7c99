"""``streamembed model info MODEL.npz``: what a model file holds — version, lineage, landmarks, spectrum."""

from __future__ import annotations

import argparse
import json
from typing import Any

from streamembed.cli.common import EXIT_OK, Refused, Subparsers, subcommand

__all__ = ["add_parser", "run", "info"]

#: The subcommand's line in ``streamembed --help``.
HELP = "show what a model file holds (version, lineage, landmarks in order, spectrum)"


def run(args: argparse.Namespace) -> int:
    """``streamembed model WHAT``: dispatch on ``WHAT`` (today only ``info``)."""
    return {"info": info}[args.model_command](args)


def info(args: argparse.Namespace) -> int:
    """``streamembed model info``: print what a model file holds."""
    from streamembed.core.errors import ModelFileError
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
                               **model.radius_calibration.info}}
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
        f"  landmark ids in model order (input rows follow it): {', '.join(ids[:limit])}"
        + ("" if limit >= len(ids) else f", ... ({len(ids) - limit} more; --all shows them)"),
    ]
    print("\n".join(lines))
    return EXIT_OK


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


