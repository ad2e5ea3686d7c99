"""Refit requests, the daemon's side: ask the producer for the candidates' mutual dissimilarities, install on answer.

When a refit is due and the reservoir holds rows of dissimilarities alone
(no objects, no block; ``monitors.reservoir``), ``RefitRequests.ask``
publishes a request (``stream.refit_requests``: the candidate ids, the model
version, a deadline ``refit.request_seconds`` away) on the model channel — a
file under ``output.root/refit-requests`` (:class:`DirectoryChannel`) or a
message on the model topic (``kafka.refit_channel``) — and keeps the
candidates' rows. Between batches ``poll`` reads what answered: an answer
that ``check_answer`` accepts gives the refit its (k, k) block, and the
refit manager starts the worker on it as it does for a block's ``cross``;
one it refuses (another request, the wrong version, late, partial, wrong
ids, malformed) is recorded in the model history with its reason
(``"status": "refused"``), set aside (``answer-<id>.arrow.refused`` and its
``.reason``) and the map kept, and the request waits on until its deadline
(a producer may answer again). A request that reaches its deadline, or whose
map changed meanwhile (a model from the topic), is withdrawn
(``"expired"`` / ``"withdrawn"``); the detector then cools down and asks again.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from streamembed.atomic import atomic_write_bytes
from streamembed.fsafe import make_dirs
from streamembed.stream.refit_requests import (REQUESTS_DIR, AnswerRefused, RefitRequest, check_answer,
                                               read_answer, request_name)

__all__ = ["RequestChannel", "DirectoryChannel", "RefitRequests", "Pending"]

log = logging.getLogger("streamembed.refit")

#: Suffixes of answer files the daemon has handled (not read again).
_HANDLED = (".accepted", ".refused", ".reason", ".tmp", ".part")


class RequestChannel(Protocol):
    """Where requests are published and answers arrive (a directory, or the model topic)."""

    def publish(self, request: RefitRequest) -> None: ...

    def withdraw(self, request: RefitRequest) -> None: ...

    def answers(self) -> Iterator[tuple[str, bytes]]: ...

    def handled(self, label: str, reason: str | None) -> None: ...


class DirectoryChannel:
    """Requests and answers as files in ``<output.root>/refit-requests`` (see the module doc)."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / REQUESTS_DIR

    def publish(self, request: RefitRequest) -> None:
        make_dirs(self.dir)
        for old in self.dir.glob("request-*.json"):  # one request at a time
            old.unlink(missing_ok=True)
        atomic_write_bytes(self.dir / request_name(request.request_id), request.to_json())

    def withdraw(self, request: RefitRequest) -> None:
        (self.dir / request_name(request.request_id)).unlink(missing_ok=True)

    def answers(self) -> Iterator[tuple[str, bytes]]:
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("answer-*")):
            if path.name.startswith((".", "_")) or path.name.endswith(_HANDLED) or not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                log.warning("cannot read the refit answer %s: %s", path, exc)
                continue
            yield path.name, data

    def handled(self, label: str, reason: str | None) -> None:
        path = self.dir / label
        try:
            if reason is None:
                path.replace(path.with_name(label + ".accepted"))
            else:
                path.replace(path.with_name(label + ".refused"))
                atomic_write_bytes(path.with_name(label + ".reason"), (reason + "\n").encode("utf-8"))
        except OSError as exc:  # it will be read again, and refused again: nothing is installed twice
            log.warning("cannot set the refit answer %s aside: %s", path, exc)


@dataclass
class Pending:
    """A published request and what its refit needs besides the answer."""

    request: RefitRequest
    rows: np.ndarray  # (k, n): the candidates' dissimilarities to the landmarks of request.model_version
    trigger: str
    reason: str
    stats: Any


