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

Indices of the *pipeline* rather than of one map — they refit the algorithm that made it, on the reference
objects' features, and may take minutes — are computed only when asked for by name (``evaluate --indices``):
``PIPELINE_INDICES``, each a :class:`PipelineIndex` giving one or more JSON keys of the row's ``"indices"``
and of the report's ``"full_indices"`` (the full classical MDS). Built in (Roy 2021, docs/math.md §8):
``trustability`` (n⁻¹TI at d = p and at the map's d, relative TI) and ``consistency`` (n⁻¹TCI at the map's d,
its argmax and candidate count; ``centres`` M: the M-centre lower bound).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from .consistency_index import Progress, SizedPipeline, consistency_indices, trustability_indices
from .core.errors import InputError
from .core.registry import Registry
from .quality import (FullMDS, NeighbourRanks, PairRanks, procrustes_share, spearman_agreement, subspace_distance,
                      trustworthiness)

__all__ = ["Reference", "QualityIndex", "INDICES", "index_names", "PipelineRun", "PipelineIndex", "PIPELINE_INDICES",
           "requested_indices", "measure_requested"]


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
    if index.name in {"selection", "n_landmarks", "method", "seconds", "seeds", "indices"}:
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


@dataclass(frozen=True)
class PipelineRun:
    """What a pipeline index measures: the reference objects' features X (R, p), the pipeline that made the map
    ((X, d) -> (R, d): ``quality.cmds_pipeline``, ``consistency_index.landmark_pipeline``), the map's d, the
    consistency centres (None: every object) and the refits' progress (done, total)."""

    X: np.ndarray
    pipeline: SizedPipeline
    n_components: int
    centres: int | None = None
    progress: Progress | None = None


@dataclass(frozen=True)
class PipelineIndex:
    """An index computed only when asked for by name: its name (``--indices``), its JSON keys and table headers
    (one each, in order), its function of a :class:`PipelineRun` (a dict of exactly those keys, JSON-ready) and a
    line of documentation."""

    name: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    measure: Callable[[PipelineRun], dict[str, Any]]
    doc: str


def _check_pipeline_index(index: PipelineIndex, registry: Registry[PipelineIndex]) -> None:
    if not isinstance(index, PipelineIndex):
        raise TypeError(f"a pipeline index is a PipelineIndex, got {type(index).__name__}")
    if not callable(index.measure):
        raise TypeError("its measure is not callable")
    if not index.keys or len(index.keys) != len(index.columns):
        raise ValueError("it needs one table column per JSON key, and at least one key")
    taken = {k for other in registry for k in other.keys}
    if taken & set(index.keys):
        raise ValueError(f"its keys {sorted(taken & set(index.keys))} are another index's")


#: The indices ``evaluate --indices`` computes, in column order.
PIPELINE_INDICES: Registry[PipelineIndex] = Registry("pipeline index", _check_pipeline_index)

PIPELINE_INDICES.register(PipelineIndex(
    "trustability", ("trustability", "trustability_d", "relative_trustability"),
    ("n⁻¹TI (d = p)", "n⁻¹TI (d)", "relative TI"),
    lambda run: trustability_indices(run.X, run.pipeline, run.n_components),
    "Roy's trustability index per object at d = p and at the map's d, and its scale-free form (§8.1)"))
PIPELINE_INDICES.register(PipelineIndex(
    "consistency", ("consistency", "consistency_argmax", "consistency_candidates"),
    ("n⁻¹TCI (d)", "TCI argmax", "TCI candidates"),
    lambda run: consistency_indices(run.X, run.pipeline, run.n_components, centres=run.centres,
                                    progress=run.progress),
    "Roy's tractable consistency index per object at the map's d: one refit per candidate (§8.3)"))


def requested_indices(names: Sequence[str]) -> list[PipelineIndex]:
    """The pipeline indices named (each once, in registration order); an InputError naming the known ones."""
    unknown = [n for n in names if n not in PIPELINE_INDICES]
    if unknown:
        raise InputError(f"unknown index {unknown[0]!r}; --indices takes {', '.join(PIPELINE_INDICES.names())}")
    return [index for index in PIPELINE_INDICES if index.name in names]


def measure_requested(indices: Sequence[PipelineIndex], run: PipelineRun) -> dict[str, Any]:
    """Every key of ``indices`` for one pipeline, in column order (checked: each index gives exactly its keys)."""
    out: dict[str, Any] = {}
    for index in indices:
        got = index.measure(run)
        if tuple(got) != index.keys:
            raise TypeError(f"pipeline index {index.name!r} gave keys {list(got)}, it declares {list(index.keys)}")
        out.update(got)
    return out
