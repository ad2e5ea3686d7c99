"""The live map: what ``/map`` shows and ``/map.json`` serves.

``MapView.observe`` is the loop's per-batch hook (``EmbeddingLoop.on_batch``):
it keeps references to the newest rows of the output batches, at most
``points`` of them, and nothing else: a zero-copy slice of the batch's tail
into a bounded ring of slices, no per-row work. The exact k0 is computed only
for ``model.k0_rows`` rows per batch (docs/math.md §4), so a second ring keeps
the newest ``points`` rows that have one, taken by the indices the embedding
already reports (``EmbeddingResult.residual_rows``): O(k0_rows) per batch, at
most ``points`` rows copied. Everything else happens when a page asks
(``snapshot``, on the ops server's thread): the sample's columns, the current
model's landmark coordinates (in the output frame: refits are aligned to the
previous map, docs/math.md §5, so old and new placements share the axes), the
drift statistics, the model switches seen and the tail of the refit history.
The serialised document is cached for ``cache_seconds``, so any number of
open pages costs one snapshot per interval.

The document is bounded whatever the stream rate: ``points`` placements,
at most ``MAX_LANDMARKS`` landmarks, ``MAX_HISTORY`` refit records and
``MAX_SWITCHES`` switches, ids cut to ``MAX_ID_CHARS``; each placement gives its
first two coordinates (the page's axes), not all d.

The page itself is ``ops.map_page.MapPage``; the refit history is read by
``ops.history.RecentRecords``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamembed.core.monitor.explained import explained, warning_text
from streamembed.core.monitor.triggers import alarm_phrase, is_armed, members
from streamembed.ops.history import RecentRecords
from streamembed.stream.output import flag_names_of, schema_version_of, y_matrix

__all__ = ["MapView", "MAX_LANDMARKS", "MAX_HISTORY", "MAX_SWITCHES", "MAX_ID_CHARS", "producers_notice"]

log = logging.getLogger("streamembed.mapview")

#: Landmarks sent at most (an evenly spaced subset of larger maps; the page needs their shape, not every one).
MAX_LANDMARKS = 5000
#: Refit history records sent (the newest).
MAX_HISTORY = 20
#: Model switches remembered (the newest).
MAX_SWITCHES = 20
#: Ids longer than this are cut (with "…"): an id is shown, not parsed, and must not make the document unbounded.
MAX_ID_CHARS = 200
#: Significant digits of the numbers in the document (the page draws pixels and shows four digits).
DIGITS = 5


class MapView:
    """A bounded, thread-safe sample of the newest placements, and the map they are placed on.

    ``registry`` (``stream.registry.ModelRegistry``) gives the current model;
    ``monitor`` (``monitors.drift.DriftMonitor``, or None without drift
    monitoring) its drift statistics; ``history_path`` the refit history
    (JSON lines, ``daemon.refits``).
    """

    def __init__(self, registry: Any, *, monitor: Any = None, history_path: Path | str | None = None,
                 points: int = 2000, cache_seconds: float = 0.5, clock: Callable[[], float] = time.time) -> None:
        if points < 1:
            raise ValueError(f"points must be at least 1, got {points}")
        self.registry = registry
        self.monitor = monitor
        self.history_path = None if history_path is None else Path(history_path)
        self.points = int(points)
        self.cache_seconds = float(cache_seconds)
        self.clock = clock
        self._lock = threading.Lock()
        self._recent = _Tail(self.points)  # the newest rows
        self._k0 = _Tail(self.points)  # the newest rows with an exact k0
        self._seen = 0
        self._model = registry.current
        self._previous: Any = None
        self._switches: deque[dict[str, Any]] = deque(maxlen=MAX_SWITCHES)
        self._landmarks: tuple[int, dict[str, Any]] | None = None
        self._previous_landmarks: tuple[int, dict[str, Any]] | None = None
        self._history = RecentRecords(self.history_path, MAX_HISTORY)
        self._build_lock = threading.Lock()
        self._cached: tuple[float, bytes] | None = None
        self._failed = False

    # ------------------------------------------------------------------ the loop's side
    def observe(self, done: Any) -> None:
        """The loop's hook: remember the newest rows of ``done.output`` (a ``stream.embedder.Processed``)."""
        out = done.output
        if out is None:
            return
        m = out.num_rows
        if m == 0:
            return
        try:
            k0_rows = _k0_rows(done.results, m, self.points)
            with_k0 = None if k0_rows is None else out.take(pa.array(k0_rows))
            with self._lock:
                self._recent.add(out)
                if with_k0 is not None:
                    self._k0.add(with_k0)
                self._seen += m
            self._check_model()
        except Exception:  # the map must never stop the stream
            if not self._failed:
                log.exception("the map view failed to observe a batch; /map may be stale")
                self._failed = True

    def _check_model(self) -> None:
        """Note a switch to a new model (a refit installed, or one taken from the model topic), at the time the
        registry installed it (not when a batch or the page first saw it: an idle stream may see it much later)."""
        current = self.registry.current
        if current is self._model:
            return
        with self._lock:
            old = self._model
            if current is old:
                return
            installed = getattr(self.registry, "installed_at", lambda v: None)(int(current.version))
            self._switches.append({"time": round(self.clock() if installed is None else installed, 3),
                                   "from": int(old.version), "to": int(current.version),
                                   "producers": producers_notice(int(current.version))})
            self._previous, self._model = old, current
        log.info("map: model switch", extra={"from_version": int(old.version), "model_version": int(current.version)})

    # ------------------------------------------------------------------ the server's side
    def json_bytes(self) -> bytes:
        """The document as JSON (UTF-8), rebuilt at most once per ``cache_seconds``."""
        with self._build_lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self.cache_seconds:
                return self._cached[1]
            body = json.dumps(self.snapshot(), separators=(",", ":"), allow_nan=False).encode()
            self._cached = (now, body)
            return body

    def snapshot(self) -> dict[str, Any]:
        """The document behind the page (see the module doc for its bounds)."""
        self._check_model()
        with self._lock:
            batches, k0_batches = self._recent.batches(), self._k0.batches()
            seen = self._seen
            model, previous = self._model, self._previous
            switches = list(self._switches)
        now = self.clock()
        sample = _sample(batches, self.points, now)
        doc: dict[str, Any] = {
            "schema": 1,
            "time": round(now, 3),
            "model": {"version": int(model.version), "lineage": str(model.lineage), "dims": int(model.n_components),
                      "landmarks": int(model.n_landmarks),
                      # the stated coverage of the rows' radius (docs/math.md §9); null: the model has no radius
                      "radius_coverage": None if getattr(model, "radius_calibration", None) is None
                      else float(model.radius_calibration.coverage),
                      # what the map explains of its fit population, with the warning of a map that explains little
                      "explained": _explained(model)},
            "axes": ["axis 1", "axis 2" if int(model.n_components) >= 2 else "(a 1-D map)"],
            "landmarks": self._landmarks_of(model, current=True),
            "previous": None if previous is None else {"version": int(previous.version),
                                                       **self._landmarks_of(previous, current=False)},
            "sample": sample,
            # rows with an exact k0 (what the k0 colouring shows); null when every row of the sample has one
            "k0_sample": None if None not in sample["k0"] else _sample(k0_batches, self.points, now),
            "objects_seen": seen,
            "switches": switches,
            "drift": self._drift(),
            "refits": self._refits(),
        }
        return doc

    def _landmarks_of(self, model: Any, current: bool) -> dict[str, Any]:
        """Landmark ids and first two coordinates (cached per model version)."""
        cached = self._landmarks if current else self._previous_landmarks
        v = int(model.version)
        if cached is not None and cached[0] == v:
            return cached[1]
        Y = np.asarray(model.embedding, dtype=np.float64)
        ids = np.asarray(model.landmark_ids)
        n = Y.shape[0]
        idx = np.arange(n) if n <= MAX_LANDMARKS else np.unique(np.linspace(0, n - 1, MAX_LANDMARKS).astype(int))
        x, y = _axes(Y[idx])
        got = {"id": [_short(str(s)) for s in ids[idx].tolist()], "x": _floats(x), "y": _floats(y),
               "total": int(n)}
        if current:
            self._landmarks = (v, got)
        else:
            self._previous_landmarks = (v, got)
        return got

    def _drift(self) -> dict[str, Any] | None:
        mon = self.monitor
        if mon is None:
            return None
        stats = mon.last_stats
        trigger = mon.trigger  # a core.monitor.triggers.Trigger: whatever its kind, the same questions
        ert = trigger.expected_run_objects
        detectors = [{"kind": m.kind, "alarm": alarm_phrase(m.kind), "watches": m.watches,
                      "value": _finite(m.statistic), "level": _finite(m.threshold), "armed": is_armed(m),
                      "share": _finite(float(getattr(m, "share", math.nan))),
                      "coverage": _finite(float(getattr(m, "coverage", math.nan)))} for m in members(trigger)]
        return {"detector": trigger.kind, "statistic": trigger.watches, "value": _finite(trigger.statistic),
                "level": _finite(trigger.threshold), "expected_run_objects": _finite(math.nan if ert is None else ert),
                "statistics": None if stats is None else _clean(stats.as_dict()),
                "refit_running": bool(mon.refit_running), "objects_seen": int(mon.objects_seen),
                "armed": bool(mon.armed), "arming_objects": int(mon.arming_objects),
                "armed_from_fit": bool(any(mon.armed_from_fit.values())) and mon.arming_objects > 0,
                "detectors": detectors}

    def _refits(self) -> list[dict[str, Any]]:
        """The newest ``MAX_HISTORY`` refit records, newest last (re-read only when the file changed)."""
        return self._history.read()


