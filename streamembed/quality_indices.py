"""The quality indices ``streamembed evaluate`` reports: one registry (``INDICES``), name -> function.

Each :class:`QualityIndex` measures a landmark map's placements Y (R, d) of
the reference objects against their full classical MDS (``Reference``): its
name is the JSON key of every row and of ``SelectionRow``'s attribute, its
``column`` the table's header. ``evaluate_landmarks`` computes every index
in registration order, and the table, the JSON and the recommendation read
them by name; nothing restates the list.

Built in (``quality``, docs/landmarks.md): ``procrustes`` (RMS distance after
the best rigid motion, share of the full map's RMS radius; lower is better),
``trustworthiness`` (k nearest neighbours), ``spearman`` (rank correlation of
map distances with the input dissimilarities) and ``subspace`` (sine of the
largest principal angle between the two maps' column spaces; lower is better).

A new index is a function of (``Reference``, Y) -> float (its formula in
``quality``) and one ``INDICES.register(QualityIndex(...))`` line
(docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from .core.registry import Registry
from .quality import (FullMDS, NeighbourRanks, PairRanks, procrustes_share, spearman_agreement, subspace_distance,
                      trustworthiness)

__all__ = ["Reference", "QualityIndex", "INDICES", "index_names"]


class Reference:
    """What the indices measure against: the reference objects' dissimilarities D (R, R), their full classical
    MDS (``quality.FullMDS``) and the neighbours k of the neighbourhood indices. The rank tables are computed
    at first use and shared by every map measured."""

    def __init__(self, D: np.ndarray, full: FullMDS, knn: int) -> None:
        self.D = D
        self.full = full
        self.knn = int(knn)

    @cached_property
    def ranks(self) -> NeighbourRanks:
        return NeighbourRanks(self.D)

    @cached_property
    def pairs(self) -> PairRanks:
        return PairRanks(self.D)


@dataclass(frozen=True)
class QualityIndex:
    """One index: its name (JSON key, row attribute), table header, function and which way is better."""

    name: str
    column: str
    measure: Callable[[Reference, np.ndarray], float]
    better: Literal["lower", "higher"]
    doc: str


def _check(index: QualityIndex, registry: Registry[QualityIndex]) -> None:
    if not isinstance(index, QualityIndex):
        raise TypeError(f"a quality index is a QualityIndex, got {type(index).__name__}")
    if not callable(index.measure):
        raise TypeError("its measure is not callable")
    if index.better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', got {index.better!r}")
    if index.name in {"selection", "n_landmarks", "method", "seconds", "seeds"}:
        raise ValueError("the name is a fixed column of the evaluation table")


#: Every index ``evaluate`` reports, in column order.
INDICES: Registry[QualityIndex] = Registry("quality index", _check)

INDICES.register(QualityIndex("procrustes", "Procrustes to full CMDS", lambda ref, Y: procrustes_share(Y, ref.full.Y),
                              "lower", "RMS distance to the full map after the best rigid motion, share of its radius"))
INDICES.register(QualityIndex("trustworthiness", "trustworthiness",
                              lambda ref, Y: trustworthiness(ref.ranks, Y, ref.knn), "higher",
                              "Kaski's trustworthiness with k nearest neighbours"))
INDICES.register(QualityIndex("spearman", "Spearman", lambda ref, Y: spearman_agreement(ref.pairs, Y), "higher",
                              "Spearman ρ of map distances with the input dissimilarities"))
INDICES.register(QualityIndex("subspace", "subspace sin θ", lambda ref, Y: subspace_distance(Y, ref.full.Y),
                              "lower", "sine of the largest principal angle between the map and the full map"))


def index_names() -> tuple[str, ...]:
    """The registered indices' names, in column order."""
    return INDICES.names()
