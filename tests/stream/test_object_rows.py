"""Rows carrying objects through the BatchEmbedder (``stream.objects``, docs/objects.md): placed by the model's metric
as if their dissimilarities had been sent; a bad object, and a metric that fails, cost their rows only."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from streamembed import LandmarkMDS
from streamembed.core.inputs.metrics import METRICS, Metric
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.objects import ObjectSpec
from streamembed.stream.output import y_matrix
from streamembed.stream.readers.jsonl import parse_json_lines
from streamembed.stream.records import Reason

from tests.contracts.checks import WORDS

METRIC = "levenshtein-normalized"


@pytest.fixture(scope="module")
def model():
    return LandmarkMDS(n_components=2, metric=METRIC).fit(list(WORDS[:20])).model_


def test_rows_of_objects_are_placed_as_their_dissimilarities_would_be(model) -> None:
    objs = list(WORDS[20:])
    by_objects = BatchEmbedder(model).process(pa.table({"id": [f"w{i}" for i in range(len(objs))], "object": objs}))
    A = model.dissimilarities_to_landmarks(objs)
    by_rows = BatchEmbedder(model).process(pa.table({"id": [f"w{i}" for i in range(len(objs))],
                                                     "dissimilarities": list(A)}))
    assert not by_objects.dead
    np.testing.assert_allclose(y_matrix(by_objects.output), y_matrix(by_rows.output), atol=1e-12)


def test_an_object_the_metric_cannot_take_is_a_dead_letter_naming_the_metric(model) -> None:
    t = pa.table({"id": ["ok", "null", "long"], "object": ["streaming", None, "x" * 30]})
    out = BatchEmbedder(model, objects=ObjectSpec(METRIC, "strings", max_length=20)).process(t)
    assert out.output.column("id").to_pylist() == ["ok"]
    dead = {d.id: d for d in out.dead}
    assert {d.reason for d in dead.values()} == {Reason.BAD_OBJECT}
    assert dead["null"].detail == f"metric {METRIC!r}: the object is null"
    assert "too long: 30 characters" in dead["long"].detail and METRIC in dead["long"].detail
    lists = BatchEmbedder(model).process(pa.table({"id": ["l"], "object": pa.array([[1.0, 2.0]])}))
    assert lists.dead[0].reason == Reason.BAD_OBJECT and "takes text or bytes" in lists.dead[0].detail


def test_a_series_with_a_nan_is_refused_alone() -> None:
    rng = np.random.default_rng(0)
    S = [rng.normal(size=int(rng.integers(5, 15))).cumsum() for _ in range(12)]
    pytest.importorskip("dtaidistance")
    model = LandmarkMDS(n_components=2, metric="dtw").fit(S).model_
    t = pa.table({"id": ["a", "b", "c"], "object": pa.array([list(S[0]), [1.0, float("nan")], []],
                                                            pa.list_(pa.float64()))})
    out = BatchEmbedder(model).process(t)
    assert out.output.column("id").to_pylist() == ["a"]
    assert {d.id: d.detail for d in out.dead} == {"b": "metric 'dtw': value 1 of the series is nan (not finite)",
                                                 "c": "metric 'dtw': the series is empty"}


@pytest.mark.parametrize(("returns", "said"), [("raise", "ZeroDivisionError"), ("nan", "must be finite"),
                                               ("negative", "must not be negative"), ("shape", "returned shape")])
def test_a_metric_that_fails_dead_letters_the_batchs_rows_with_its_message(returns: str, said: str) -> None:
    def broken(a: list, b: list) -> np.ndarray:  # type: ignore[type-arg]
        n = METRICS["levenshtein"].between(np.array(a, dtype=object), np.array(b, dtype=object))
        if len(a) == len(b):  # the fit (the landmarks among themselves) works
            return n
        return {"raise": lambda: 1 / 0, "nan": lambda: n * np.nan, "negative": lambda: -n - 1,
                "shape": lambda: n[:, :1]}[returns]()

    metric = Metric("test-broken", broken, "objects")
    METRICS.register(metric)
    try:
        model = LandmarkMDS(n_components=2, metric="test-broken").fit(list(WORDS[:6])).model_
        out = BatchEmbedder(model).process(pa.table({"id": ["a", "b", "c"], "object": ["x", "yy", "zzz"]}))
    finally:
        METRICS.unregister("test-broken")
    assert out.n_out == 0 and [d.id for d in out.dead] == ["a", "b", "c"]
    assert {d.reason for d in out.dead} == {Reason.METRIC_FAILED}
    assert said in out.dead[0].detail and "test-broken" in out.dead[0].detail


def test_json_lines_that_mix_text_and_lists_refuse_the_odd_ones() -> None:
    lines = [json.dumps({"id": "a", "object": "text"}).encode() + b"\n",
             json.dumps({"id": "b", "object": [1, 2]}).encode() + b"\n"]
    chunk = parse_json_lines(lines)
    assert chunk.table.column("object").to_pylist() == ["text"]
    assert [d.id for d in chunk.dead] == ["b"] and "JSON list" in chunk.dead[0].detail


def test_rows_with_objects_beside_their_dissimilarities_are_placed_from_the_dissimilarities(model) -> None:
    objs = list(WORDS[20:24])
    A = model.dissimilarities_to_landmarks(objs)
    t = pa.table({"id": ["a", "b", "c", "d"], "dissimilarities": list(A), "object": objs[:3] + [None]})
    seen: list = []

    class Monitor:
        keeps_objects = True

        def observe(self, A, res, **kw):  # type: ignore[no-untyped-def]
            seen.append(kw.get("objects"))

    out = BatchEmbedder(model, monitor=Monitor()).process(t)
    assert out.n_out == 4 and not out.dead  # a missing object beside good dissimilarities costs nothing
    assert list(seen[0]) == objs[:3] + [None]