def _explained(model: Any) -> str | None:
    """What ``model`` explains of its fit population (docs/math.md §4.9): one line, the WARNING when little."""
    try:
        e = explained(model)
    except (AttributeError, ValueError):  # a stand-in model (tests) without a spectrum
        return None
    why = warning_text(e)
    return f"WARNING: {why}" if why else e.line()


class _Tail:
    """The newest ``limit`` rows of a stream of record batches: zero-copy slices in a ring (not thread-safe)."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self._ring: deque[pa.RecordBatch] = deque()
        self._rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        m = batch.num_rows
        if m == 0:
            return
        if m > self.limit:
            batch = batch.slice(m - self.limit)
        self._ring.append(batch)
        self._rows += batch.num_rows
        while self._rows - self._ring[0].num_rows >= self.limit:
            self._rows -= self._ring.popleft().num_rows

    def batches(self) -> list[pa.RecordBatch]:
        return list(self._ring)


def _k0_rows(results: list[Any], m: int, limit: int) -> np.ndarray | None:
    """Output rows (of ``m``) whose exact k0 was computed, the newest ``limit`` of them; None if none.

    ``Processed.output`` is its ``results`` one after another, so a result's
    ``residual_rows`` are offset by the rows of the results before it.
    """
    sizes = [len(r) for r in results]
    if sum(sizes) != m:
        return None
    parts: list[np.ndarray] = []
    need, end = limit, m
    for res, size in zip(reversed(results), reversed(sizes), strict=True):
        end -= size
        rows = res.residual_rows
        if rows is not None and rows.size and need > 0:
            take = rows[-need:]
            parts.append(take + end)
            need -= take.size
    if not parts:
        return None
    return np.concatenate(parts[::-1]).astype(np.int64)


def _sample(batches: list[pa.RecordBatch], points: int, now: float) -> dict[str, Any]:
    """The newest ``points`` rows of ``batches`` as columns."""
    empty: dict[str, Any] = {"capacity": points, "count": 0, "id": [], "x": [], "y": [], "beta": [],
                             "unexplained": [], "k0": [], "radius": [], "flags": [], "model_version": [], "age": []}
    if not batches:
        return empty
    newest = batches[-1].schema  # rows of the newest output version; within one, precisions are widened together
    kept = [pa.Table.from_batches([b]) for b in batches if schema_version_of(b.schema) == schema_version_of(newest)]
    table = pa.concat_tables(kept, promote_options="permissive")
    if table.num_rows > points:
        table = table.slice(table.num_rows - points)
    table = table.combine_chunks()
    m = table.num_rows
    if m == 0:
        return empty
    x, y = _axes(y_matrix(table).astype(np.float64))
    processed = pc.cast(table.column("processed_at"), pa.int64()).to_numpy(zero_copy_only=False) / 1e6
    return {
        "capacity": points,
        "count": m,
        "id": [_short(s) for s in table.column("id").to_pylist()],
        "x": _floats(x),
        "y": _floats(y),
        "beta": _floats(table.column("beta").to_numpy(zero_copy_only=False)),
        "unexplained": _floats(table.column("unexplained").to_numpy(zero_copy_only=False)),
        "k0": _floats(table.column("k0").to_numpy(zero_copy_only=False)),
        # the placement's radius (map units; null without a calibration, and in version-1 rows, which have none)
        "radius": (_floats(table.column("radius").to_numpy(zero_copy_only=False)) if "radius" in table.column_names
                   else [None] * m),
        "flags": flag_names_of(table),
        "model_version": table.column("model_version").to_pylist(),
        "age": _floats(np.maximum(now - processed, 0.0)),
    }


def _axes(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The page's two axes: the first two coordinates (a 1-D map lies on the horizontal axis)."""
    if Y.shape[1] >= 2:
        return Y[:, 0], Y[:, 1]
    return Y[:, 0], np.zeros(Y.shape[0])


