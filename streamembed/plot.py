"""PNG plots: the landmark map with embedded objects, and drift statistics over time.

matplotlib is an optional extra (``pip install 'streamembed[plot]'``); it is
imported only when a plot is drawn. Figures are built with
``matplotlib.figure.Figure`` (no pyplot global state, no GUI backend), so
plotting is safe inside the daemon or a test.

``streamembed plot`` (``main``) has four subcommands:

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
Each PNG carries its figure title as PNG ``Title`` metadata, and ``main``
prints it beside the path (e.g. "50,000 of 950,950 objects").
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["MatplotlibMissing", "plot_map", "plot_drift", "plot_drift_history", "plot_drift_benchmark",
           "read_drift_history", "main"]

#: Keys of a drift record that are not statistics.
RECORD_META_KEYS = ("time", "refit", "model_version", "event", "note")


class MatplotlibMissing(ImportError):
    """matplotlib is not installed."""


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MatplotlibMissing(
            "plotting needs matplotlib, an optional extra: pip install 'streamembed[plot]' (or pip install matplotlib)"
        ) from exc
    return Figure


def _is_categorical(values: np.ndarray, kind: str) -> bool:
    if kind != "auto":
        return kind == "categorical"
    if values.dtype.kind in "iub":
        return np.unique(values).size <= 12
    if values.dtype.kind in "OUS":
        return True
    finite = values[np.isfinite(values)]
    return finite.size > 0 and np.all(finite == np.round(finite)) and np.unique(finite).size <= 12


def plot_map(
    est: Any,
    Y: np.ndarray,
    color_by: np.ndarray | None = None,
    path: str | os.PathLike = "map.png",
    *,
    color_label: str | None = None,
    color_kind: str = "auto",
    title: str | None = None,
    dims: tuple[int, int] = (0, 1),
    max_points: int = 50_000,
    ids: Sequence[Any] | None = None,
    label: int | Sequence[str] | None = None,
) -> Path:
    """Draw the landmark map with embedded objects to a PNG.

    Args:
        est: a fitted ``LandmarkMDS`` (uses ``embedding_`` (n, d) and ``model_version_``).
        Y: (m, d) embedded objects in the map's frame.
        color_by: (m,) per-object values: continuous (e.g. relative residual
            ``unexplained / beta``, drawn with a colorbar) or categorical (e.g.
            ``model_version`` or class labels, drawn with a legend).
        path: output PNG path.
        color_label: colorbar / legend title (default: "value").
        color_kind: "auto" (few distinct integers are categorical), "continuous" or "categorical".
        title: figure title (default names the model version and counts).
        dims: which two map axes to draw (a 1-D map is drawn against zero).
        max_points: draw at most this many objects (an evenly spaced subset; the
            title then says "<drawn> of <total> objects").
        ids: (m,) object ids, needed by ``label``.
        label: write ids beside objects: an int N labels N of the drawn objects
            (evenly spaced), a sequence labels those ids (each must be in ``ids``;
            they are drawn even when sampling left them out).
    Returns:
        The written path (PNG metadata: ``Title`` the figure title,
        ``Description`` the labelled ids).
    """
    Figure = _figure_class()
    X = np.asarray(est.embedding_, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y must be (m, {X.shape[1]}) for this {X.shape[1]}-dimensional map, got {Y.shape}")
    values = None if color_by is None else np.asarray(color_by)
    if values is not None and values.shape[0] != Y.shape[0]:
        raise ValueError(f"color_by has {values.shape[0]} values for {Y.shape[0]} objects")
    if ids is not None and len(ids) != Y.shape[0]:
        raise ValueError(f"ids has {len(ids)} entries for {Y.shape[0]} objects")
    total = Y.shape[0]
    keep = np.unique(np.linspace(0, total - 1, max_points).round().astype(int)) if total > max_points \
        else np.arange(total)
    labelled = _label_rows(ids, label, keep)
    keep = np.union1d(keep, labelled)
    Y = Y[keep]
    values = None if values is None else values[keep]
    at = np.searchsorted(keep, labelled)  # the labelled objects' rows among those drawn
    d = X.shape[1]
    i, j = dims if d > 1 else (0, None)

    def coords(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return P[:, i], (P[:, j] if j is not None else np.zeros(P.shape[0]))

    fig = Figure(figsize=(7.5, 6.2), dpi=130, layout="constrained")
    ax = fig.add_subplot()
    yx, yy = coords(Y)
    size = float(np.clip(2000.0 / max(np.sqrt(Y.shape[0]), 1.0), 4.0, 40.0))
    label = color_label or "value"
    drawn = f"{Y.shape[0]:,}" if Y.shape[0] == total else f"{Y.shape[0]:,} of {total:,}"
    if values is None:
        ax.scatter(yx, yy, s=size, c="tab:blue", alpha=0.6, linewidths=0, label=f"embedded objects ({drawn})")
    elif _is_categorical(values, color_kind):
        cats = np.unique(values)
        cmap = _colormap(len(cats))
        for c_idx, cat in enumerate(cats):
            sel = values == cat
            ax.scatter(yx[sel], yy[sel], s=size, color=cmap(c_idx), alpha=0.7, linewidths=0,
                       label=f"{label} {cat} ({int(sel.sum())})")
    else:
        v = values.astype(np.float64)
        finite = np.isfinite(v)
        lo, hi = (np.percentile(v[finite], [1, 99]) if finite.any() else (0.0, 1.0))
        order = np.argsort(np.where(finite, v, -np.inf), kind="stable")  # high values drawn on top
        sc = ax.scatter(yx[order], yy[order], s=size, c=v[order], cmap="viridis", vmin=lo,
                        vmax=hi if hi > lo else lo + 1,
                        alpha=0.8, linewidths=0, label=f"embedded objects ({drawn})")
        cb = fig.colorbar(sc, ax=ax, shrink=0.85)
        cb.set_label(label)
        if (~finite).any():
            ax.scatter(yx[~finite], yy[~finite], s=size, c="lightgrey", linewidths=0, label=f"{label} not available")
    lx, ly = coords(X)
    ax.scatter(lx, ly, s=42, marker="^", facecolor="white", edgecolor="black", linewidths=1.1,
               label=f"landmarks ({X.shape[0]})", zorder=5)
    if at.size:
        assert ids is not None
        ax.scatter(yx[at], yy[at], s=max(size, 12.0), facecolor="none", edgecolor="black", linewidths=0.8, zorder=6,
                   label=f"labelled ({at.size})")
        for r, row in zip(at, labelled, strict=False):
            ax.annotate(str(ids[row]), (yx[r], yy[r]), xytext=(3, 3), textcoords="offset points", fontsize=7,
                        zorder=7, bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.7})
    version = getattr(est, "model_version_", None)
    sampled = "" if Y.shape[0] == total else " (evenly spaced sample)"
    title = title or (f"Landmark map{f' (model version {version})' if version is not None else ''}: "
                      f"{X.shape[0]:,} landmarks, {drawn} objects{sampled}")
    ax.set_title(title if len(title) <= 64 else title.replace(": ", ":\n", 1), fontsize=11)
    ax.set_xlabel(f"map axis {i + 1}")
    ax.set_ylabel(f"map axis {j + 1}" if j is not None else "(1-D map)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, alpha=0.25)
    ax.legend(loc="best", fontsize=8, framealpha=0.85, markerscale=1.5)
    out = Path(path)
    names = [str(ids[i]) for i in labelled] if ids is not None else []
    fig.savefig(out, format="png", metadata={
        "Title": title,
        "Description": "labelled: " + ", ".join(names[:50]) + (f", ... ({len(names) - 50} more)" if len(names) > 50
                                                               else "")})
    return out


def _label_rows(ids: Sequence[Any] | None, label: int | Sequence[str] | None, drawn: np.ndarray) -> np.ndarray:
    """Rows (sorted) of the objects to label: N evenly spaced among the ``drawn`` rows, or those with the given ids."""
    if label is None or (isinstance(label, (int, np.integer)) and int(label) <= 0):
        return np.empty(0, dtype=int)
    if ids is None:
        raise ValueError("labelling objects by id needs their ids")
    total = len(ids)
    if isinstance(label, (int, np.integer)):
        pick = np.linspace(0, drawn.size - 1, min(int(label), drawn.size)).round().astype(int)
        return np.unique(drawn[pick])
    where: dict[str, int] = {}
    for i, x in enumerate(ids):
        where.setdefault(str(x), i)
    missing = [x for x in label if str(x) not in where]
    if missing:
        raise ValueError(f"no object with id {', '.join(map(repr, missing[:5]))} among the {total:,} objects")
    return np.unique([where[str(x)] for x in label])


def _colormap(n: int):
    from matplotlib import colormaps

    return colormaps["tab10" if n <= 10 else "tab20"]


def _parse_time(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"record time {value!r} is neither a number nor an ISO 8601 timestamp") from exc
    return value


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
    path: str | os.PathLike = "drift.png",
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
    Figure = _figure_class()
    if not records:
        raise ValueError("plot_drift needs at least one record")
    if any("time" not in r for r in records):
        raise ValueError("every drift record needs a 'time'")
    recs = sorted(records, key=lambda r: _parse_time(r["time"]))
    times = [_parse_time(r["time"]) for r in recs]
    if statistics is None:
        statistics = _numeric_keys(recs)[:6]
    if not statistics:
        raise ValueError("no numeric statistic found in the records")
    refits = _refit_marks(times, recs)

    fig = Figure(figsize=(9.0, 1.9 + 1.7 * len(statistics)), dpi=130, layout="constrained")
    axes = fig.subplots(len(statistics), 1, sharex=True, squeeze=False)[:, 0]
    thresholds = dict(thresholds or {})
    for ax, key in zip(axes, statistics, strict=False):
        vals = np.array([np.nan if r.get(key) is None else float(r.get(key)) for r in recs])
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


# --------------------------------------------------------------------------- the daemon's drift history

#: Window statistics drawn under the detector panel(s), when present.
HISTORY_STATISTICS = ("relative_unexplained_mean", "relative_unexplained_p90", "relative_k0_mean")


def _record_time(r: Mapping[str, Any]) -> _dt.datetime:
    if isinstance(r.get("unix"), (int, float)):
        return _dt.datetime.fromtimestamp(float(r["unix"]), tz=_dt.UTC)
    t = _parse_time(r.get("time"))
    if isinstance(t, _dt.datetime):
        return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)
    raise ValueError(f"drift history record without a usable time: {dict(r)!r:.120}")


def read_drift_history(source: str | os.PathLike,
                       history: str | os.PathLike | None = None) -> tuple[list[dict], list[dict]]:
    """(drift records, refit records) from an output root, or from the two files.

    ``source`` is ``output.root`` (read ``drift-history.jsonl`` and
    ``model-history.jsonl`` in it) or a drift-history file (the model history
    is ``history``, else ``model-history.jsonl`` beside it when present).
    """
    src = Path(source)
    if src.is_dir():
        drift_path, model_path = src / "drift-history.jsonl", src / "model-history.jsonl"
    else:
        drift_path, model_path = src, src.parent / "model-history.jsonl"
    if history is not None:
        model_path = Path(history)
    if not drift_path.exists():
        raise ValueError(f"{drift_path} does not exist (the daemon writes it in output.root while it runs)")
    drift = read_records(drift_path)
    refits = read_records(model_path) if model_path.exists() else []
    return drift, refits


def _is_refit_history(records: Sequence[Mapping[str, Any]]) -> bool:
    """Records of ``model-history.jsonl`` (refits: status, trigger), not drift statistics."""
    return all(isinstance(r, Mapping) and "status" in r and ("trigger" in r or "model_version" in r)
               and "window" not in r for r in records)


def _is_history(records: Sequence[Mapping[str, Any]]) -> bool:
    return bool(records) and isinstance(records[0].get("window"), dict) and isinstance(records[0].get("detector"), dict)


def history_timeline(records: Sequence[Mapping[str, Any]], refits: Sequence[Mapping[str, Any]]
                     ) -> tuple[list[Mapping[str, Any]], list[_dt.datetime], list[tuple[_dt.datetime, str, Any]]]:
    """(records by time, their UTC times, refit marks (time, status, model_version) within the records' span)."""
    recs = sorted(records, key=_record_time)
    times = [_record_time(r) for r in recs]
    marks = []
    for h in refits:
        try:
            t = _record_time(h)
        except ValueError:
            continue
        if times and times[0] <= t <= times[-1]:
            marks.append((t, str(h.get("status", "?")), h.get("model_version"), _refit_note(h)))
    return recs, times, sorted(marks, key=lambda m: m[0])


def _refit_note(h: Mapping[str, Any]) -> str:
    """u before → after (best) of a refit record, as measured on the recent objects (empty when absent)."""
    try:
        before, best = float(h["unexplained_before"]), float(h["unexplained_best"])
    except (KeyError, TypeError, ValueError):
        return ""
    after = h.get("unexplained_after")
    return (f"u {before:.3g}→{float(after):.3g} (best {best:.3g})" if isinstance(after, (int, float))
            else f"kept: u {before:.3g} (best {best:.3g})")


def plot_drift_history(
    records: Sequence[Mapping[str, Any]],
    refits: Sequence[Mapping[str, Any]] = (),
    path: str | os.PathLike = "drift.png",
    *,
    statistics: Sequence[str] = HISTORY_STATISTICS,
    title: str = "Drift",
) -> Path:
    """The daemon's drift history: detector statistic and threshold, window statistics, refit marks.

    One panel per detector kind present ("cusum": the CUSUM statistic S and
    its threshold h, standardised group-mean units; "rule": the watched
    window statistic and the trigger level), then one per window statistic of
    ``statistics`` found in the records. Alarms (``fired``) are red dots;
    installed refits are orange dotted lines labelled with the new model
    version and the recent objects' mean unexplained energy before → after
    (and the best any map of the dimension reaches), refits that kept the map
    purple dashed lines, failed/skipped/abandoned ones grey dash-dotted lines. The time
    axis spans the drift records; refits outside it are not drawn.

    Args:
        records: drift-history objects (module docstring), any order.
        refits: model-history objects (``time``, ``status``, ``model_version``).
        path: output PNG.
    """
    Figure = _figure_class()
    recs = [r for r in records if isinstance(r, Mapping)]
    if not recs:
        raise ValueError("plot_drift_history needs at least one drift record")
    if not _is_history(recs):
        raise ValueError("not a drift history: records need 'window' and 'detector' objects")
    recs, times, marks = history_timeline(recs, refits)
    t0, t1 = times[0], times[-1]
    installed = [m for m in marks if m[1] == "installed"]
    kept = [m for m in marks if m[1] == "kept"]
    kinds = list(dict.fromkeys(str(r["detector"].get("kind", "?")) for r in recs))
    stats = [k for k in statistics if any(isinstance(r["window"].get(k), (int, float)) for r in recs)]
    n_panels = len(kinds) + len(stats)
    fig = Figure(figsize=(9.5, 1.8 + 1.9 * n_panels), dpi=130, layout="constrained")
    axes = fig.subplots(n_panels, 1, sharex=True, squeeze=False)[:, 0]

    def series(get) -> np.ndarray:
        out = []
        for r in recs:
            v = get(r)
            out.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan)
        return np.asarray(out)

    n_alarms = 0
    for ax, kind in zip(axes, kinds, strict=False):
        mine = np.array([str(r["detector"].get("kind")) == kind for r in recs])
        stat = np.where(mine, series(lambda r: r["detector"].get("statistic")), np.nan)
        thr = np.where(mine, series(lambda r: r["detector"].get("threshold")), np.nan)
        fired = mine & np.array([bool(r["detector"].get("fired")) for r in recs])
        # an alarm stays raised over many updates until its refit: count the alarms, not the updates
        onsets = fired & ~np.concatenate([[False], fired[:-1]])
        n_alarms += int(onsets.sum())
        ert = next((r["detector"].get("expected_run_objects") for r in recs
                    if str(r["detector"].get("kind")) == kind and r["detector"].get("expected_run_objects")), None)
        label = "CUSUM statistic S" if kind == "cusum" else "watched window statistic"
        ax.plot(times, stat, linewidth=1.2, color="tab:blue", label=label)
        ax.step(times, thr, where="post", color="tab:red", linestyle="--", linewidth=1.0,
                label="threshold h" + (f" (ERT {float(ert):.3g} objects)" if ert else "") if kind == "cusum"
                else "trigger level")
        if fired.any():
            ax.scatter([t for t, f in zip(times, fired, strict=False) if f], stat[fired], color="tab:red", s=8,
                       zorder=5,
                       label=f"in alarm ({int(fired.sum())} updates)")
            ax.scatter([t for t, f in zip(times, onsets, strict=False) if f], stat[onsets], marker="v",
                       color="tab:red", s=60,
                       zorder=6, label=f"alarm raised ({int(onsets.sum())})")
        ax.set_ylabel(f"detector: {kind}")
        h = np.nanmax(thr) if np.isfinite(thr).any() else np.nan
        if np.isfinite(h) and h > 0 and np.nanmax(stat) > 5 * h:  # an alarm's jump would flatten the rest
            ax.set_yscale("symlog", linthresh=h)
    for ax, key in zip(axes[len(kinds):], stats, strict=False):
        ax.plot(times, series(lambda r, key=key: r["window"].get(key)), linewidth=1.2, color="tab:green",
                label=key.replace("_", " "))
        ax.set_ylabel(key.replace("relative_", "rel. ").replace("_", " "), fontsize=8)
    for ax in axes:
        for label, style, group in (("refit installed", ("tab:orange", ":"), installed),
                                    ("refit kept the map", ("tab:purple", "--"), kept),
                                    ("refit not installed", ("grey", "-."), [m for m in marks if m[1] not in
                                                                            ("installed", "kept")])):
            for i, (t, *_rest) in enumerate(group):
                ax.axvline(t, color=style[0], linestyle=style[1], linewidth=1.4, label=None if i else label)
        ax.grid(True, alpha=0.25)
        ax.legend(loc="upper left", fontsize=7, framealpha=0.85)
    for t, status, version, note in installed + kept:
        text = (f"v{version} " if status == "installed" and version is not None else "") + note
        if text:
            axes[0].annotate(text, xy=(t, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -10),
                             textcoords="offset points", fontsize=7,
                             color="tab:orange" if status == "installed" else "tab:purple")
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    locator = AutoDateLocator(tz=_dt.UTC)
    axes[-1].xaxis.set_major_locator(locator)
    axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=_dt.UTC))
    if t1 > t0:
        axes[-1].set_xlim(t0, t1)
    axes[-1].set_xlabel("time (UTC)")
    other = len(marks) - len(installed) - len(kept)
    seen = [r.get("objects_seen") for r in recs if isinstance(r.get("objects_seen"), int)]
    suptitle = (f"{title}: {len(recs):,} update{'s' if len(recs) != 1 else ''} over {_span((t1 - t0).total_seconds())}"
                + (f" ({seen[-1]:,} objects)" if seen else "")
                + f", {n_alarms} alarm{'s' if n_alarms != 1 else ''}, {len(installed)} refit"
                + ("s" if len(installed) != 1 else "") + (f", {len(kept)} kept the map" if kept else "")
                + (f" (+{other} not installed)" if other else ""))
    fig.suptitle(suptitle)
    out = Path(path)
    fig.savefig(out, format="png", metadata={"Title": suptitle})
    return out


