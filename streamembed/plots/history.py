"""The daemon's drift history (``drift-history.jsonl`` + ``model-history.jsonl``): reading and drawing it."""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._figure import figure_class, parse_time

#: Window statistics drawn under the detector panel(s), when present.
HISTORY_STATISTICS = ("relative_unexplained_mean", "relative_unexplained_p90", "relative_k0_mean")


def _record_time(r: Mapping[str, Any]) -> _dt.datetime:
    if isinstance(r.get("unix"), (int, float)):
        return _dt.datetime.fromtimestamp(float(r["unix"]), tz=_dt.UTC)
    t = parse_time(r.get("time"))
    if isinstance(t, _dt.datetime):
        return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)
    raise ValueError(f"drift history record without a usable time: {dict(r)!r:.120}")


def read_drift_history(source: str | os.PathLike[str], history: str | os.PathLike[str] | None = None
                       ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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


def is_refit_history(records: Sequence[Mapping[str, Any]]) -> bool:
    """Records of ``model-history.jsonl`` (refits: status, trigger), not drift statistics."""
    return all(isinstance(r, Mapping) and "status" in r and ("trigger" in r or "model_version" in r)
               and "window" not in r for r in records)


def is_history(records: Sequence[Mapping[str, Any]]) -> bool:
    """Records of a drift history (``drift-history.jsonl``: a ``window`` and a ``detector`` object each)."""
    return bool(records) and isinstance(records[0].get("window"), dict) and isinstance(records[0].get("detector"), dict)


def history_timeline(records: Sequence[Mapping[str, Any]], refits: Sequence[Mapping[str, Any]]
                     ) -> tuple[list[Mapping[str, Any]], list[_dt.datetime], list[tuple[_dt.datetime, str, Any, str]]]:
    """(records by time, their UTC times, refit marks (time, status, model_version, note) within the records' span)."""
    recs = sorted(records, key=_record_time)
    times = [_record_time(r) for r in recs]
    marks: list[tuple[_dt.datetime, str, Any, str]] = []
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
    path: str | os.PathLike[str] = "drift.png",
    *,
    statistics: Sequence[str] = HISTORY_STATISTICS,
    title: str = "Drift",
) -> Path:
    """The daemon's drift history: detector statistic and threshold, window statistics, refit marks.

    One panel per detector kind present (what it watches, as its records
    name it, e.g. the CUSUM statistic S in standardised group-mean units or
    the rule's window statistic, and its threshold), then one per window statistic of
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
    Figure = figure_class()
    recs = [r for r in records if isinstance(r, Mapping)]
    if not recs:
        raise ValueError("plot_drift_history needs at least one drift record")
    if not is_history(recs):
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

    def series(get: Callable[..., object]) -> np.ndarray:
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
        # what the detector watches, as its records say (histories written before they said: its kind)
        watches = next((str(r["detector"]["watches"]) for r in recs if str(r["detector"].get("kind")) == kind
                        and r["detector"].get("watches")), f"{kind} statistic")
        ax.plot(times, stat, linewidth=1.2, color="tab:blue", label=watches)
        ax.step(times, thr, where="post", color="tab:red", linestyle="--", linewidth=1.0,
                label="threshold" + (f" (ERT {float(ert):.3g} objects)" if ert else ""))
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

    locator = AutoDateLocator(tz=_dt.UTC)  # type: ignore[no-untyped-call]
    axes[-1].xaxis.set_major_locator(locator)
    axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=_dt.UTC))  # type: ignore[no-untyped-call]
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


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Drift records from a JSON array file or a JSON-lines file."""
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        return list(json.loads(stripped))
    return [json.loads(line) for line in text.splitlines() if line.strip()]
