"""The refit request protocol's records (``stream.refit_requests``): an answer is taken whole or refused with its
reason — another request, the wrong model version, late, partial, wrong ids, malformed values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamembed.stream.refit_requests import (MODEL_VERSION_KEY, REQUEST_ID_KEY, AnswerRefused, RefitRequest,
                                               answer_bytes, answer_table, check_answer, read_answer)

IDS = tuple(f"c{i}" for i in range(6))
POINTS = np.random.default_rng(5).normal(size=(6, 2))
MUTUAL = np.sqrt(((POINTS[:, None] - POINTS[None]) ** 2).sum(-1))
REQUEST = RefitRequest("v3-1-abc", "lin", 3, IDS, created_at=100.0, deadline=400.0)


def _answer(ids=IDS, M=MUTUAL, request=REQUEST) -> pa.Table:
    return answer_table(request, ids, M)


def test_a_request_survives_its_json() -> None:
    assert RefitRequest.from_json(REQUEST.to_json()) == REQUEST
    with pytest.raises(ValueError, match="not a"):
        RefitRequest.from_json(b'{"format": "something else"}')


def test_an_answer_in_any_row_order_gives_the_mutual_block_in_the_requests_order() -> None:
    perm = np.array([3, 0, 5, 1, 4, 2])
    got = check_answer(REQUEST, read_answer(answer_bytes(_answer([IDS[i] for i in perm], MUTUAL[perm]))), now=200.0)
    np.testing.assert_array_equal(got, MUTUAL)


def test_parquet_and_arrow_files_are_answers_too(tmp_path) -> None:
    pq.write_table(_answer(), tmp_path / "a.parquet")
    np.testing.assert_array_equal(check_answer(REQUEST, read_answer((tmp_path / "a.parquet").read_bytes()), 200.0),
                                  MUTUAL)
    with pa.OSFile(str(tmp_path / "a.arrow"), "wb") as f, pa.ipc.new_file(f, _answer().schema) as w:
        w.write_table(_answer())
    np.testing.assert_array_equal(check_answer(REQUEST, read_answer((tmp_path / "a.arrow").read_bytes()), 200.0),
                                  MUTUAL)


def _with_meta(table: pa.Table, **meta: str) -> pa.Table:
    m = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    m.update(meta)
    return table.replace_schema_metadata(m)


ASYM = MUTUAL.copy()
ASYM[0, 1] += 0.5
NEG = MUTUAL.copy()
NEG[2, 3] = NEG[3, 2] = -1.0
NAN = MUTUAL.copy()
NAN[1, 4] = NAN[4, 1] = np.nan
DIAG = MUTUAL + np.eye(6)


@pytest.mark.parametrize(("table", "now", "reason"), [
    (_with_meta(_answer(), **{REQUEST_ID_KEY: "v3-2-zzz"}), 200.0, "answers request 'v3-2-zzz'"),
    (_with_meta(_answer(), **{MODEL_VERSION_KEY: "2"}), 200.0, "wrong model version"),
    (_answer(), 401.0, "late"),
    (_answer(IDS[:4], MUTUAL[:4]), 200.0, "partial: 4 of the 6"),
    (_answer(IDS[:5] + ("stranger",), MUTUAL), 200.0, "wrong ids"),
    (_answer(IDS[:5] + ("c0",), MUTUAL), 200.0, "answered twice"),
    (_answer(IDS, MUTUAL[:, :5]), 200.0, "partial: the row of 'c0' has 5 values"),
    (_answer(IDS, ASYM), 200.0, "not symmetric"),
    (_answer(IDS, NEG), 200.0, "negative"),
    (_answer(IDS, NAN), 200.0, "not finite"),
    (_answer(IDS, DIAG), 200.0, "to itself"),
    (pa.table({"id": list(IDS)}).replace_schema_metadata({REQUEST_ID_KEY: REQUEST.request_id,
                                                         MODEL_VERSION_KEY: "3"}), 200.0, "malformed"),
], ids=["another-request", "wrong-version", "late", "partial", "wrong-ids", "twice", "short-rows", "asymmetric",
        "negative", "nan", "diagonal", "no-column"])
def test_an_unusable_answer_is_refused_with_its_reason(table: pa.Table, now: float, reason: str) -> None:
    with pytest.raises(AnswerRefused, match=reason):
        check_answer(REQUEST, table, now=now)


def test_bytes_that_are_no_table_are_refused_as_malformed() -> None:
    with pytest.raises(AnswerRefused, match="malformed"):
        read_answer(b"not arrow at all")
