"""The daemon's side of the refit request protocol (``daemon.request_refits``, docs/objects.md): a request on the
directory channel, an answer that installs, and the refusals — late, partial, wrong ids, wrong version, malformed —
each recorded with its reason while the request waits on; a request past its deadline ends, the map kept."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest

from streamembed.daemon.request_refits import DirectoryChannel, RefitRequests
from streamembed.stream.refit_requests import REQUESTS_DIR, answer_bytes, answer_name, answer_table

IDS = [f"r{i}" for i in range(30)] + ["L3", "r5"]  # a landmark's id and a repeated id: not asked twice
POINTS = np.random.default_rng(1).normal(size=(40, 3))
ROWS = np.abs(np.random.default_rng(2).normal(size=(len(IDS), 5)))
EST = SimpleNamespace(landmark_ids=np.array([f"L{i}" for i in range(5)]), version=4, lineage="lin")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _setup(tmp_path: Path) -> tuple[RefitRequests, list[dict], Clock]:
    records: list[dict] = []
    clock = Clock()
    req = RefitRequests(DirectoryChannel(tmp_path), 60.0, 1000, records.append, clock=clock)
    return req, records, clock


def _mutual(ids: tuple[str, ...]) -> np.ndarray:
    P = POINTS[[int(x[1:]) for x in ids]]
    return np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))


def _answer(tmp_path: Path, request, ids=None, M=None, name=None) -> Path:
    ids = list(request.candidate_ids) if ids is None else ids
    M = _mutual(request.candidate_ids)[: len(ids)] if M is None else M
    path = tmp_path / REQUESTS_DIR / (name or answer_name(request.request_id))
    path.write_bytes(answer_bytes(answer_table(request, ids, M)))
    return path


def test_a_request_names_the_recent_distinct_non_landmark_rows_and_an_answer_installs(tmp_path: Path) -> None:
    req, records, _ = _setup(tmp_path)
    request = req.ask("manual", "asked", None, EST, IDS, ROWS)
    assert request.candidate_ids == tuple(f"r{i}" for i in range(30) if i != 5) + ("r5",)
    assert request.model_version == 4 and request.deadline == 1060.0
    assert (tmp_path / REQUESTS_DIR / f"request-{request.request_id}.json").exists()
    assert req.poll(4) is None  # nothing yet
    _answer(tmp_path, request)
    status, pending, mutual = req.poll(4)
    assert status == "accepted" and np.allclose(mutual, _mutual(request.candidate_ids))
    np.testing.assert_array_equal(pending.rows[-1], ROWS[-1])  # r5's latest row
    assert req.pending is None and not list((tmp_path / REQUESTS_DIR).glob("request-*.json"))
    assert [r["status"] for r in records] == ["requested"]
    assert (tmp_path / REQUESTS_DIR / (answer_name(request.request_id) + ".accepted")).exists()


@pytest.mark.parametrize("fault", ["partial", "wrong-ids", "wrong-version", "malformed", "late"])
def test_an_unusable_answer_is_refused_with_its_reason_and_the_request_waits_on(tmp_path: Path, fault: str) -> None:
    req, records, clock = _setup(tmp_path)
    request = req.ask("auto", "drift", None, EST, IDS, ROWS)
    ids = list(request.candidate_ids)
    M = _mutual(request.candidate_ids)
    if fault == "partial":
        path = _answer(tmp_path, request, ids[:10], M[:10])
    elif fault == "wrong-ids":
        path = _answer(tmp_path, request, ids[:-1] + ["stranger"], M)
    elif fault == "wrong-version":
        from dataclasses import replace

        path = _answer(tmp_path, replace(request, model_version=3), ids, M, name=answer_name(request.request_id))
    elif fault == "malformed":
        path = tmp_path / REQUESTS_DIR / answer_name(request.request_id)
        pq.write_table(answer_table(request, ids, -M), path)
    else:
        path = _answer(tmp_path, request)
        clock.now = request.deadline + 5.0
    got = req.poll(4)
    refused = [r for r in records if r["status"] == "refused"]
    assert len(refused) == 1
    why = {"partial": "partial", "wrong-ids": "wrong ids", "wrong-version": "wrong model version",
           "malformed": "negative", "late": "late"}[fault]
    assert why in refused[0]["detail"]
    assert (path.parent / (path.name + ".refused")).exists()
    assert why in (path.parent / (path.name + ".reason")).read_text()
    if fault == "late":
        assert got is not None and got[0] == "expired" and req.pending is None
        return
    assert got is None and req.pending is not None  # still waiting: a good answer installs
    _answer(tmp_path, request, name="answer-again.arrow")
    assert req.poll(4)[0] == "accepted"


def test_a_request_past_its_deadline_expires_and_a_later_answer_is_refused_as_late(tmp_path: Path) -> None:
    req, records, clock = _setup(tmp_path)
    request = req.ask("auto", "drift", None, EST, IDS, ROWS)
    clock.now += 61.0
    assert req.poll(4)[0] == "expired"
    assert [r["status"] for r in records] == ["requested", "expired"]
    _answer(tmp_path, request)
    assert req.poll(4) is None
    assert records[-1]["status"] == "refused" and "late" in records[-1]["detail"]


def test_a_request_whose_map_changed_is_withdrawn(tmp_path: Path) -> None:
    req, records, _ = _setup(tmp_path)
    req.ask("auto", "drift", None, EST, IDS, ROWS)
    status, _, mutual = req.poll(5)  # a model of version 5 came from the model topic meanwhile
    assert status == "withdrawn" and mutual is None and records[-1]["status"] == "withdrawn"
