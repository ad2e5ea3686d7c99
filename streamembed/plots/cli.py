"""``streamembed plot map|drift|drift-bench|demo``: the command line of the plots."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._figure import MatplotlibMissing
from .demo import demo
from .drift import plot_drift, plot_drift_benchmark
from .history import (
    HISTORY_STATISTICS,
    is_history,
    is_refit_history,
    plot_drift_history,
    read_drift_history,
    read_records,
)
from .map import plot_map


def _read_embedded(path: str) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    from ..stream.output import schema_version_of, y_columns, y_matrix

    table = pq.read_table(path)
    names = table.schema.names
    if ("y" not in names) if schema_version_of(table.schema) == 1 else not y_columns(table.schema):
        raise ValueError(f"{path} has no coordinates ('y' or y0, y1, ...: expected the output of 'streamembed embed')")
    out = {"y": np.asarray(y_matrix(table), dtype=np.float64)}  # either output version (stream.output)
    if "id" in names:
        out["id"] = np.asarray(table.column("id").to_pylist(), dtype=object)
    for name in ("beta", "unexplained", "k0", "model_version"):
        if name in names:
            out[name] = np.asarray(table.column(name).to_numpy(zero_copy_only=False))
    if "beta" in out and "unexplained" in out:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["relative_unexplained"] = np.where(out["beta"] > 0, out["unexplained"] / out["beta"], np.nan)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamembed plot",
                                description="Draw the landmark map or drift statistics to PNG (needs matplotlib).")
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("map", help="the landmark map with embedded objects")
    m.add_argument("-m", "--model", required=True, metavar="MODEL.npz")
    m.add_argument("-e", "--embedded", required=True, metavar="EMBEDDED.parquet", help="output of 'streamembed embed'")
    m.add_argument("-o", "--output", default="map.png", metavar="PNG")
    m.add_argument("--color-by", default="relative_unexplained", choices=("relative_unexplained", "model_version",
                                                                          "k0", "none"))
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
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``streamembed plot``; exit code 0 ok, 2 refused (bad input or matplotlib missing)."""
    args = build_parser().parse_args(argv)
    try:
        if args.what == "map":
            from ..estimator import LandmarkMDS

            est = LandmarkMDS.load(args.model)
            emb = _read_embedded(args.embedded)
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
                           title=args.title, max_points=args.max_points, ids=emb.get("id"), label=label)
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
            return 0
    except MatplotlibMissing as exc:
        print(f"streamembed plot: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as exc:
        print(f"streamembed plot: {exc}", file=sys.stderr)
        return 2
    print(out)
    title = _png_title(out)
    if title:
        print(f"{out}: {title}", file=sys.stderr)
    return 0


def _png_title(path: Path) -> str | None:
    """The ``Title`` text chunk of a PNG this module wrote (None if it has none)."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            return im.info.get("Title")
    except Exception:  # noqa: BLE001 - a summary line only
        return None
