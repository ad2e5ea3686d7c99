"""Small fitted models and input files shared by the streaming, daemon and e2e tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from scipy.spatial.distance import cdist

N_LANDMARKS = 12
DIMS = 2
P = 3
_STRING = pa.string()


def landmark_points(seed: int = 0) -> np.ndarray:
    """(N_LANDMARKS, P) points; the model is fitted on their Euclidean distances."""
    return np.random.default_rng(seed).standard_normal((N_LANDMARKS, P)) * 3.0


def fitted_model(seed: int = 0, features: bool = False) -> Any:
    """A fitted ``LandmarkMDS`` estimator (``.save`` writes its model file, ``.model_`` is the model)."""
    from streamembed import LandmarkMDS

    L = landmark_points(seed)
    est = LandmarkMDS(n_components=DIMS)
    return est.fit_features(L) if features else est.fit(cdist(L, L))


def fitted(seed: int = 0, features: bool = False) -> Any:
    """The fitted ``LandmarkModel`` the streaming layer works with."""
    return fitted_model(seed, features).model_


def objects(m: int, seed: int = 1) -> np.ndarray:
    """(m, P) new objects near the landmarks."""
    return np.random.default_rng(seed).standard_normal((m, P)) * 3.0


def dissimilarities(Z: np.ndarray, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    """(m, N_LANDMARKS) Euclidean distances of Z to the landmarks of ``fitted_model(seed)``."""
    return cdist(Z, landmark_points(seed)).astype(dtype)


def list_column(A: np.ndarray, fixed: bool = True) -> pa.Array:
    A = np.ascontiguousarray(A)
    values = pa.array(A.reshape(-1))
    if fixed:
        return pa.FixedSizeListArray.from_arrays(values, A.shape[1])
    offsets = pa.array(np.arange(0, A.size + 1, A.shape[1], dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, values)


def input_table(ids: Sequence[str | None], A: np.ndarray, *, fixed: bool = True, cross: np.ndarray | None = None,
                event_time: bool = True) -> pa.Table:
    cols: dict[str, pa.Array] = {"id": pa.array(list(ids), pa.string()), "dissimilarities": list_column(A, fixed)}
    if event_time:
        now = np.datetime64("now", "us")
        cols["event_time"] = pa.array(np.full(len(ids), now)).cast(pa.timestamp("us", tz="UTC"))
    if cross is not None:
        cols["cross"] = list_column(cross.astype(A.dtype), fixed)
    return pa.table(cols)


def write_parquet(path: Path, table: pa.Table, row_group_size: int | None = None) -> Path:
    tmp = path.with_name("." + path.name)
    pq.write_table(table, tmp, row_group_size=row_group_size)
    os.replace(tmp, path)
    return path


def write_arrow(path: Path, table: pa.Table, *, file_format: bool = False, chunk: int | None = None) -> Path:
    tmp = path.with_name("." + path.name)
    with pa.OSFile(str(tmp), "wb") as sink:
        w = ipc.new_file(sink, table.schema) if file_format else ipc.new_stream(sink, table.schema)
        for b in table.to_batches(max_chunksize=chunk):
            w.write_batch(b)
        w.close()
    os.replace(tmp, path)
    return path


def write_jsonl(path: Path, records: Sequence[Any], raw_lines: Sequence[bytes] = ()) -> Path:
    tmp = path.with_name("." + path.name)
    with open(tmp, "wb") as f:
        for r in records:
            f.write(json.dumps(r).encode() + b"\n")
        for line in raw_lines:
            f.write(line + b"\n")
    os.replace(tmp, path)
    return path


def read_ids(directory: Path, pattern: str) -> list[str]:
    """Every ``id`` in the Parquet/JSONL files matching ``pattern`` under ``directory``."""
    out: list[str] = []
    for p in sorted(directory.glob(pattern)):
        if p.suffix == ".parquet":
            out.extend(pq.read_table(p, columns=["id"]).column("id").to_pylist())
        else:
            out.extend(json.loads(line)["id"] for line in p.read_text().splitlines() if line)
    return out


def read_dead(directory: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in sorted(directory.glob("dead-*")):
        if p.suffix == ".parquet":
            rows.extend(pq.read_table(p).to_pylist())
        else:
            rows.extend(json.loads(line) for line in p.read_text().splitlines() if line)
    return rows


def drain(src: Any, limit: int = 100) -> list[Any]:
    """Batches from ``src.poll()`` until it returns None (at most ``limit``)."""
    out = []
    for _ in range(limit):
        b = src.poll()
        if b is None:
            break
        out.append(b)
    return out


def blocks_table(sizes: Sequence[int], *, seed: int = 3, singles_between: int = 0, keys: Sequence[Any] | None = None,
                 key_type: pa.DataType = _STRING) -> tuple[pa.Table, np.ndarray, list[np.ndarray]]:
    """A batch of blocks of the given sizes (``block`` column, variable-length ``cross``), with
    ``singles_between`` single objects (null ``block``) after each block.

    Returns (table, A (m, N_LANDMARKS) float64 of every row, the blocks' k×k cross matrices).
    """
    rng = np.random.default_rng(seed)
    ids: list[str] = []
    block: list[Any] = []
    rows_A: list[np.ndarray] = []
    cross_rows: list[list[float] | None] = []
    mats: list[np.ndarray] = []
    keys = list(keys) if keys is not None else [f"blk{b}" if pa.types.is_string(key_type) else b
                                                for b in range(len(sizes))]
    for b, k in enumerate(sizes):
        Z = rng.standard_normal((k, P)) * 3.0
        C = cdist(Z, Z)
        mats.append(C)
        rows_A.append(dissimilarities(Z, dtype=np.float64))
        for i in range(k):
            ids.append(f"b{b}-{i}")
            block.append(keys[b])
            cross_rows.append(C[i].tolist())
        for s in range(singles_between):
            Zs = rng.standard_normal((1, P)) * 3.0
            rows_A.append(dissimilarities(Zs, dtype=np.float64))
            ids.append(f"s{b}-{s}")
            block.append(None)
            cross_rows.append(None)
    A = np.vstack(rows_A)
    table = pa.table({"id": pa.array(ids, pa.string()), "dissimilarities": list_column(A, fixed=False),
                      "cross": pa.array(cross_rows, pa.list_(pa.float64())), "block": pa.array(block, key_type)})
    return table, A, mats


class Crash(Exception):
    """What a test's injected fault raises (nothing in the package catches it specially)."""


class CrashOnCall:
    """Wraps callables so that the ``after``-th call through any of them raises ``Crash(where)`` (a shared count)."""

    def __init__(self, after: int, where: str) -> None:
        self.after, self.where, self.calls = after, where, 0

    def __call__(self, real: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.after:
                raise Crash(self.where)
            return real(*args, **kwargs)
        return wrapped


def assert_each_id_once(out: Path, ids: set[str]) -> None:
    """Every input id is in the output (``out/emb``) or the dead letters (``out/dead``), and exactly once."""
    from collections import Counter

    seen = Counter(read_ids(out / "emb", "*.parquet") + [d["id"] for d in read_dead(out / "dead")])
    assert set(seen) == ids
    assert all(c == 1 for c in seen.values()), {k: c for k, c in seen.items() if c > 1}