def _span(seconds: float) -> str:
    """A duration for a title: 3.2 s, 4.5 min, 2.0 h, 3.1 days."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def plot_drift_benchmark(report: Mapping[str, Any], path: str | os.PathLike = "drift-bench.png") -> Path:
    """Delay vs false-alarm rate per detector, one panel per change scenario off the span.

    x: false alarms per 10⁶ stationary objects (point estimate, bar to the
    95 % upper bound; 0 is drawn at the left edge of a symmetric-log axis);
    y: median detection delay in objects (bar to the 90th percentile; log
    scale); a detector that missed every replicate is drawn hollow at the top.
    ``report`` is the content of ``python -m benchmarks drift --json`` (a source checkout).
    """
    Figure = _figure_class()
    rows = list(report.get("detectors", []))
    if not rows:
        raise ValueError("the report has no detector rows")
    scen = [k for k in rows[0]["delays"] if "in span" not in k]
    fig = Figure(figsize=(5.2 * len(scen), 5.2), dpi=130, layout="constrained")
    axes = fig.subplots(1, len(scen), squeeze=False)[0]
    cmap = _colormap(len(rows))
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


# --------------------------------------------------------------------------- CLI helpers


def read_records(path: str | os.PathLike) -> list[dict]:
    """Drift records from a JSON array file or a JSON-lines file."""
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        return list(json.loads(stripped))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _read_embedded(path: str) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    from .stream.output import schema_version_of, y_columns, y_matrix

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


def novel_cluster_points(n: int = 800, dim: int = 10, offset: float = 8.0, novel_share: float = 0.2,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Four clusters in a 2-D plane of R^dim, plus a novel cluster off the plane that no landmark comes from.

    Returns ``(X, labels)``: X (n, dim) points, labels (n,) in 0..4; the first
    ``n - round(novel_share * n)`` rows (labels 0-3) are the old clusters
    (centres (±6, ±6), sd 1.5, exactly in the plane), the landmark pool, so the
    landmarks span exactly the plane. The novel cluster (label 4) sits
    ``offset`` units off the plane with unit-variance noise in every direction:
    its objects lie off the landmarks' span (k0 > 0, docs/math.md §4), the
    situation drift monitoring and restricted reconstruction are for
    (Trosset et al. 2025, §4-6).
    """
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    n_new = int(round(novel_share * n))
    centres = np.array([[6.0, 6.0], [-6.0, 6.0], [-6.0, -6.0], [6.0, -6.0]])
    labels_old = rng.integers(4, size=n - n_new)
    old = (centres[labels_old] + 1.5 * rng.normal(size=(n - n_new, 2))) @ Q[:, :2].T
    new_coords = rng.normal(size=(n_new, dim))
    new_coords[:, 2] += offset
    new = new_coords @ Q.T
    return np.vstack([old, new]), np.concatenate([labels_old, np.full(n_new, 4)])


