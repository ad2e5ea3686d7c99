"""PNG plots: the landmark map with embedded objects, and drift statistics over time.

matplotlib is an optional extra (``pip install 'streamembed[plot]'``); it is
imported only when a plot is drawn. Figures are built with
``matplotlib.figure.Figure`` (no pyplot global state, no GUI backend), so
plotting is safe inside the daemon or a test.

``streamembed plot`` (its parser in ``streamembed.cli.plot``) has four subcommands:

    streamembed plot map -m model.npz -e embedded.parquet -o map.png [--color-by relative_unexplained]
                         [--max-points N] [--label-ids N | --label ID ...]
    streamembed plot drift OUTPUT_ROOT -o drift.png      # the daemon's drift-history.jsonl + model-history.jsonl
    streamembed plot drift records.jsonl -o drift.png [--stats trace_k0,gap_ratio]
    streamembed plot drift-bench report.json -o bench.png  # from `python -m benchmarks drift --json`
    streamembed plot demo -o DIR          # both plots from a synthetic drifting stream

The daemon's drift history (``<output.root>/drift-history.jsonl``) has one
JSON object per statistics update: ``time`` (ISO 8601), ``unix`` (seconds),
``model_version``, ``objects_seen``, ``window`` (``DriftStatistics.as_dict()``)
and ``detector`` (``kind`` "cusum" or "rule", ``statistic``, ``threshold``,
``expected_run_objects``, ``fired``); refits come from
``<output.root>/model-history.jsonl`` (``time``, ``unix``, ``status``, ``model_version``).
Modules: ``map`` (the landmark map), ``drift`` (statistics from plain records; the drift benchmark's figure),
``history`` (the daemon's drift history), ``demo``; ``_figure`` holds what they share.

Each PNG carries its figure title as PNG ``Title`` metadata, and ``streamembed plot``
prints it beside the path (e.g. "50,000 of 950,950 objects").
"""

from __future__ import annotations

from ._figure import RECORD_META_KEYS, MatplotlibMissing
from .demo import demo, novel_cluster_points
from .drift import plot_drift, plot_drift_benchmark
from .history import HISTORY_STATISTICS, history_timeline, plot_drift_history, read_drift_history, read_records
from .map import plot_map

__all__ = ["MatplotlibMissing", "plot_map", "plot_drift", "plot_drift_history", "plot_drift_benchmark",
           "read_drift_history", "read_records", "history_timeline", "demo", "novel_cluster_points",
           "HISTORY_STATISTICS", "RECORD_META_KEYS"]
