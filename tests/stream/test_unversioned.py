"""Issue 34, item 5: after a refit, a row that neither states its landmark_version nor names its landmarks is never
placed against landmarks it may not have been measured against (``stream.unversioned``, docs/objects.md)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from streamembed.core.flags import FLAG_RETAINED_MODEL
from streamembed.core.model import fit_model
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.output import flag_bits, y_matrix
from streamembed.stream.records import LANDMARKS_KEY, Reason
from streamembed.stream.registry import ModelRegistry

RNG = np.random.default_rng(34)
POINTS = RNG.normal(size=(120, 3)) * np.array([3.0, 2.0, 0.3])


def _dist(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    return np.sqrt(((P[:, None, :] - Q[None, :, :]) ** 2).sum(-1))


V1_IDX, V2_IDX = np.arange(0, 30), np.arange(60, 90)  # a refit with other landmarks: other columns, other order
OBJECTS = POINTS[100:]


def _models() -> tuple:
    v1 = fit_model(_dist(POINTS[V1_IDX], POINTS[V1_IDX]), n_components=2, landmark_ids=[f"p{i}" for i in V1_IDX])
    v2 = fit_model(_dist(POINTS[V2_IDX], POINTS[V2_IDX]), n_components=2,
                   landmark_ids=[f"p{i}" for i in V2_IDX]).with_version(2, lineage=v1.lineage)
    return v1, v2


def _rows(idx: np.ndarray, **columns: object) -> pa.Table:
    A = _dist(OBJECTS, POINTS[idx])
    return pa.table({"id": [f"o{i}" for i in range(len(A))], "dissimilarities": list(A), **columns})


def _embedder(retain: int = 3, rule: int | None | str = "start") -> tuple[BatchEmbedder, object, object]:
    v1, v2 = _models()
    registry = ModelRegistry(v1, retain=retain)
    emb = BatchEmbedder(v1, registry=registry, unversioned_rows=rule)
    registry.install(v2)  # the refit
    return emb, v1, v2


def test_before_any_refit_unversioned_rows_are_the_current_version() -> None:
    v1, _ = _models()
    out = BatchEmbedder(v1).process(_rows(V1_IDX))
    assert out.n_out == len(OBJECTS) and not out.dead
    assert set(out.output.column("model_version").to_pylist()) == {1}


def test_after_a_refit_unversioned_rows_are_read_as_the_start_version_by_the_retained_model() -> None:
    emb, v1, _ = _embedder()
    out = emb.process(_rows(V1_IDX))  # measured against v1's landmarks, as the README's producer did
    assert not out.dead and out.n_out == len(OBJECTS)
    assert set(out.output.column("model_version").to_pylist()) == {1}
    assert (flag_bits(out.output) & FLAG_RETAINED_MODEL).all()
    np.testing.assert_allclose(y_matrix(out.output), v1.place(_dist(OBJECTS, POINTS[V1_IDX])).y, atol=1e-12)


def test_rows_that_state_or_name_their_landmarks_follow_them() -> None:
    emb, _, v2 = _embedder()
    stated = emb.process(_rows(V2_IDX, landmark_version=[2] * len(OBJECTS)))
    assert set(stated.output.column("model_version").to_pylist()) == {2}
    table = _rows(V2_IDX)
    field = table.schema.field("dissimilarities").with_metadata(
        {LANDMARKS_KEY: json.dumps([f"p{i}" for i in V2_IDX])})
    named = emb.process(pa.table(table.columns, schema=table.schema.set(1, field)))
    assert not named.dead and set(named.output.column("model_version").to_pylist()) == {2}
    np.testing.assert_allclose(y_matrix(named.output), v2.place(_dist(OBJECTS, POINTS[V2_IDX])).y, atol=1e-12)


@pytest.mark.parametrize(("retain", "rule", "why"), [(0, "start", "no longer served"), (3, None, "'reject'")],
                         ids=["no-retained-models", "reject"])
def test_without_the_version_to_read_them_as_they_are_dead_letters_ambiguous_landmarks(retain: int, rule: object,
                                                                                       why: str) -> None:
    emb, _, _ = _embedder(retain=retain, rule=rule)
    out = emb.process(_rows(V1_IDX))
    assert out.n_out == 0 and len(out.dead) == len(OBJECTS)
    assert {d.reason for d in out.dead} == {Reason.AMBIGUOUS_LANDMARKS}
    assert why in out.dead[0].detail and "landmark_version = 2" in out.dead[0].detail
    ok = emb.process(_rows(V2_IDX, landmark_version=[2] * len(OBJECTS)))  # what the detail says to do
    assert ok.n_out == len(OBJECTS)


def test_a_configured_version_is_the_one_unversioned_rows_are_read_as() -> None:
    emb, _, _ = _embedder(rule=2)
    out = emb.process(_rows(V2_IDX))
    assert set(out.output.column("model_version").to_pylist()) == {2} and not out.dead


def test_rows_of_objects_are_measured_by_the_daemon_and_never_ambiguous() -> None:
    v1 = fit_model(_dist(POINTS[V1_IDX], POINTS[V1_IDX]), n_components=2,
                   features=POINTS[V1_IDX], metric="euclidean")
    v2 = fit_model(_dist(POINTS[V2_IDX], POINTS[V2_IDX]), n_components=2, features=POINTS[V2_IDX],
                   metric="euclidean", landmark_ids=[f"p{i}" for i in V2_IDX]).with_version(2, lineage=v1.lineage)
    registry = ModelRegistry(v1, retain=0)
    emb = BatchEmbedder(v1, registry=registry)
    registry.install(v2)
    out = emb.process(pa.table({"id": ["a", "b"], "object": [list(OBJECTS[0]), list(OBJECTS[1])]}))
    assert not out.dead and set(out.output.column("model_version").to_pylist()) == {2}
