"""The landmark map with embedded objects (``plot_map``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._figure import colormap, figure_class


def _is_categorical(values: np.ndarray, kind: str) -> bool:
    if kind != "auto":
        return kind == "categorical"
    if values.dtype.kind in "iub":
        return np.unique(values).size <= 12
    if values.dtype.kind in "OUS":
        return True
    finite = values[np.isfinite(values)]
    return bool(finite.size > 0 and np.all(finite == np.round(finite)) and np.unique(finite).size <= 12)


def plot_map(
    est: Any,
    Y: np.ndarray,
    color_by: np.ndarray | None = None,
    path: str | os.PathLike[str] = "map.png",
    *,
    color_label: str | None = None,
    color_kind: str = "auto",
    title: str | None = None,
    dims: tuple[int, int] = (0, 1),
    max_points: int = 50_000,
    ids: Sequence[Any] | np.ndarray | None = None,
    label: int | Sequence[str] | None = None,
    radius: np.ndarray | None = None,
    max_circles: int = 300,
    color_range: tuple[float, float] | None = None,
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
        radius: (m,) each object's radius in map units (the output's ``radius``,
            docs/math.md §9): a circle of that radius is drawn around up to
            ``max_circles`` of the drawn objects (evenly spaced, the labelled
            ones first), where the object's full-MDS position lies with the
            model's stated coverage; NaN radii (no calibration) draw no circle.
        color_range: (low, high) of a continuous colour scale (default: the values' 1st and 99th
            percentiles); a scale of ``unexplained / beta`` is fixed to (0, 1) whatever is given, so a map that
            explains little shows it.
    The figure's foot states what the map explains of its fit population (``core.monitor.explained``,
    docs/math.md §4.9), with the warning of a map that explains little.
    Returns:
        The written path (PNG metadata: ``Title`` the figure title,
        ``Description`` the labelled ids).
    """
    Figure = figure_class()
    X = np.asarray(est.embedding_, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y must be (m, {X.shape[1]}) for this {X.shape[1]}-dimensional map, got {Y.shape}")
    values = None if color_by is None else np.asarray(color_by)
    if values is not None and values.shape[0] != Y.shape[0]:
        raise ValueError(f"color_by has {values.shape[0]} values for {Y.shape[0]} objects")
    if ids is not None and len(ids) != Y.shape[0]:
        raise ValueError(f"ids has {len(ids)} entries for {Y.shape[0]} objects")
    radii = None if radius is None else np.asarray(radius, dtype=np.float64)
    if radii is not None and radii.shape != (Y.shape[0],):
        raise ValueError(f"radius has shape {radii.shape} for {Y.shape[0]} objects")
    total = Y.shape[0]
    keep = np.unique(np.linspace(0, total - 1, max_points).round().astype(int)) if total > max_points \
        else np.arange(total)
    labelled = _label_rows(ids, label, keep)
    keep = np.union1d(keep, labelled)
    Y = Y[keep]
    values = None if values is None else values[keep]
    radii = None if radii is None else radii[keep]
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
        cmap = colormap(len(cats))
        for c_idx, cat in enumerate(cats):
            sel = values == cat
            ax.scatter(yx[sel], yy[sel], s=size, color=cmap(c_idx), alpha=0.7, linewidths=0,
                       label=f"{label} {cat} ({int(sel.sum())})")
    else:
        v = values.astype(np.float64)
        finite = np.isfinite(v)
        if "unexplained" in label:  # a share of beta: 0 on the map, 1 nothing explained (docs/math.md §4.9)
            color_range = (0.0, 1.0)
        lo, hi = color_range if color_range is not None else (
            np.percentile(v[finite], [1, 99]) if finite.any() else (0.0, 1.0))
        order = np.argsort(np.where(finite, v, -np.inf), kind="stable")  # high values drawn on top
        sc = ax.scatter(yx[order], yy[order], s=size, c=v[order], cmap="viridis", vmin=lo,
                        vmax=hi if hi > lo else lo + 1,
                        alpha=0.8, linewidths=0, label=f"embedded objects ({drawn})")
        cb = fig.colorbar(sc, ax=ax, shrink=0.85)
        cb.set_label(label)
        if (~finite).any():
            ax.scatter(yx[~finite], yy[~finite], s=size, c="lightgrey", linewidths=0, label=f"{label} not available")
    if radii is not None:
        _circles(ax, yx, yy, radii, at, max_circles, est)
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
    foot = _explained_foot(est)
    if foot:
        fig.text(0.01, 0.002, foot, fontsize=7, ha="left", va="bottom", wrap=True,
                 color="tab:red" if foot.startswith("WARNING") else "dimgray")
    out = Path(path)
    names = [str(ids[i]) for i in labelled] if ids is not None else []
    fig.savefig(out, format="png", metadata={
        "Title": title,
        "Comment": foot,
        "Description": "labelled: " + ", ".join(names[:50]) + (f", ... ({len(names) - 50} more)" if len(names) > 50
                                                               else "")})
    return out


def _explained_foot(est: Any) -> str:
    """What the map explains of its fit population (the WARNING when little), or "" for an unfitted estimator."""
    model = getattr(est, "model_", None)
    if model is None:
        return ""
    from streamembed.core.monitor.explained import explained, warning_text

    e = explained(model)
    why = warning_text(e)
    return f"WARNING: {why}" if why else e.line()


def _circles(ax: Any, x: np.ndarray, y: np.ndarray, radii: np.ndarray, first: np.ndarray, most: int,
             est: Any) -> None:
    """Circles of the given radii (data units) around up to ``most`` objects with a finite radius."""
    from matplotlib.collections import EllipseCollection

    ok = np.flatnonzero(np.isfinite(radii) & (radii > 0))
    if ok.size == 0 or most <= 0:
        return
    rest = np.setdiff1d(ok, first)
    pick = rest[np.unique(np.linspace(0, rest.size - 1, min(most, rest.size)).round().astype(int))] if rest.size \
        else rest
    rows = np.union1d(np.intersect1d(first, ok), pick)[: max(most, first.size)]
    cal = getattr(getattr(est, "model_", None), "radius_calibration", None)
    stated = f" ({cal.coverage:g} coverage)" if cal is not None else ""
    ax.add_collection(EllipseCollection(2 * radii[rows], 2 * radii[rows], np.zeros(rows.size), units="xy",
                                        offsets=np.column_stack([x[rows], y[rows]]), offset_transform=ax.transData,
                                        facecolors="none", edgecolors="tab:red", linewidths=0.6, alpha=0.45))
    ax.plot([], [], marker="o", markersize=8, markerfacecolor="none", markeredgecolor="tab:red", linestyle="none",
            label=f"radius{stated}: {rows.size} of {ok.size} objects")  # the legend's entry for the circles


def _label_rows(ids: Sequence[Any] | np.ndarray | None, label: int | Sequence[str] | None,
                drawn: np.ndarray) -> np.ndarray:
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
