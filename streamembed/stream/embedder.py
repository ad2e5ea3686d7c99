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

from streamembed.core.validation import Problem
from streamembed.stream.codecs import DeadRecord, decode_batch, encode_result, row_as_json, split_valid
from streamembed.core.flags import FLAG_RETAINED_MODEL
from streamembed.stream.models import ModelRegistry
from streamembed.stream.records import INPUT_FEATURES, REASONS, Reason

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
    """Embeds input batches with the models of a :class:`ModelRegistry`.

    ``method`` is used for single objects, ``block_method`` for a batch that
    carries ``cross`` (the core's block RR). ``k0_rows`` is passed to
    ``embed`` (None, "all" or a count). Rows whose ``landmark_version`` names
    a retained older model are embedded with it and flagged
    ``retained_model``; ``monitor`` (a ``stream.monitor.DriftMonitor``), when
    given, sees every batch embedded with the current model.
    """

    def __init__(self, estimator: Any, *, method: str = "projection", block_method: str = "restricted",
                 k0_rows: None | str | int = None, max_block_rows: int = 4096,
                 registry: ModelRegistry | None = None, monitor: Any = None) -> None:
        self.registry = registry if registry is not None else ModelRegistry(estimator, retain=0)
        self.method = method
        self.block_method = block_method
        self.k0_rows = k0_rows
        self.max_block_rows = max_block_rows
        self.monitor = monitor
        self.bit_names = bit_names()

    @property
    def est(self) -> Any:
        return self.registry.current

    @property
    def model_version(self) -> int:
        return self.registry.current_version

    @property
    def n_landmarks(self) -> int:
        """Width of a direct input row: n, or n + 1 for a similarity model (k(z, z) last)."""
        return int(self.est.input_width)

    @property
    def n_features(self) -> int | None:
        feats = self.est.features
        return None if feats is None else int(feats.shape[1])

    def process(self, table: pa.Table | pa.RecordBatch, *, file: str | None = None,
                rows: np.ndarray | None = None, row_base: int = 0) -> tuple[pa.RecordBatch | None, list[DeadRecord]]:
        """(output rows or None, dead letters) for one input batch.

        Row i of ``table`` is row ``rows[i]`` (or ``row_base + i``) of ``file``.
        """
        current = self.registry.current_version
        dec = decode_batch(table, n_landmarks=self.n_landmarks, n_features=self.n_features,
                           model_version=current, accepted_versions=self.registry.versions(), file=file, rows=rows,
                           row_base=row_base, max_block_rows=self.max_block_rows)
        dead = dec.dead
        if dec.matrix.shape[0] == 0:
            return None, dead
        if dec.versions is None:
            groups: list[tuple[int, np.ndarray | None]] = [(current, None)]
        else:
            groups = [(int(v), np.flatnonzero(dec.versions == v)) for v in np.unique(dec.versions)]
            if dec.cross is not None and len(groups) > 1:
                detail = "block members follow different landmark versions"
                dead.extend(self._dead_rows(table, dec.index, dec.ids, [detail] * len(dec.index), file, rows,
                                            row_base, Reason.BAD_BLOCK))
                return None, dead
        outs = []
        for version, sel in groups:
            out = self._embed_group(table, dec, version, sel, dead, file, rows, row_base)
            if out is not None:
                outs.append(out)
        if not outs:
            return None, dead
        if len(outs) == 1:
            return outs[0], dead
        return pa.Table.from_batches(outs).combine_chunks().to_batches()[0], dead

    def _embed_group(self, table: pa.Table | pa.RecordBatch, dec: Any, version: int, sel: np.ndarray | None,
                     dead: list[DeadRecord], file: str | None, rows: np.ndarray | None,
                     row_base: int) -> pa.RecordBatch | None:
        """Embed the decoded rows ``sel`` (None: all) with model ``version``; extends ``dead``."""
        est = self.registry.get(version)
        retained = version != self.registry.current_version
        A, ids, event_time, index = dec.matrix, dec.ids, dec.event_time, dec.index
        if sel is not None:
            take = pa.array(sel)
            A, ids, event_time, index = A[sel], ids.take(take), event_time.take(take), index[sel]
        features = A if dec.kind == INPUT_FEATURES else None
        if features is not None:
            A = est.dissimilarities_to_landmarks(features)
        method = self.block_method if dec.cross is not None else self.method
        try:
            res = est.place(A, dec.cross, method=method, k0_rows=self.k0_rows, errors="mask")
        except Exception as exc:  # noqa: BLE001 - a daemon must survive a bad batch
            log.exception("embedding failed; the batch goes to the dead letters")
            detail = f"{type(exc).__name__}: {exc}"
            dead.extend(self._dead_rows(table, index, ids, [detail] * len(index), file, rows, row_base,
                                        Reason.EMBED_FAILED))
            return None
        valid = np.asarray(res.valid, dtype=bool)
        if not valid.all():
            good, bad = split_valid(valid)
            problems = [res.reasons[i] for i in bad.tolist()]
            dead.extend(self._dead_rows(table, index[bad], ids.take(pa.array(bad)), problems, file, rows,
                                        row_base, None))
            if good.size == 0:
                return None
            res = res.take(good)
            ids, event_time = ids.take(pa.array(good)), event_time.take(pa.array(good))
            A = A[good]
            if features is not None:
                features = features[good]
        if retained:
            res.flags = res.flags | FLAG_RETAINED_MODEL
        elif self.monitor is not None:
            self.monitor.observe(A, res, ids=ids, cross=dec.cross if valid.all() else None, features=features)
        return encode_result(ids, res, model_version=version, event_time=event_time,
                             processed_at_us=time.time_ns() // 1000, bit_names=self.bit_names)

    @staticmethod
    def _dead_rows(table: pa.Table | pa.RecordBatch, index: np.ndarray, ids: pa.Array,
                   details: list[Problem | str | None], file: str | None, rows: np.ndarray | None, row_base: int,
                   reason: str | None) -> list[DeadRecord]:
        """Dead letters for accepted rows the core refused (a loop over those rows only).

        ``details`` are the core's Problems (their code is the reason) or, with
        ``reason`` given, texts.
        """
        out = []
        for j, (i, rid) in enumerate(zip(index.tolist(), ids.to_pylist())):
            row = int(rows[i]) if rows is not None else row_base + i
            detail = details[j]
            code = reason or (detail.code if isinstance(detail, Problem) and detail.code in REASONS
                              else Reason.REJECTED)
            out.append(DeadRecord(code, None if detail is None else str(detail), id=rid, file=file, row=row,
                                  record=row_as_json(table, i)))
        return out
