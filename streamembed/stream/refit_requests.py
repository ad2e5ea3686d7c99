"""The refit request protocol's records: a request for the candidates' mutual dissimilarities, and its answer.

A daemon whose rows carry dissimilarities alone knows each candidate's
dissimilarities to the current landmarks (its row) but not the candidates'
among themselves, which a refit needs (docs/math.md §5). It asks the producer,
who keeps the objects, on the model channel (docs/objects.md, "Refit requests"):

* **the request**, JSON (:class:`RefitRequest`): ``format``
  ``"streamembed.refit-request"``, ``version`` 1, ``request_id``, the map's
  ``lineage`` and ``model_version``, ``candidate_ids`` (k ids of recent rows,
  in the order the answer's columns follow), ``created_at`` / ``deadline``
  (Unix seconds) and ``answer_to`` (where a directory deployment takes the
  answer);
* **the answer**, an Arrow IPC stream or file (or Parquet) of k rows: ``id``
  (each candidate once) and ``dissimilarities`` (k floats: that candidate's
  dissimilarities to every candidate, in ``candidate_ids`` order), with the
  schema metadata ``streamembed.request_id`` and ``streamembed.model_version``
  of the request it answers (:func:`answer_table` builds it).

:func:`check_answer` accepts an answer or refuses it with the reason
(:class:`AnswerRefused`: another request, the wrong model version, late,
partial, wrong ids, malformed values): a refused answer leaves the map as it
is. In a directory deployment the request is
``<output.root>/refit-requests/request-<id>.json`` and the answer
``answer-<id>.arrow`` beside it (written under a hidden or ``.tmp`` name,
then renamed); with Kafka both are messages on the model topic
(``kafka.refit_channel``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa

__all__ = ["REQUEST_FORMAT", "REQUEST_VERSION", "REQUEST_ID_KEY", "MODEL_VERSION_KEY", "RefitRequest",
           "AnswerRefused", "answer_table", "answer_bytes", "read_answer", "check_answer", "REQUESTS_DIR",
           "request_name", "answer_name"]

REQUEST_FORMAT = "streamembed.refit-request"
REQUEST_VERSION = 1
#: Schema metadata keys of an answer: the request it answers and that request's model version.
REQUEST_ID_KEY, MODEL_VERSION_KEY = "streamembed.request_id", "streamembed.model_version"
#: The directory under ``output.root`` where a directory deployment's requests and answers are.
REQUESTS_DIR = "refit-requests"
#: Relative tolerance of the answer's symmetry check.
SYMMETRY_RTOL = 1e-6


def request_name(request_id: str) -> str:
    return f"request-{request_id}.json"


def answer_name(request_id: str) -> str:
    return f"answer-{request_id}.arrow"


@dataclass(frozen=True)
class RefitRequest:
    """One request for the mutual dissimilarities of ``candidate_ids`` (see the module doc)."""

    request_id: str
    lineage: str
    model_version: int
    candidate_ids: tuple[str, ...]
    created_at: float
    deadline: float
    answer_to: str = ""

    def to_json(self) -> bytes:
        doc = {"format": REQUEST_FORMAT, "version": REQUEST_VERSION, **asdict(self)}
        doc["candidate_ids"] = list(self.candidate_ids)
        return json.dumps(doc, indent=1).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str) -> RefitRequest:
        """The request of JSON ``data``; ValueError naming what is wrong."""
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != REQUEST_FORMAT:
            raise ValueError(f"not a {REQUEST_FORMAT!r} document")
        if doc.get("version") != REQUEST_VERSION:
            raise ValueError(f"refit request version {doc.get('version')!r}; this streamembed reads {REQUEST_VERSION}")
        ids = doc.get("candidate_ids")
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            raise ValueError("candidate_ids must be a list of strings")
        return cls(str(doc["request_id"]), str(doc["lineage"]), int(doc["model_version"]), tuple(ids),
                   float(doc["created_at"]), float(doc["deadline"]), str(doc.get("answer_to", "")))


class AnswerRefused(ValueError):
    """An answer that cannot install a refit; the message is the reason (recorded, the map kept)."""


def answer_table(request: RefitRequest, ids: Sequence[str], mutual: np.ndarray) -> pa.Table:
    """The answer to ``request``: rows ``ids`` (each candidate once, any order) with their dissimilarities
    ``mutual`` (len(ids), k) to every candidate in the request's order."""
    M = np.ascontiguousarray(mutual, dtype=np.float64)
    k = len(request.candidate_ids)
    flat = pa.array(M.ravel())
    col = pa.FixedSizeListArray.from_arrays(flat, k) if M.ndim == 2 and M.shape[1] == k else pa.array(list(M))
    meta = {REQUEST_ID_KEY: request.request_id, MODEL_VERSION_KEY: str(int(request.model_version))}
    table = pa.table({"id": pa.array([str(x) for x in ids], pa.string()), "dissimilarities": col})
    return table.replace_schema_metadata(meta)