def demo(outdir: str | os.PathLike, seed: int = 0) -> tuple[Path, Path]:
    """Both plots from a synthetic stream whose novel cluster drifts off the map (``novel_cluster_points``)."""
    from scipy.spatial.distance import pdist, squareform

    from .core.landmarks import maxmin_select
    from .estimator import LandmarkMDS

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    X, labels = novel_cluster_points(n=1200, seed=seed)
    D = squareform(pdist(X, metric="euclidean"))
    pool = np.flatnonzero(labels < 4)

    L = pool[maxmin_select(60, D=D[np.ix_(pool, pool)])]
    est = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)])
    rest = np.setdiff1d(np.arange(X.shape[0]), L)
    rng = np.random.default_rng(seed)
    old = rng.permutation(np.intersect1d(rest, pool))
    new = rng.permutation(np.setdiff1d(rest, pool))
    # A stream: old clusters only at first, then the novel cluster mixes in more and more.
    stream = list(old[:300])
    mix = list(old[300:]) + list(new)
    rng.shuffle(mix)
    stream += sorted(mix, key=lambda i: (i in set(old)) * rng.random() + (i not in set(old)) * rng.random() ** 0.5)
    stream = np.asarray(stream)
    res = est.embed(D[np.ix_(stream, L)], k0_rows="all")
    map_path = plot_map(est, res.y, res.relative_unexplained, outdir / "map.png",
                        color_label="relative unexplained (1 - ||y||²/β)",
                        title="Novel cluster off the landmark map: colour = share of β the map does not explain")
    records = []
    window, refit_at = 60, 12
    version = 1
    for w, start in enumerate(range(0, stream.size - window + 1, window)):
        if w == refit_at:  # refit on old landmarks + everything seen so far (docs/math.md §5)
            seen = np.union1d(L, stream[:start])
            L = seen[maxmin_select(80, D=D[np.ix_(seen, seen)])]
            est = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)])
            version = 2
        rows = stream[start : start + window]
        _, b = est.residuals(D[np.ix_(rows, L)], k0_rows="all")
        records.append({"time": start + window, "trace_k0": b.trace_k0,
                        "kernel_distance_bound": b.kernel_distance_bound,
                        "gap_ratio": b.gap_ratio, "model_version": version})
    drift_path = plot_drift(records, outdir / "drift.png", thresholds={"gap_ratio": 1.0},
                            title="Residual kernel k0 over a stream with a novel cluster", time_label="objects seen")
    return map_path, drift_path


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
            from .estimator import LandmarkMDS

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
            if records and _is_refit_history(records):
                raise ValueError(f"{src} is the refit history (model-history.jsonl), not drift statistics: give "
                                 f"the output root ({src.parent}) or its drift-history.jsonl; the refits are drawn "
                                 f"from this file as marks")
            if records is None or _is_history(records):
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


if __name__ == "__main__":
    sys.exit(main())
