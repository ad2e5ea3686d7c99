"""A refit's job from recent objects: what the daemon writes for the refit worker, and what the worker makes of it.

When the reservoir holds objects (rows placed from their objects, or carrying
them beside their dissimilarities; ``monitors.reservoir``), the candidates'
dissimilarities are computed in the refit worker's process, not on the loop's
thread (a DTW among 2,000 series takes seconds): the job carries the
candidate ids, their rows to the current landmarks (when known), their objects
packed as fixed arrays (``core.inputs.objects.pack_objects``: no pickle) and
the metric's name, and the worker assembles the (N, N) matrix with
``core.refit.refit.candidate_dissimilarities`` (docs/objects.md, "Refits from
objects").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from streamembed.core.errors import InputError
from streamembed.core.inputs.metrics import DEFAULT_METRIC, resolve_metric
from streamembed.core.inputs.objects import DEFAULT_MAX_LENGTH, pack_objects, unpack_objects
from streamembed.core.refit.refit import CandidateSet, candidate_dissimilarities

__all__ = ["object_job", "job_candidates", "is_object_job", "RefitSources"]


def object_job(ids: list[str], rows: np.ndarray | None, objects: np.ndarray, metric: str,
               max_length: int = DEFAULT_MAX_LENGTH) -> dict[str, np.ndarray]:
    """The job arrays of candidates ``ids`` (k,) with their ``objects`` (k,) and rows (k, n) or None."""
    arrays: dict[str, np.ndarray] = {"candidate_ids": np.asarray(ids, dtype=str), "metric": np.asarray(metric),
                                     "max_object_length": np.asarray(int(max_length))}
    if objects.dtype == object:
        kind, values, offsets = pack_objects(objects)
        arrays.update(objects_kind=np.asarray(kind), objects_values=values, objects_offsets=offsets)
    else:
        arrays["objects_vectors"] = np.asarray(objects, dtype=np.float64)
    if rows is not None:
        arrays["candidate_rows"] = np.asarray(rows, dtype=np.float64)
    return arrays


def is_object_job(files: Any) -> bool:
    """Whether a job's entries (``np.load``'s names) are an object job's."""
    return "candidate_ids" in files


def job_candidates(npz: Any, old: Any) -> CandidateSet:
    """The candidate set of an object job (``np.load`` of it, ``allow_pickle=False``) for the old model ``old``."""
    if "objects_kind" in npz.files:
        objects = unpack_objects(str(npz["objects_kind"]), npz["objects_values"], npz["objects_offsets"])
    else:
        objects = npz["objects_vectors"]
    metric = replace(resolve_metric(str(npz["metric"])), max_length=int(npz["max_object_length"]))
    rows = npz["candidate_rows"] if "candidate_rows" in npz.files else None
    return candidate_dissimilarities(old.landmark_ids, [str(x) for x in npz["candidate_ids"]],
                                     old_dissimilarities=old.dissimilarities, cross_to_landmarks=rows,
                                     old_features=old.features, objects=objects, metric=metric)


class RefitSources:
    """The refit manager's (``daemon.refits.RefitManager``) candidates that are neither features nor a block:
    recent objects (an object job) and rows alone (a refit request, ``daemon.request_refits``)."""

    metric_name: str | None
    max_object_length: int | None
    requests: Any
    registry: Any
    monitor: Any

    def _start_job(self, trigger: str, reason: str, stats: Any, est: Any, ids: Any, features: Any, n_old: int,
                   candidates: dict[str, Any]) -> None:
        raise NotImplementedError

    def _fail(self, why: str) -> None:
        raise NotImplementedError

    def _cool_down(self) -> None:
        raise NotImplementedError

    def _object_job(self, est: Any, cand: Any) -> dict[str, Any]:
        metric = self.metric_name or est.metric or DEFAULT_METRIC
        return object_job(cand.ids, cand.cross_to_landmarks, cand.objects, metric,
                          self.max_object_length or DEFAULT_MAX_LENGTH)

    def _asking(self) -> bool:
        return self.requests is not None and self.requests.pending is not None

    def _answered(self) -> bool:
        """A pending refit request's outcome (``daemon.request_refits``): start the refit on an accepted answer,
        cool down after one that expired; True when a refit was started."""
        got = self.requests.poll(self.registry.current_version)
        if got is None:
            return False
        status, p, mutual = got
        self.monitor.refit_running = False
        if mutual is None:
            self._cool_down()
            return False
        est = self.registry.current
        try:
            cs = candidate_dissimilarities(est.landmark_ids, list(p.request.candidate_ids),
                                           old_dissimilarities=est.dissimilarities, cross_to_landmarks=p.rows,
                                           mutual=mutual)
            self._start_job(p.trigger, p.reason, p.stats, est, cs.ids, None, cs.n_old, {"dissimilarities": cs.D})
        except (InputError, OSError) as exc:
            self._fail(f"the answered refit could not start: {exc}")
        return True