class RefitRequests:
    """The pending request (at most one) of a refit manager (see the module doc)."""

    def __init__(self, channel: RequestChannel, seconds: float, candidates: int,
                 record: Callable[[dict[str, Any]], None], clock: Callable[[], float] = time.time,
                 answer_to: str = "") -> None:
        self.channel = channel
        self.seconds = float(seconds)
        self.candidates = int(candidates)
        self.record = record
        self.clock = clock
        self.answer_to = answer_to
        self.pending: Pending | None = None
        self.refused = 0

    def ask(self, trigger: str, reason: str, stats: Any, est: Any, ids: list[str], rows: np.ndarray) -> RefitRequest:
        """Publish a request for the mutual dissimilarities of the most recent distinct ``ids`` (not landmarks)."""
        taken = {str(x) for x in est.landmark_ids}
        keep: dict[str, int] = {}
        for i, x in enumerate(ids):  # the last row of an id wins
            if x not in taken:
                keep[x] = i
        chosen = sorted(keep.values())[-self.candidates:]
        now = self.clock()
        request = RefitRequest(f"v{int(est.version)}-{int(now * 1000)}-{secrets.token_hex(3)}", str(est.lineage),
                               int(est.version), tuple(ids[i] for i in chosen), now, now + self.seconds,
                               self.answer_to)
        self.channel.publish(request)
        self.pending = Pending(request, np.asarray(rows, dtype=np.float64)[chosen], trigger, reason, stats)
        self.record({"trigger": trigger, "reason": reason, "status": "requested", "request_id": request.request_id,
                     "model_version": request.model_version, "candidates": len(chosen),
                     "deadline_unix": request.deadline})
        log.info("refit: asked the producer for the mutual dissimilarities of %d candidates (request %s, deadline "
                 "in %g s)", len(chosen), request.request_id, self.seconds,
                 extra={"request_id": request.request_id, "model_version": request.model_version})
        return request

    def poll(self, current_version: int) -> tuple[str, Pending, np.ndarray | None] | None:
        """("accepted", pending, mutual (k, k)) for an answer that installs, ("expired" | "withdrawn", pending,
        None) for a request that ended without one, or None (nothing yet); refused answers are recorded here."""
        p = self.pending
        if p is None:
            self._strays()
            return None
        if current_version != p.request.model_version:
            return self._end(p, "withdrawn", f"the map changed to version {current_version} while the request for "
                                             f"version {p.request.model_version} waited")
        for label, data in self.channel.answers():
            try:
                mutual = check_answer(p.request, read_answer(data), now=self.clock())
            except AnswerRefused as exc:
                self._refuse(p, label, str(exc))
                continue
            self.channel.handled(label, None)
            self.channel.withdraw(p.request)
            self.pending = None
            log.info("refit: the producer answered request %s", p.request.request_id)
            return "accepted", p, mutual
        if self.clock() > p.request.deadline:
            return self._end(p, "expired", f"no usable answer within refit.request_seconds = {self.seconds:g} s")
        return None

    def _strays(self) -> None:
        """Answers with no pending request (it expired, was withdrawn or never was): refused as late."""
        for label, _ in self.channel.answers():
            why = "late: no request is pending (it expired or was withdrawn; answer the next one)"
            self.refused += 1
            self.channel.handled(label, why)
            self.record({"status": "refused", "answer": label, "detail": why})
            log.warning("refit answer %s refused: %s", label, why)

    def close(self) -> None:
        if self.pending is not None:
            self._end(self.pending, "withdrawn", "the daemon stopped")

    def _refuse(self, p: Pending, label: str, why: str) -> None:
        self.refused += 1
        self.channel.handled(label, why)
        self.record({"trigger": p.trigger, "reason": p.reason, "status": "refused", "request_id": p.request.request_id,
                     "answer": label, "detail": why})
        log.warning("refit answer %s refused: %s; the map stays at version %d", label, why, p.request.model_version)

    def _end(self, p: Pending, status: str, why: str) -> tuple[str, Pending, None]:
        self.channel.withdraw(p.request)
        self.pending = None
        self.record({"trigger": p.trigger, "reason": p.reason, "status": status, "request_id": p.request.request_id,
                     "detail": why})
        log.warning("refit request %s %s: %s; the map stays at version %d", p.request.request_id, status, why,
                    p.request.model_version)
        return status, p, None
