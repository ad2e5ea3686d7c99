"""One batch through the model: decode/validate -> embed -> encode.

Shared by the streaming loop and the one-shot ``streamembed embed``. Whole
batch operations only; per-row Python runs for rejected rows alone.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import pyarrow as pa

from streamembed.stream.codecs import (
    DeadRecord,
    decode_batch,
    encode_result,
    reason_from_core,
    row_as_json,
    split_valid,
    take_result,
)
from streamembed.stream.records import INPUT_FEATURES, Reason

__all__ = ["BatchEmbedder", "bit_names"]

log = logging.getLogger("streamembed.embedder")


def bit_names() -> list[str]:
    """Name of each of the 32 flag bits (``bitN`` for bits the core does not name)."""
    from streamembed.core.flags import flag_names

    names: list[str] = []
    for b in range(32):
        got = list(flag_names(1 << b))
        names.append(str(got[0]) if got else f"bit{b}")
    return names


class BatchEmbedder:
    """Embeds input batches with a fitted ``LandmarkMDS``.

    ``method`` is used for single objects, ``block_method`` for a batch that
    carries ``cross`` (the core's block RR). ``k0_rows`` is passed to
    ``embed`` (None, "all" or a count).
    """

    def __init__(self, estimator: Any, *, method: str = "projection", block_method: str = "restricted",
                 k0_rows: None | str | int = None, max_block_rows: int = 4096) -> None:
        self.est = estimator
        self.method = method
        self.block_method = block_method
        self.k0_rows = k0_rows
        self.max_block_rows = max_block_rows
        self.model_version = int(getattr(estimator, "model_version_", 1))
        feats = getattr(estimator, "landmark_features_", None)
        self.n_features: int | None = None if feats is None else int(np.asarray(feats).shape[1])
        self.n_landmarks = int(estimator.n_landmarks_)
        self.bit_names = bit_names()

    def process(self, table: pa.Table | pa.RecordBatch, *, file: str | None = None,
                rows: np.ndarray | None = None, row_base: int = 0) -> tuple[pa.RecordBatch | None, list[DeadRecord]]:
        """(output rows or None, dead letters) for one input batch.

        Row i of ``table`` is row ``rows[i]`` (or ``row_base + i``) of ``file``.
        """
        dec = decode_batch(table, n_landmarks=self.n_landmarks, n_features=self.n_features,
                           model_version=self.model_version, file=file, rows=rows, row_base=row_base,
                           max_block_rows=self.max_block_rows)
        dead = dec.dead
        if dec.matrix.shape[0] == 0:
            return None, dead
        A = dec.matrix
        if dec.kind == INPUT_FEATURES:
            A = self.est.dissimilarities_to_landmarks(A)
        method = self.block_method if dec.cross is not None else self.method
        try:
            res = self.est.embed(A, dec.cross, method=method, k0_rows=self.k0_rows, errors="mask")
        except Exception as exc:  # noqa: BLE001 - a daemon must survive a bad batch
            log.exception("embedding failed; the batch goes to the dead letters")
            detail = f"{type(exc).__name__}: {exc}"
            dead.extend(self._dead_rows(table, dec.index, dec.ids, [detail] * len(dec.index), file, rows, row_base,
                                        Reason.EMBED_FAILED))
            return None, dead
        ids, event_time = dec.ids, dec.event_time
        valid = np.asarray(res.valid, dtype=bool)
        if not valid.all():
            good, bad = split_valid(valid)
            reasons = [res.reasons[i] for i in bad.tolist()]
            dead.extend(self._dead_rows(table, dec.index[bad], ids.take(pa.array(bad)), reasons, file, rows,
                                        row_base, None))
            if good.size == 0:
                return None, dead
            res = take_result(res, good)
            ids, event_time = ids.take(pa.array(good)), event_time.take(pa.array(good))
        out = encode_result(ids, res, model_version=self.model_version, event_time=event_time,
                            processed_at_us=time.time_ns() // 1000, bit_names=self.bit_names)
        return out, dead

    @staticmethod
    def _dead_rows(table: pa.Table | pa.RecordBatch, index: np.ndarray, ids: pa.Array, details: list[str | None],
                   file: str | None, rows: np.ndarray | None, row_base: int,
                   reason: str | None) -> list[DeadRecord]:
        """Dead letters for accepted rows the core refused (a loop over those rows only)."""
        out = []
        for j, (i, rid) in enumerate(zip(index.tolist(), ids.to_pylist())):
            row = int(rows[i]) if rows is not None else row_base + i
            out.append(DeadRecord(reason or reason_from_core(details[j]), details[j], id=rid, file=file, row=row,
                                  record=row_as_json(table, i)))
        return out
