"""The producer kit: rows for new objects against the current landmarks, tagged, following refits, answering them.

A producer keeps its objects (strings, bytes, series, feature vectors) and
the metric between them; streamembed keeps the map. :class:`Producer` is the
small piece between the two (docs/objects.md, "The producer kit")::

    from streamembed.producer import Producer

    producer = Producer("model.npz", root="streamembed-out")     # or kafka="host:9092", model_topic="models"
    rows = producer.rows(["a1", "a2"], ["first object", "second object"])   # id, dissimilarities, landmark_version
    producer.write("incoming/batch-0001.parquet", ids, objects)  # written under a hidden name, then renamed
    producer.answer_requests()                                   # a refit request's mutual dissimilarities

* **Rows.** ``rows`` measures each object against the landmarks of the
  newest model version it knows (their objects come with the model, or from
  the producer's own ``landmark_objects`` for a model fitted from
  dissimilarities) by the model's metric (or ``metric=``), and tags every row
  with that ``landmark_version``, so the daemon places it against exactly
  those landmarks whatever refits happen meanwhile (docs/objects.md,
  "Landmark versions").
* **Following new versions.** Before each call (at most every
  ``refresh_seconds``) it looks for a newer version of the same map: the
  refitted ``model-v<N>.npz`` files under ``<root>/models`` (a directory
  deployment), or the model topic (Kafka); ``version`` says which it uses.
* **Answering refit requests.** A daemon whose rows carry dissimilarities
  alone asks for the mutual dissimilarities of recent rows' objects
  (``stream.refit_requests``). The kit remembers the objects it made rows for
  (the ``remember`` most recent), and ``answer_requests`` computes the
  candidates' k × k block by the metric and sends it (a file beside the
  request, or a message on the model topic). Candidates it does not know
  cannot be answered (the daemon refuses a partial answer): give their
  objects with ``known=``.

``streamembed producer rows|answer`` (``streamembed.cli.producer``) does the
same from the command line.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .atomic import atomic_file, atomic_write_bytes
from .core.errors import InputError
from .core.inputs.metrics import Metric, resolve_metric
from .core.inputs.objects import as_object_array
from .core.model import LandmarkModel
from .model_io import load_model
from .stream.refit_requests import (REQUESTS_DIR, RefitRequest, answer_bytes, answer_name, answer_table)

__all__ = ["Producer"]

log = logging.getLogger("streamembed.producer")

_MODEL_FILE = re.compile(r"^model-v(\d+)\.npz$")


class Producer:
    """Rows for new objects, tagged with their landmark version (see the module doc).

    Args:
        model: the model file the deployment started with (``model.path``), or None with ``model_topic``.
        root: the daemon's ``output.root`` (directory deployments): its ``models/`` holds the refitted
            versions, its ``refit-requests/`` the requests.
        metric: the metric between objects (default: the model's; a name or ``package.module:function``).
        landmark_objects: the objects of the landmarks by id, for a model fitted from dissimilarities.
        kafka: the bootstrap servers of the model topic (Kafka deployments, instead of ``root``).
        model_topic: the model topic's name (with ``kafka``).
        model_name: the model's name on that topic.
        remember: how many of the objects it made rows for it keeps, to answer refit requests.
        refresh_seconds: the least time between two looks for a newer version.
    """

    def __init__(self, model: str | Path | LandmarkModel | None = None, *, root: str | Path | None = None,
                 metric: str | Metric | None = None, landmark_objects: Mapping[str, Any] | None = None,
                 kafka: str | None = None, model_topic: str | None = None, model_name: str = "streamembed",
                 remember: int = 100_000, refresh_seconds: float = 1.0) -> None:
        self.root = None if root is None else Path(root)
        self.landmark_objects = dict(landmark_objects or {})
        self.remember = int(remember)
        self.refresh_seconds = float(refresh_seconds)
        self._known: OrderedDict[str, Any] = OrderedDict()
        self._answered: set[str] = set()
        self._topic: Any = None
        if kafka is not None and model_topic:
            from .kafka.model_topic import ModelTopic

            self._topic = ModelTopic(kafka, model_topic, name=model_name)
            self._kafka = (kafka, model_topic, model_name)
        if isinstance(model, LandmarkModel):
            self.model = model
        elif model is not None:
            self.model = load_model(model)
        elif self._topic is not None:
            found = self._topic.latest(lineage=None)
            if found is None:
                raise InputError(f"no model on the model topic {model_topic!r} (key {model_name!r})")
            self.model = found
        else:
            raise InputError("a Producer needs a model file, or a model topic (kafka= and model_topic=)")
        self._metric_name = metric
        self._checked = 0.0
        self._learn(self.model)
        self.refresh(force=True)

    # ------------------------------------------------------------------ the model and its versions
    @property
    def version(self) -> int:
        """The landmark version rows are measured against (the newest this producer found)."""
        return int(self.model.version)

    @property
    def metric(self) -> Metric:
        name = self._metric_name if self._metric_name is not None else self.model.metric
        if name is None:
            raise InputError("the model names no metric (it was fitted from dissimilarities): give metric=")
        return resolve_metric(name)

    def refresh(self, force: bool = False) -> bool:
        """Look for a newer version of the same map (``<root>/models``, or the model topic); True when one was
        taken."""
        now = time.monotonic()
        if not force and now - self._checked < self.refresh_seconds:
            return False
        self._checked = now
        newer = self._newer_file() if self.root is not None else None
        if newer is None and self._topic is not None:
            found = self._topic.latest(lineage=self.model.lineage)
            newer = found if found is not None and int(found.version) > self.version else None
        if newer is None:
            return False
        log.info("producer: measuring against landmark version %d from now on (was %d)", newer.version, self.version)
        self._learn(newer)
        self.model = newer
        return True

    def _newer_file(self) -> LandmarkModel | None:
        assert self.root is not None
        d = self.root / "models"
        if not d.is_dir():
            return None
        found = sorted((int(m.group(1)), p) for p in d.iterdir() if (m := _MODEL_FILE.match(p.name)))
        for version, path in reversed(found):
            if version <= self.version:
                return None
            try:
                model = load_model(path)
            except InputError as exc:  # a file being replaced, or another map's: the next one
                log.warning("producer: cannot read %s: %s", path, exc)
                continue
            if model.lineage == self.model.lineage:
                return model
        return None

    # ------------------------------------------------------------------ rows
    def _landmarks(self, model: LandmarkModel) -> Any:
        """The objects of ``model``'s landmarks: its own, else by id from ``landmark_objects``, the landmarks of
        the versions seen before and the objects this producer made rows for (a refit by request takes its new
        landmarks among those: the daemon never saw their objects)."""
        if model.features is not None:
            return model.features
        def find(x: str) -> Any:
            return self.landmark_objects.get(x, self._known.get(x))

        missing = [str(x) for x in model.landmark_ids if find(str(x)) is None]
        if missing:
            raise InputError(f"model version {model.version} keeps no landmark objects and {len(missing)} of its "
                             f"landmarks are neither in landmark_objects nor among the objects this producer made "
                             f"rows for (e.g. {missing[:3]}): give the objects of its landmarks by id")
        return as_object_array([find(str(x)) for x in model.landmark_ids])

    def _learn(self, model: LandmarkModel) -> None:
        """Keep the objects of ``model``'s landmarks by id (a later version may keep some of them)."""
        if model.has_objects:
            for x, o in zip(model.landmark_ids, model.features, strict=True):  # type: ignore[arg-type]
                self.landmark_objects.setdefault(str(x), o)

    def rows(self, ids: Sequence[Any], objects: Sequence[Any]) -> pa.Table:
        """Input rows for ``objects`` (named ``ids``): ``id``, ``dissimilarities`` (to the landmarks, in model
        order), ``landmark_version``; computed on the worker pool by the metric."""
        self.refresh()
        ids = [str(x) for x in ids]
        if len(ids) != len(objects):
            raise InputError(f"{len(ids)} ids for {len(objects)} objects")
        model, metric = self.model, self.metric
        objs = metric.objects(objects, "objects")
        A = metric(objs, self._landmarks(model))
        self._keep(ids, objs)
        n = A.shape[1]
        col = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(A).ravel()), n)
        return pa.table({"id": pa.array(ids, pa.string()), "dissimilarities": col,
                         "landmark_version": pa.array(np.full(len(ids), model.version, dtype=np.int64))})

    def write(self, path: str | Path, ids: Sequence[Any], objects: Sequence[Any]) -> Path:
        """``rows`` written as Parquet at ``path``, published atomically (a hidden temporary file, then renamed:
        a watching daemon never reads half a file)."""
        import pyarrow.parquet as pq

        table = self.rows(ids, objects)
        out = Path(path)
        with atomic_file(out) as fh:
            pq.write_table(table, fh, compression="none")
        return out

    def _keep(self, ids: list[str], objs: Any) -> None:
        if self.remember <= 0:
            return
        for x, o in zip(ids[-self.remember:], list(objs)[-self.remember:], strict=True):
            self._known[x] = o
            self._known.move_to_end(x)
        while len(self._known) > self.remember:
            self._known.popitem(last=False)

    # ------------------------------------------------------------------ refit requests
    def pending_requests(self) -> list[RefitRequest]:
        """The refit requests waiting for an answer (not answered by this producer, not past their deadline)."""
        now = time.time()
        found = self._requests_on_topic() if self._topic is not None else self._requests_in_root()
        return [r for r in found if r.request_id not in self._answered and r.deadline > now
                and r.lineage == self.model.lineage]

    def _requests_in_root(self) -> list[RefitRequest]:
        d = None if self.root is None else self.root / REQUESTS_DIR
        if d is None or not d.is_dir():
            return []
        out = []
        for path in sorted(d.glob("request-*.json")):
            try:
                out.append(RefitRequest.from_json(path.read_bytes()))
            except (OSError, ValueError, KeyError) as exc:
                log.warning("producer: cannot read the refit request %s: %s", path, exc)
        return out

    def _requests_on_topic(self) -> list[RefitRequest]:
        from .kafka.refit_channel import read_requests

        return read_requests(*self._kafka)

    def answer_requests(self, known: Mapping[str, Any] | None = None) -> int:
        """Answer every pending refit request with the candidates' mutual dissimilarities; returns how many were
        answered. A request naming a candidate whose object is neither remembered nor in ``known`` is not
        answered (logged): the daemon would refuse a partial answer."""
        done = 0
        for request in self.pending_requests():
            objs = []
            for x in request.candidate_ids:
                o = (known or {}).get(x, self._known.get(x))
                if o is None:
                    log.warning("producer: cannot answer refit request %s: the object of candidate %r is unknown "
                                "(give it with known=)", request.request_id, x)
                    break
                objs.append(o)
            else:
                mutual = self.metric.pairwise(self.metric.objects(objs, "candidates"))
                self._send(request, answer_table(request, request.candidate_ids, mutual))
                self._answered.add(request.request_id)
                done += 1
        return done

    def _send(self, request: RefitRequest, table: pa.Table) -> None:
        data = answer_bytes(table)
        if self._topic is not None:
            from .kafka.refit_channel import send_answer

            send_answer(*self._kafka, request, data)
        else:
            assert self.root is not None
            atomic_write_bytes(self.root / REQUESTS_DIR / answer_name(request.request_id), data)
        log.info("producer: answered refit request %s (%d candidates)", request.request_id,
                 len(request.candidate_ids), extra={"request": json.dumps(request.request_id)})

    def close(self) -> None:
        if self._topic is not None:
            self._topic.close()
