"""Rows that name their landmark order (stream/landmark_order.py): applied exactly, or refused as landmark_mismatch.

Every format a file can come in, read by the readers the daemon and ``embed`` use, then embedded by the
``BatchEmbedder``: a permutation of the model's ids gives bit-identical placements to the rows in model order;
an order naming an unknown id, one id twice or too few ids refuses its rows, never reorders them silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.stream import landmark_order
from streamembed.stream.packed import packed_column
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.landmark_order import order_metadata
from streamembed.stream.registry import ModelRegistry
from streamembed.stream.readers import iter_file
from streamembed.stream.records import Reason
from streamembed.stream.origin import RowOrigin
from streamembed.stream.output import y_matrix

from .helpers import N_LANDMARKS, landmark_points, list_column, objects, write_arrow, write_jsonl, write_parquet

IDS = [f"mol-{i}" for i in range(N_LANDMARKS)]
PERM = np.random.default_rng(7).permutation(N_LANDMARKS)  # named column j is landmark PERM[j]
NAMED = [IDS[p] for p in PERM]


def _model(ids: list[str] = IDS, version: int = 1) -> Any:
    L = landmark_points()
    return LandmarkMDS().fit(cdist(L, L), landmark_ids=ids).model_.with_version(version)


def _rows(m: int = 40, seed: int = 1, dtype: Any = np.float32) -> np.ndarray:
    return cdist(objects(m, seed=seed), landmark_points()).astype(dtype)


def _table(A: np.ndarray, *, field_meta: dict | None = None, schema_meta: dict | None = None,
           packed: bool = False, landmarks: list[Any] | None = None) -> pa.Table:
    ids = pa.array([f"r{i}" for i in range(A.shape[0])], pa.string())
    if packed:
        col, f = packed_column(A)
        f = f.with_metadata({**(f.metadata or {}), **(field_meta or {})})
    else:
        col = list_column(A)
        f = pa.field("dissimilarities", col.type, metadata=field_meta)
    fields, cols = [pa.field("id", pa.string()), f], [ids, col]
    if landmarks is not None:
        fields.append(pa.field("landmarks", pa.list_(pa.string())))
        cols.append(pa.array(landmarks, pa.list_(pa.string())))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema_meta))


def _embed(path: Path, model: Any = None, *, registry: ModelRegistry | None = None, progressive: bool = False,
           batch_rows: int = 16) -> tuple[dict[str, tuple[np.ndarray, float]], list[Any]]:
    """{id: (y, beta)} and the dead letters of one file, read and embedded as the loop does."""
    emb = BatchEmbedder(model if model is not None else registry.current, registry=registry)
    out: dict[str, tuple[np.ndarray, float]] = {}
    dead: list[Any] = []
    for chunk in iter_file(path, batch_rows=batch_rows, progressive=progressive):
        dead.extend(chunk.dead)
        if chunk.table is None:
            continue
        p = emb.process(chunk.table, origin=RowOrigin(path.name, chunk.rows, chunk.start_row))
        dead.extend(p.dead)
        if p.output is not None:
            ys = y_matrix(p.output)
            pairs = zip(ys, p.output.column("beta").to_pylist(), strict=True)
            out.update(zip(p.output.column("id").to_pylist(), pairs, strict=True))
    return out, dead


def _same(a: dict[str, tuple[np.ndarray, float]], b: dict[str, tuple[np.ndarray, float]]) -> None:
    assert a.keys() == b.keys() and a
    for k in a:
        assert np.array_equal(a[k][0], b[k][0]) and a[k][1] == b[k][1], k  # bit-identical


def _write(kind: str, path_stem: Path, table: pa.Table) -> Path:
    if kind.startswith("parquet"):
        return write_parquet(path_stem.with_suffix(".parquet"), table, row_group_size=9)
    if kind.startswith("arrow-file"):
        return write_arrow(path_stem.with_suffix(".arrow"), table, file_format=True, chunk=7)
    return write_arrow(path_stem.with_suffix(".arrows"), table, chunk=7)


@pytest.mark.parametrize("kind,where,packed,progressive", [
    ("parquet", "field", False, False),
    ("parquet", "schema", False, False),
    ("parquet", "field", True, False),
    ("arrow-stream", "field", False, False),
    ("arrow-stream", "schema", True, True),
    ("arrow-file", "field", False, True),
    ("arrow-file", "schema", False, False),
])
def test_a_named_permutation_embeds_bit_identically(tmp_path: Path, kind: str, where: str, packed: bool,
                                                    progressive: bool) -> None:
    model = _model()
    A = _rows()
    meta = order_metadata(NAMED)
    plain = _write(kind, tmp_path / "plain", _table(A, packed=packed))
    named = _write(kind, tmp_path / "named", _table(A[:, PERM], packed=packed,
                                                    field_meta=meta if where == "field" else None,
                                                    schema_meta=meta if where == "schema" else None))
    want, dead0 = _embed(plain, model, progressive=progressive)
    got, dead1 = _embed(named, model, progressive=progressive)
    assert dead0 == dead1 == []
    _same(got, want)


def test_json_lines_name_their_order_row_by_row_and_integers_are_ids(tmp_path: Path) -> None:
    model = _model()
    A = _rows(dtype=np.float64)
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"id": f"r{i}", "dissimilarities": a.tolist()}
                                                   for i, a in enumerate(A)])
    rng = np.random.default_rng(3)
    recs = []
    for i, a in enumerate(A):  # every row its own order; a third of them in model order without saying so
        p = rng.permutation(N_LANDMARKS)
        rec: dict[str, Any] = {"id": f"r{i}", "dissimilarities": a[p].tolist(), "landmarks": [IDS[j] for j in p]}
        if i % 3 == 0:
            rec = {"id": f"r{i}", "dissimilarities": a.tolist()}
        recs.append(rec)
    named = write_jsonl(tmp_path / "named.jsonl", recs)
    want, _ = _embed(plain, model)
    got, dead = _embed(named, model)
    assert dead == []
    _same(got, want)
    # a model whose ids are numbers: integer ids in JSON are their decimal text
    num = _model([str(i) for i in range(N_LANDMARKS)])
    ints = write_jsonl(tmp_path / "ints.jsonl", [{"id": f"r{i}", "dissimilarities": a[PERM].tolist(),
                                                  "landmarks": PERM.tolist()} for i, a in enumerate(A)])
    got_num, dead = _embed(ints, num)
    want_num, _ = _embed(plain, num)
    assert dead == []
    _same(got_num, want_num)


def test_orders_that_are_not_a_permutation_are_refused_row_by_row(tmp_path: Path) -> None:
    model = _model()
    A = _rows(8, dtype=np.float64)
    orders: list[Any] = [
        NAMED,  # fine
        NAMED[:-1] + ["mol-99"],  # an id the model does not have
        NAMED[:-1] + [NAMED[0]],  # one id twice (and so one missing)
        NAMED[:-1],  # one id missing
        [],  # none at all
        "mol-0",  # not a list
        NAMED[:-1] + [None],  # a null id
        [1.5] * N_LANDMARKS,  # not ids
    ]
    recs = [{"id": f"r{i}", "dissimilarities": a[PERM].tolist(), "landmarks": o} for i, (a, o) in
            enumerate(zip(A, orders, strict=True))]
    got, dead = _embed(write_jsonl(tmp_path / "x.jsonl", recs), model)
    assert list(got) == ["r0"]
    assert sorted(d.row for d in dead) == list(range(1, 8))
    assert {d.reason for d in dead} == {Reason.LANDMARK_MISMATCH}
    why = {d.row: d.detail for d in dead}
    assert "'mol-99'" in why[1] and "does not have" in why[1]
    assert f"'{NAMED[0]}' 2 times" in why[2]
    assert "misses" in why[3] and f"'{IDS[PERM[-1]]}'" in why[3]
    assert "names 0 of the model's 12" in why[4]
    assert all(why[i] for i in (5, 6, 7))
    assert all(json.loads(d.record)["id"] == f"r{d.row}" for d in dead)


def test_file_metadata_that_is_not_a_permutation_refuses_the_file(tmp_path: Path) -> None:
    model = _model()
    A = _rows(10)
    for meta, what in ((order_metadata(NAMED[:-1] + ["x"]), "'x'"),
                       ({b"streamembed.landmarks": b"[1, 2"}, "is not JSON"),
                       ({b"streamembed.landmarks": b'{"a": 1}'}, "JSON list of landmark ids")):
        path = write_parquet(tmp_path / "bad.parquet", _table(A[:, PERM], field_meta=meta))
        got, dead = _embed(path, model)
        assert got == {} and len(dead) == 10
        assert {d.reason for d in dead} == {Reason.LANDMARK_MISMATCH} and what in dead[0].detail


def test_a_row_that_names_its_own_order_wins_over_the_file_metadata(tmp_path: Path) -> None:
    model = _model()
    A = _rows(6)
    own = [IDS[::-1] if i % 2 else None for i in range(6)]  # odd rows: reversed, and they say so
    B = np.where(np.arange(6)[:, None] % 2 == 1, A[:, ::-1], A[:, PERM])
    path = write_arrow(tmp_path / "x.arrows", _table(B, field_meta=order_metadata(NAMED), landmarks=own))
    want, _ = _embed(write_arrow(tmp_path / "plain.arrows", _table(A)), model)
    got, dead = _embed(path, model)
    assert dead == []
    _same(got, want)


def test_feature_rows_cannot_name_a_landmark_order(tmp_path: Path) -> None:
    L = landmark_points()
    model = LandmarkMDS().fit_features(L, landmark_ids=IDS).model_
    Z = objects(4)
    recs = [{"id": f"r{i}", "features": z.tolist(), **({"landmarks": NAMED} if i == 0 else {})}
            for i, z in enumerate(Z)]
    got, dead = _embed(write_jsonl(tmp_path / "f.jsonl", recs), model)
    assert sorted(got) == ["r1", "r2", "r3"]
    assert [(d.row, d.reason) for d in dead] == [(0, Reason.LANDMARK_MISMATCH)] and "features" in dead[0].detail


def test_a_named_order_is_checked_against_the_version_the_row_follows(tmp_path: Path) -> None:
    """After a refit the landmarks differ: a row naming version 1's ids is placed with the retained version 1 when
    it says so, and refused when it does not (it would be checked against version 2's ids)."""
    v1 = _model(IDS, 1)
    v2 = _model([f"new-{i}" for i in range(N_LANDMARKS)], 2)
    reg = ModelRegistry(v1, retain=2)
    reg.install(v2)
    A = _rows(4, dtype=np.float64)
    recs = [{"id": "says-v1", "dissimilarities": A[0, PERM].tolist(), "landmarks": NAMED, "landmark_version": 1},
            {"id": "says-nothing", "dissimilarities": A[1, PERM].tolist(), "landmarks": NAMED}]
    got, dead = _embed(write_jsonl(tmp_path / "v.jsonl", recs), registry=reg)
    want, _ = _embed(write_jsonl(tmp_path / "p.jsonl", [{"id": "says-v1", "dissimilarities": A[0].tolist()}]), v1)
    assert list(got) == ["says-v1"] and np.array_equal(got["says-v1"][0], want["says-v1"][0])
    assert [(d.id, d.reason) for d in dead] == [("says-nothing", Reason.LANDMARK_MISMATCH)]


def test_a_similarity_row_keeps_its_self_similarity_last(tmp_path: Path) -> None:
    L = landmark_points()
    model = LandmarkMDS(input="similarity").fit_features(L, metric="linear", landmark_ids=IDS).model_
    K = model.dissimilarities_to_landmarks(objects(5))  # (5, n + 1)
    named = np.hstack([K[:, :-1][:, PERM], K[:, -1:]])
    want, _ = _embed(write_parquet(tmp_path / "p.parquet", _table(K)), model)
    got, dead = _embed(write_parquet(tmp_path / "n.parquet", _table(named, field_meta=order_metadata(NAMED))), model)
    assert dead == []
    _same(got, want)


def test_each_order_is_checked_once_and_applied_by_one_gather(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = landmark_order._permutation

    def counting(order: tuple[str, ...], ids: np.ndarray) -> Any:
        calls.append(1)
        return real(order, ids)

    monkeypatch.setattr(landmark_order, "_permutation", counting)
    monkeypatch.setattr(landmark_order, "_CACHE", landmark_order._PermutationCache())
    model = _model()
    A = _rows(100)
    got, dead = _embed(write_parquet(tmp_path / "n.parquet", _table(A[:, PERM], field_meta=order_metadata(NAMED))),
                       model, batch_rows=10)
    assert len(got) == 100 and dead == [] and len(calls) == 1  # 10 batches, one check
    group = np.zeros(5, dtype=np.int64)
    M = np.arange(5 * N_LANDMARKS, dtype=np.float32).reshape(5, N_LANDMARKS)
    perm, _ = landmark_order.permutation(tuple(NAMED), np.asarray(IDS))
    out = landmark_order.apply_orders(M, group, {0: perm})
    assert np.array_equal(out, M[:, perm]) and out.flags.c_contiguous
    assert landmark_order.apply_orders(M, group, {0: None}) is M  # the model's own order: nothing moves