def answer_bytes(table: pa.Table) -> bytes:
    """An answer table as one Arrow IPC stream (a file's content, or a Kafka message's value)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def read_answer(data: bytes) -> pa.Table:
    """The table of an answer's bytes: an Arrow IPC stream or file, or Parquet; AnswerRefused if none of them."""
    buf = pa.py_buffer(data)
    try:
        if data[:4] == b"PAR1":
            import pyarrow.parquet as pq

            return pq.read_table(pa.BufferReader(buf))
        if data[:6] == b"ARROW1":
            return pa.ipc.open_file(buf).read_all()
        return pa.ipc.open_stream(buf).read_all()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise AnswerRefused(f"malformed: not an Arrow IPC or Parquet table ({type(exc).__name__}: {exc})") from None


def check_answer(request: RefitRequest, table: pa.Table, now: float | None = None) -> np.ndarray:
    """The candidates' mutual dissimilarities (k, k) float64, in ``request.candidate_ids`` order, of an answer;
    AnswerRefused with the reason when it cannot be used."""
    now = time.time() if now is None else now
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    got_id = meta.get(REQUEST_ID_KEY)
    if got_id != request.request_id:
        raise AnswerRefused(f"answers request {got_id!r}, not the pending {request.request_id!r}")
    got_version = meta.get(MODEL_VERSION_KEY)
    if got_version != str(int(request.model_version)):
        raise AnswerRefused(f"wrong model version: the answer is for version {got_version}, the request for "
                            f"version {request.model_version}")
    if now > request.deadline:
        raise AnswerRefused(f"late: it arrived {now - request.deadline:.1f} s after the request's deadline")
    names = table.schema.names
    if "id" not in names or "dissimilarities" not in names:
        raise AnswerRefused(f"malformed: an answer has columns 'id' and 'dissimilarities', this one {names}")
    return _mutual(request, table)


def _mutual(request: RefitRequest, table: pa.Table) -> np.ndarray:
    k = len(request.candidate_ids)
    ids = table.column("id").to_pylist()
    if any(not isinstance(x, str) for x in ids):
        raise AnswerRefused("malformed: every 'id' must be a string")
    position = {x: i for i, x in enumerate(request.candidate_ids)}
    unknown = [x for x in ids if x not in position]
    if unknown:
        raise AnswerRefused(f"wrong ids: {len(unknown)} id(s) are not candidates of the request, e.g. "
                            f"{unknown[:3]}")
    if len(set(ids)) != len(ids):
        raise AnswerRefused("wrong ids: a candidate is answered twice")
    if len(ids) < k:
        missing = [x for x in request.candidate_ids if x not in set(ids)]
        raise AnswerRefused(f"partial: {len(ids)} of the {k} candidates answered (missing e.g. {missing[:3]})")
    col = table.column("dissimilarities").combine_chunks()
    t = col.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) or not (
            pa.types.is_floating(t.value_type) or pa.types.is_integer(t.value_type)):
        raise AnswerRefused(f"malformed: 'dissimilarities' has type {t}, expected a list of floats")
    if col.null_count:
        raise AnswerRefused("partial: some candidates' rows are null")
    lengths = np.asarray(col.value_lengths() if not pa.types.is_fixed_size_list(t) else [t.list_size] * len(col))
    if (lengths != k).any():
        bad = int(np.flatnonzero(lengths != k)[0])
        raise AnswerRefused(f"partial: the row of {ids[bad]!r} has {int(lengths[bad])} values, expected {k} (one per "
                            f"candidate)")
    values = col.flatten()
    if values.null_count:
        raise AnswerRefused("malformed: the rows hold null values")
    M = np.asarray(values.cast(pa.float64()).to_numpy(zero_copy_only=False)).reshape(k, k)
    order = np.fromiter((position[x] for x in ids), dtype=np.int64, count=k)
    out = np.empty((k, k))
    out[order] = M
    _check_values(out, request.candidate_ids)
    return out


def _check_values(M: np.ndarray, ids: Sequence[str]) -> None:
    if not np.isfinite(M).all():
        i, j = np.argwhere(~np.isfinite(M))[0]
        raise AnswerRefused(f"malformed: the dissimilarity of {ids[i]!r} and {ids[j]!r} is {M[i, j]} (not finite)")
    if (M < 0).any():
        i, j = np.argwhere(M < 0)[0]
        raise AnswerRefused(f"malformed: the dissimilarity of {ids[i]!r} and {ids[j]!r} is {M[i, j]:.6g} (negative)")
    if np.abs(np.diagonal(M)).max(initial=0.0) > 0:
        i = int(np.argmax(np.abs(np.diagonal(M))))
        raise AnswerRefused(f"malformed: the dissimilarity of {ids[i]!r} to itself is {M[i, i]:.6g}, not 0")
    scale = max(float(np.abs(M).max(initial=0.0)), 1e-300)
    asym = np.abs(M - M.T)
    if asym.max(initial=0.0) > SYMMETRY_RTOL * scale:
        i, j = (int(x) for x in np.unravel_index(int(np.argmax(asym)), asym.shape))
        raise AnswerRefused(f"malformed: not symmetric: ({ids[i]!r}, {ids[j]!r}) is {M[i, j]:.6g} one way and "
                            f"{M[j, i]:.6g} the other")
