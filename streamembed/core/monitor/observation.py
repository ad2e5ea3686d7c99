"""What the drift monitor hands every trigger about one batch beside the per-object unexplained energies.

``MonitorSample`` carries what the in-map statistic and the coverage watch
need and the energies do not say: the objects' projections on the map's
leading monitored axes (``core.monitor.fit_baseline.leading_axes``, in the
model's own eigenbasis: the first d are the map's coordinates before
alignment), and, when the batch held objects whose mutual dissimilarities
are known (features with a metric, a block with ``cross``), the radius's
coverage on a sample of them (``core.trust.check``). A trigger that needs
neither ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MonitorSample"]


@dataclass(frozen=True)
class MonitorSample:
    """One batch's extra measurements (module doc).

    Attributes:
        n_components: d, the map's dimension.
        axes: (m', q) float64 projections of the batch's valid objects on the q leading monitored axes, in
            arrival order; None when not computed.
        coverage: the share of a checked sample whose full-MDS position lies within its radius; None: no check.
        coverage_objects: objects in that sample (0: no check).
        stated_coverage: the radius's stated coverage (None: the model has no radius).
    """

    n_components: int
    axes: np.ndarray | None = None
    coverage: float | None = None
    coverage_objects: int = 0
    stated_coverage: float | None = None
