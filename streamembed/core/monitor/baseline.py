"""``FitBaseline``: what the drift detectors are armed from when a model is fitted (docs/math.md §7.8).

A model fitted from a dissimilarity matrix or from features knows the rows of
its non-landmark fit objects against the landmarks, so at fit time it can
place them and keep what each detector calibrates on
(``core.monitor.fit_baseline`` builds it):

* ``unexplained`` (N,): their unexplained energies u = β − ‖ŷ‖², the values
  the off-map CUSUM watches, in a seeded random order (the fit population is
  a set: its file order says nothing about the stream's);
* ``axes`` (N', q): their projections on the map's q leading monitored
  eigenpairs (float32; N' ≤ ``MAX_AXES_OBJECTS``), what the in-map statistic
  computes its captured share from;
* ``coverage`` (J,): the radius's coverage on J seeded samples of
  ``coverage_objects`` of them against an exact classical MDS of each sample
  (``core.trust.check``), where the fit had a radius;
* ``explained_share`` and ``median_unexplained_share``: how much of its fit
  population the map explains (1 − Σu/Σβ, and the median object's u/β).

Stored in the model file as ``drift_baseline_*`` arrays and a ``drift_baseline``
metadata block (its own ``version``); a file without it loads and monitors as
before (the detectors take their baseline from the stream). No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BASELINE_VERSION", "MAX_BASELINE_OBJECTS", "MAX_AXES_OBJECTS", "BASELINE_AXES", "FitBaseline"]

#: Version of the baseline block in model files.
BASELINE_VERSION = 1
#: At most this many non-landmark fit objects' unexplained energies are kept (a seeded sample beyond).
MAX_BASELINE_OBJECTS = 20_000
#: At most this many objects' projections on the leading axes are kept (float32, ``BASELINE_AXES`` each).
MAX_AXES_OBJECTS = 5_000
#: Leading monitored axes kept per object: the in-map statistic can use up to this many (``drift.plane_axes``).
BASELINE_AXES = 64


@dataclass(frozen=True, eq=False)
class FitBaseline:
    """The fit population's values the detectors calibrate on (module doc)."""

    unexplained: np.ndarray
    axes: np.ndarray
    coverage: np.ndarray
    coverage_objects: int = 0
    explained_share: float = float("nan")
    median_unexplained_share: float = float("nan")
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_objects(self) -> int:
        return int(self.unexplained.size)

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, JSON metadata) for a model file: plain numeric arrays, no pickle."""
        arrays: dict[str, np.ndarray] = {"drift_baseline_unexplained": np.asarray(self.unexplained, dtype=np.float64),
                  "drift_baseline_axes": np.asarray(self.axes, dtype=np.float32),
                  "drift_baseline_coverage": np.asarray(self.coverage, dtype=np.float64)}
        meta: dict[str, Any] = {"version": BASELINE_VERSION, "coverage_objects": int(self.coverage_objects),
                "explained_share": _number(self.explained_share),
                "median_unexplained_share": _number(self.median_unexplained_share), "info": dict(self.info)}
        return arrays, meta

    @classmethod
    def from_state(cls, files: dict[str, np.ndarray], meta: Any, d: int) -> FitBaseline:
        """The baseline of a model file's arrays and ``meta`` block; ValueError naming what is wrong."""
        if not isinstance(meta, dict) or meta.get("version") != BASELINE_VERSION:
            got = meta.get("version") if isinstance(meta, dict) else meta
            raise ValueError(f"the drift baseline has version {got!r}; this streamembed reads {BASELINE_VERSION}")
        try:
            u, axes, cov = (files[f"drift_baseline_{k}"] for k in ("unexplained", "axes", "coverage"))
        except KeyError as exc:
            raise ValueError(f"the drift baseline lacks the array {exc}") from None
        if u.ndim != 1 or axes.ndim != 2 or cov.ndim != 1 or (axes.size and axes.shape[1] < d):
            raise ValueError(f"drift baseline arrays of shapes {u.shape}, {axes.shape}, {cov.shape} for d = {d}")
        if not ((cov >= 0) & (cov <= 1)).all():
            raise ValueError("drift baseline coverages must lie in [0, 1]")
        k = meta.get("coverage_objects")
        info = meta.get("info", {})
        if isinstance(k, bool) or not isinstance(k, int) or k < 0 or not isinstance(info, dict):
            raise ValueError(f"drift baseline metadata: coverage_objects {k!r}, info {type(info).__name__}")
        return cls(unexplained=u.astype(np.float64), axes=axes.astype(np.float32), coverage=cov.astype(np.float64),
                   coverage_objects=k, explained_share=_read_number(meta, "explained_share"),
                   median_unexplained_share=_read_number(meta, "median_unexplained_share"), info=info)


def _number(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _read_number(meta: dict[str, Any], key: str) -> float:
    v = meta.get(key)
    if v is None:
        return float("nan")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"drift baseline metadata {key!r} must be a number or null, got {v!r}")
    return float(v)
