"""``streamembed plot map|drift|drift-bench|demo``: the command line of the plots (``streamembed.plots``, extra plot).

The drawing code, and matplotlib with it, is imported when a plot is drawn, never to build the parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from streamembed.cli.common import EXIT_OK, Refused, Subparsers

if TYPE_CHECKING:
    import numpy as np

__all__ = ["add_parser", "run", "read_embedded"]

#: The subcommand's line in ``streamembed --help``.
HELP = "render the map or the drift history to PNG (needs matplotlib)"


def read_embedded(path: str) -> dict[str, np.ndarray]:
    """The columns of an ``embed`` output file (either output version) a map is drawn from: ``y`` (n, d) float64,
    ``id``, ``beta``, ``unexplained``, ``k0``, ``model_version``, ``radius`` when present, and
    ``relative_unexplained``."""
    import numpy as np
    import pyarrow.parquet as pq

    from streamembed.stream.output import schema_version_of, y_columns, y_matrix

    table = pq.read_table(path)
    names = table.schema.names
    if ("y" not in names) if schema_version_of(table.schema) == 1 else not y_columns(table.schema):
        raise ValueError(f"{path} has no coordinates ('y' or y0, y1, ...: expected the output of 'streamembed embed')")
    out = {"y": np.asarray(y_matrix(table), dtype=np.float64)}  # either output version (stream.output)
    if "id" in names:
        out["id"] = np.asarray(table.column("id").to_pylist(), dtype=object)
    for name in ("beta", "unexplained", "k0", "model_version", "radius"):
        if name in names:
            out[name] = np.asarray(table.column(name).to_numpy(zero_copy_only=False))
    if "beta" in out and "unexplained" in out:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["relative_unexplained"] = np.where(out["beta"] > 0, out["unexplained"] / out["beta"], np.nan)
    return out


def add_parser(subparsers: Subparsers) -> None:
    # argparse's default formatter (help and description rewrapped), not cli.common.subcommand's verbatim one
    p = subparsers.add_parser("plot", help=HELP,
                              description="Draw the landmark map or drift statistics to PNG (needs matplotlib).")
    p.set_defaults(func=run)
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("map", help="the landmark map with embedded objects")
    m.add_argument("-m", "--model", required=True, metavar="MODEL.npz")
    m.add_argument("-e", "--embedded", required=True, metavar="EMBEDDED.parquet", help="output of 'streamembed embed'")
    m.add_argument("-o", "--output", default="map.png", metavar="PNG")
    m.add_argument("--color-by", default="relative_unexplained", choices=("relative_unexplained", "model_version",
                                                                          "k0", "radius", "none"))
    m.add_argument("--circles", type=int, default=300, metavar="N",
                   help="draw each object's radius (docs/math.md §9) as a circle around N of them (default 300; "
                        "0: none; files without a radius draw none)")
    m.add_argument("--title")
    m.add_argument("--max-points", type=int, default=50_000, metavar="N",
                   help="draw at most N objects, an evenly spaced sample (default 50,000); the title says so")
    m.add_argument("--label-ids", type=int, default=0, metavar="N", help="write the ids of N objects (evenly spaced)")
    m.add_argument("--label", action="append", default=[], metavar="ID",
                   help="write this object's id beside it (repeatable; drawn even when not sampled)")
    dr = sub.add_parser("drift", help="drift statistics over time")
    dr.add_argument("records", metavar="ROOT|RECORDS",
                    help="the daemon's output.root (drift-history.jsonl + model-history.jsonl), a drift-history.jsonl, "
                         "or a JSON array / JSON lines of {time, statistic..., refit?, model_version?}")
    dr.add_argument("--history", metavar="MODEL_HISTORY",
                    help="refit records (default: model-history.jsonl beside RECORDS)")
    dr.add_argument("-o", "--output", default="drift.png", metavar="PNG")
    dr.add_argument("--stats", help="comma-separated statistics to draw (default: all numeric, at most 6)")
    dr.add_argument("--threshold", action="append", default=[], metavar="STAT=VALUE", help="alert line (repeatable)")
    dr.add_argument("--log", default="", help="comma-separated statistics on a log scale")
    dr.add_argument("--title", default="Drift statistics")
    db = sub.add_parser("drift-bench", help="delay vs false alarms per detector (python -m benchmarks drift --json)")
    db.add_argument("report", metavar="REPORT.json")
    db.add_argument("-o", "--output", default="drift-bench.png", metavar="PNG")
    de = sub.add_parser("demo", help="both plots from a synthetic drifting stream")
    de.add_argument("-o", "--output", default=".", metavar="DIR")


def run(args: argparse.Namespace) -> int:
    """Draw the plot ``args.what`` names; exit code 0 ok, 2 refused (bad input or matplotlib missing)."""
    from streamembed.plots import (
        HISTORY_STATISTICS,
        MatplotlibMissing,
        demo,
        plot_drift,
        plot_drift_benchmark,
        plot_drift_history,
        plot_map,
        read_drift_history,
        read_records,
    )
    from streamembed.plots.history import is_history, is_refit_history

    try:
        if args.what == "map":
            from streamembed.estimator import LandmarkMDS

            est = LandmarkMDS.load(args.model)
            emb = read_embedded(args.embedded)
            color = None if args.color_by == "none" else emb.get(args.color_by)
            if args.color_by != "none" and color is None:
                raise ValueError(f"{args.embedded} has no column for --color-by {args.color_by}")
            if args.max_points < 1:
                raise ValueError(f"--max-points {args.max_points} must be at least 1")
            if args.label and args.label_ids:
                raise ValueError("give either --label-ids N or --label ID, not both")
            label: int | list[str] | None = args.label or args.label_ids or None
            if label is not None and "id" not in emb:
                raise ValueError(f"{args.embedded} has no 'id' column to label objects with")
            out = plot_map(est, emb["y"], color, args.output, color_label=args.color_by.replace("_", " "),
                           title=args.title, max_points=args.max_points, ids=emb.get("id"), label=label,
                           radius=emb.get("radius"), max_circles=args.circles)
        elif args.what == "drift":
            thresholds = {}
            for item in args.threshold:
                key, sep, value = item.partition("=")
                if not sep:
                    raise ValueError(f"--threshold expects STAT=VALUE, got {item!r}")
                thresholds[key] = float(value)
            stats = [s for s in args.stats.split(",") if s] if args.stats else None
            src = Path(args.records)
            records = None if src.is_dir() else read_records(src)
            if records and is_refit_history(records):
                raise ValueError(f"{src} is the refit history (model-history.jsonl), not drift statistics: give "
                                 f"the output root ({src.parent}) or its drift-history.jsonl; the refits are drawn "
                                 f"from this file as marks")
            if records is None or is_history(records):
                drift, refits = read_drift_history(src, args.history)
                out = plot_drift_history(drift, refits, args.output, statistics=stats or HISTORY_STATISTICS,
                                         title="Drift" if args.title == "Drift statistics" else args.title)
            else:
                out = plot_drift(records, args.output, statistics=stats, thresholds=thresholds,
                                 title=args.title, log_scale=[s for s in args.log.split(",") if s])
        elif args.what == "drift-bench":
            out = plot_drift_benchmark(json.loads(Path(args.report).read_text()), args.output)
        else:
            outs = demo(args.output)
            print("\n".join(str(o) for o in outs))
            return EXIT_OK
    except (MatplotlibMissing, OSError, ValueError, KeyError) as exc:
        raise Refused(str(exc)) from None
    print(out)
    title = _png_title(out)
    if title:
        print(f"{out}: {title}", file=sys.stderr)
    return EXIT_OK


def _png_title(path: Path) -> str | None:
    """The ``Title`` text chunk of a PNG this module wrote (None if it has none)."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            return im.info.get("Title")
    except Exception:  # a summary line only
        return None