def _floats(a: np.ndarray) -> list[float | None]:
    """``a`` rounded to ``DIGITS`` significant digits, None for NaN/inf (JSON has neither).

    k·10^-p is computed as k / 10^p (and k·10^q as a product), both exact powers
    of ten, so each result is the double nearest to the short decimal and
    prints as it (``repr`` gives the shortest round-trip form): 0.12346, not
    0.12346000000000001. Magnitudes below 1e-16 keep all their digits.
    """
    a = np.asarray(a, dtype=np.float64)
    if not a.size:
        return []
    finite = np.isfinite(a)
    v = np.where(finite, a, 0.0)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log10(np.abs(v)))
    p = np.where(v == 0, 0, DIGITS - 1 - e)
    p = np.where(np.isfinite(p), p, 0).astype(np.int64)
    out = v.copy()
    up = (p >= 0) & (p <= 22)
    out[up] = np.round(v[up] * 10.0 ** p[up]) / 10.0 ** p[up]
    down = p < 0
    out[down] = np.round(v[down] / 10.0 ** -p[down]) * 10.0 ** -p[down]
    rounded = out.tolist()
    if not finite.all():
        for i in np.flatnonzero(~finite).tolist():
            rounded[i] = None
    return rounded


def _finite(v: Any) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


def _clean(doc: dict[str, Any]) -> dict[str, Any]:
    """A flat statistics dict with non-finite numbers as None."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, bool) or v is None:
            out[k] = v
        elif isinstance(v, (int, float, np.floating, np.integer)):
            out[k] = _finite(v) if isinstance(v, (float, np.floating)) else int(v)
    return out


def _short(s: str | None) -> str:
    if s is None:
        return ""
    return s if len(s) <= MAX_ID_CHARS else s[:MAX_ID_CHARS] + "…"


def producers_notice(version: int) -> str:
    """What producers must do after a switch to ``version`` (the /map banner; docs/objects.md)."""
    return (f"Producers: measure new rows against version {version}'s landmarks (`streamembed model landmarks` "
            f"exports them; streamembed.producer follows new versions) and tag them landmark_version = {version}; "
            f"rows that state no version are read as the version the daemon started with (refit.unversioned_rows), "
            f"never as version {version}.")
