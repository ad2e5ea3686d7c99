"""Drift statistics over time from plain records (``plot_drift``) and the drift benchmark's figure."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._figure import RECORD_META_KEYS, colormap, figure_class, parse_time


def _numeric_keys(recs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every numeric (not bool) key outside ``RECORD_META_KEYS``, in first-seen order."""
    keys: list[str] = []
    for r in recs:
        for k, v in r.items():
            if k not in RECORD_META_KEYS and k not in keys and isinstance(v, (int, float)) and not isinstance(v, bool):
                keys.append(k)
    return keys


def _refit_marks(times: Sequence[Any], recs: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any]]:
    """(time, model_version) of each record flagged "refit" or whose model_version changed."""
    refits = []
    prev_version = None
    for t, r in zip(times, recs, strict=True):
        version = r.get("model_version")
        if r.get("refit") or (prev_version is not None and version is not None and version != prev_version):
            refits.append((t, version))
        prev_version = version if version is not None else prev_version
    return refits


def plot_drift(
    records: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str] = "drift.png",
    *,
    statistics: Sequence[str] | None = None,
    thresholds: Mapping[str, float] | None = None,
    title: str = "Drift statistics",
    time_label: str | None = None,
    log_scale: Sequence[str] = (),
) -> Path:
    """Draw drift statistics over time, one panel per statistic, refits marked.

    Args:
        records: dicts with "time" (seconds, a number of objects, or an ISO 8601
            string), statistic values (numbers; None/missing = gap), and
            optionally "refit" (truthy on the record where a refit took effect)
            and "model_version" (a change also marks a refit).
        path: output PNG path.
        statistics: which keys to draw (default: every numeric key not in
            ``RECORD_META_KEYS``, in first-seen order, at most 6).
        thresholds: key -> value drawn as a dashed red alert line.
        title: figure title.
        time_label: x-axis label (default "time" or "time (UTC)" for timestamps).
        log_scale: keys drawn on a logarithmic y axis.
    Returns:
        The written path.
    """
    Figure = figure_class()
    if not records:
        raise ValueError("plot_drift needs at least one record")
    if any("time" not in r for r in records):
        raise ValueError("every drift record needs a 'time'")
    recs = sorted(records, key=lambda r: parse_time(r["time"]))
    times = [parse_time(r["time"]) for r in recs]
    if statistics is None:
        statistics = _numeric_keys(recs)[:6]
    if not statistics:
        raise ValueError("no numeric statistic found in the records")
    refits = _refit_marks(times, recs)

    fig = Figure(figsize=(9.0, 1.9 + 1.7 * len(statistics)), dpi=130, layout="constrained")
    axes = fig.subplots(len(statistics), 1, sharex=True, squeeze=False)[:, 0]
    thresholds = dict(thresholds or {})
    for ax, key in zip(axes, statistics, strict=False):
        vals = np.array([np.nan if r.get(key) is None else float(r[key]) for r in recs])
        ax.plot(times, vals, marker="o", markersize=2.5, linewidth=1.3, color="tab:blue", label=key)
        if key in thresholds:
            ax.axhline(thresholds[key], color="tab:red", linestyle="--", linewidth=1.0,
                       label=f"alert threshold {thresholds[key]:g}")
        for n_ref, (t, _version) in enumerate(refits):
            ax.axvline(t, color="tab:orange", linestyle=":", linewidth=1.4,
                       label="refit" if n_ref == 0 else None)
        if key in log_scale:
            ax.set_yscale("log")
        ax.set_ylabel(key.replace("_", " "))
        ax.grid(True, alpha=0.25)
        ax.legend(loc="upper left", fontsize=7, framealpha=0.85)
    top = axes[0]
    for t, version in refits:
        if version is not None:
            top.annotate(f"v{version}", xy=(t, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -10),
                         textcoords="offset points", fontsize=7, color="tab:orange")
    is_time = isinstance(times[0], _dt.datetime)
    axes[-1].set_xlabel(time_label or ("time (UTC)" if is_time else "time"))
    if is_time:
        fig.autofmt_xdate()
    suptitle = f"{title} ({len(recs)} windows, {len(refits)} refit{'s' if len(refits) != 1 else ''})"
    fig.suptitle(suptitle)
    out = Path(path)
    fig.savefig(out, format="png", metadata={"Title": suptitle})
    return out


def plot_drift_benchmark(report: Mapping[str, Any], path: str | os.PathLike[str] = "drift-bench.png") -> Path:
    """Delay vs false-alarm rate per detector, one panel per change scenario off the span.

    x: false alarms per 10⁶ stationary objects (point estimate, bar to the
    95 % upper bound; 0 is drawn at the left edge of a symmetric-log axis);
    y: median detection delay in objects (bar to the 90th percentile; log
    scale); a detector that missed every replicate is drawn hollow at the top.
    ``report`` is the content of ``python -m benchmarks drift --json`` (a source checkout).
    """
    Figure = figure_class()
    rows = list(report.get("detectors", []))
    if not rows:
        raise ValueError("the report has no detector rows")
    scen = [k for k in rows[0]["delays"] if "in span" not in k]
    fig = Figure(figsize=(5.2 * len(scen), 5.2), dpi=130, layout="constrained")
    axes = fig.subplots(1, len(scen), squeeze=False)[0]
    cmap = colormap(len(rows))
    markers = "os^Dv<>pXh*P"
    top = max((d["p90"] or 0) for r in rows for d in r["delays"].values() if d.get("p90") is not None) or 1.0
    for ax, key in zip(axes, scen, strict=False):
        for i, r in enumerate(rows):
            d = r["delays"][key]
            x = r["fa_per_million"]
            xerr = [[0.0], [max((r["fa_ci_high"] or 0.0) - x, 0.0)]]
            label = f"{r['detector']} · {r['setting']}"
            if d.get("median") is None or d["misses"] == d["replicates"]:
                ax.scatter([x], [top * 2], marker=markers[i % len(markers)], facecolor="none",
                           edgecolor=cmap(i), s=60, label=label + " (missed all)")
                continue
            yerr = [[0.0], [max(d["p90"] - d["median"], 0.0)]]
            # shrinking markers with an edge: detectors at the same point stay visible
            ax.errorbar([x], [d["median"]], xerr=xerr, yerr=yerr, fmt=markers[i % len(markers)], color=cmap(i),
                        ms=max(12 - 0.6 * i, 4), mec="black", mew=0.6, alpha=0.9, elinewidth=0.8, capsize=3,
                        label=label + (f" ({d['misses']} missed)" if d["misses"] else ""))
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlim(left=-0.02)
        ax.set_yscale("log")
        ax.set_title(key)
        ax.set_xlabel("false alarms per 10⁶ stationary objects (bar: 95 % upper bound)")
        ax.set_ylabel("detection delay, objects (median; bar to p90)")
        ax.grid(True, which="both", alpha=0.25)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=7, framealpha=0.9)
    s = report.get("settings", {})
    fig.suptitle(f"Drift detectors: {s.get('stationary_objects', 0):,} objects per stationary stream, "
                 f"{s.get('replicates', '?')} replicates per change (lower left is better)")
    out = Path(path)
    fig.savefig(out, format="png")
    return out
