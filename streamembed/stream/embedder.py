"""One batch through the model: decode/validate -> embed -> encode, where every record ends embedded or dead.

This is the one place the streaming layer's rule is enforced: **a record can
only ever be embedded or dead-lettered**. Whatever a batch raises while it is
decoded, embedded or encoded (a ``RecursionError``, a ``KeyError`` from a
strange schema, a ``MemoryError`` from a bounded allocation, a bug) is
contained to the records that cause it: the batch is split in halves and each
half retried, down to single records, so one poison record costs only itself
and becomes an ``embed_failed`` dead letter with the exception and the record.
A block (rows placed jointly, ``stream.blocks``) is never split: it fails whole.

Shared by the daemon and the one-shot ``streamembed embed`` (one loop).
Whole-batch operations only; per-row Python runs for rejected rows alone.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

import numpy as np
import pyarrow as pa

from streamembed.core import runtime
from streamembed.core.options import DEFAULTS, MAX_BLOCK_ROWS
from streamembed.core.flags import FLAG_RETAINED_MODEL, flag_names
from streamembed.core.model import LandmarkModel
from streamembed.core.place.methods import block_refusal
from streamembed.core.result import EmbeddingResult
from streamembed.core.inputs.metrics import MetricError
from streamembed.core.inputs.validation import Problem
from streamembed.stream.arrow_build import numeric
from streamembed.stream.blocks import Blocks, block_units
from streamembed.stream.codecs import DeadRecord, DecodedBatch, decode_batch, encode_result, row_as_json, split_valid
from streamembed.stream.registry import ModelRegistry
from streamembed.stream.origin import NO_ORIGIN, RowOrigin
from streamembed.stream.output import DEFAULT_OUTPUT_VERSION, OUTPUT_VERSIONS
from streamembed.stream.objects import ObjectSpec
from streamembed.stream.unversioned import START, UnversionedRule
from streamembed.stream.records import INPUT_FEATURES, INPUT_OBJECT, REASONS, Reason

__all__ = ["BatchEmbedder", "Processed", "bit_names"]

log = logging.getLogger("streamembed.embedder")


def bit_names() -> list[str]:
    """Name of each of the 32 flag bits (``bitN`` for bits the core does not name)."""
    names: list[str] = []
    for b in range(32):
        got = list(flag_names(1 << b))
        names.append(str(got[0]) if got else f"bit{b}")
    return names


@dataclass
class Processed:
    """What one input batch became: output rows, dead letters, and the core's results behind the output."""

    output: pa.RecordBatch | None = None
    dead: list[DeadRecord] = field(default_factory=list)
    results: list[EmbeddingResult] = field(default_factory=list)

    @property
    def n_out(self) -> int:
        return 0 if self.output is None else self.output.num_rows

    def extend(self, other: Processed) -> None:
        if other.output is not None and other.output.num_rows:
            self.output = other.output if self.output is None else pa.Table.from_batches(
                [self.output, other.output]).combine_chunks().to_batches()[0]
        self.dead.extend(other.dead)
        self.results.extend(other.results)


class BatchEmbedder:
    """Embeds input batches with the models of a :class:`ModelRegistry`.

    ``method`` is used for single objects; the blocks of a batch
    (``stream.blocks``) are placed by block restricted reconstruction, all of
    them in one solver call (dead-lettered as ``bad_block`` under a method whose
    placements are convex combinations, ``kernel``: ``methods.block_refusal``). ``k0_rows`` is passed to
    ``LandmarkModel.place`` (None, "all" or a count). Rows whose
    ``landmark_version`` names a retained older model are embedded with it and
    flagged ``retained_model``; ``monitor`` (a ``monitors.drift.DriftMonitor``),
    when given, sees every batch embedded with the current model. The
    iterative methods get ``max_batch_seconds`` of wall time per batch
    (``core.runtime``: rows still iterating then keep their best placement and
    the ``not_converged`` flag); ``cancelled`` (e.g. the daemon's stop event)
    interrupts them with ``runtime.Cancelled``, leaving the batch unprocessed.
    ``consistency`` (a ``monitors.consistency.ConsistencyMonitor``), when given,
    scores the dissimilarity rows embedded with the current model.
    ``output_version`` is the output record format (:mod:`streamembed.stream.output`: 2, or 1 on request);
    version 2 writes its numbers in ``output_dtype``, or when None in the precision of each batch's rows.
    ``objects`` says what the metric takes when rows carry an ``object`` (``stream.objects``; None: the
    model's own metric, if it has one): rows without dissimilarities are placed from their objects (a metric
    that fails dead-letters the rows it failed on, ``metric_failed``), and with a monitor the objects of rows
    that carry dissimilarities too feed its refit reservoir. ``unversioned_rows`` is the version a dissimilarity
    row that states no ``landmark_version`` and names no landmarks is read as once the registry serves another
    current version (``stream.unversioned``; None: refused as ``ambiguous_landmarks``; by default the version
    the embedder started with, ``started_version``, default ``model``'s).
    """

    def __init__(self, model: LandmarkModel, *, method: str = DEFAULTS["method"], k0_rows: None | str | int = None,
                 max_block_rows: int = MAX_BLOCK_ROWS, registry: ModelRegistry | None = None, monitor: Any = None,
                 max_batch_seconds: float | None = None, cancelled: Any = None, consistency: Any = None,
                 output_version: int = DEFAULT_OUTPUT_VERSION, output_dtype: Any = None,
                 objects: ObjectSpec | None = None, unversioned_rows: int | None | str = START,
                 started_version: int | None = None) -> None:
        if output_version not in OUTPUT_VERSIONS:
            raise ValueError(f"output schema version must be one of {OUTPUT_VERSIONS}, got {output_version!r}")
        self.registry = registry if registry is not None else ModelRegistry(model, retain=0)
        self.max_batch_seconds = max_batch_seconds
        self.cancelled = cancelled
        self.method = method
        # a string other than "all" is refused by the placement, batch by batch, as before
        self.k0_rows = cast("None | Literal['all'] | int", k0_rows)
        self.max_block_rows = max_block_rows
        self.monitor = monitor
        self.consistency = consistency
        self.bit_names = bit_names()
        self.output_version = int(output_version)
        self.output_dtype = None if output_dtype is None else np.dtype(output_dtype)
        self.objects = objects
        self.start_version = int(model.version if started_version is None else started_version)
        self.unversioned_rows = self.start_version if unversioned_rows == START else unversioned_rows

    @property
    def model(self) -> LandmarkModel:
        return self.registry.current

    @property
    def model_version(self) -> int:
        return self.registry.current_version

    def process(self, table: pa.Table | pa.RecordBatch, *, origin: RowOrigin = NO_ORIGIN) -> Processed:
        """Output rows and dead letters for one input batch; never raises for what the batch holds.

        ``origin``: where the rows come from (their ``file`` and ``row`` in dead letters).
        """
        try:
            with runtime.limit(self.max_batch_seconds, self.cancelled):
                return self._process(table, origin)
        except Exception as exc:  # the rule: contained to the records that cause it
            m = table.num_rows
            units = block_units(table)  # where a piece that cannot be split (a block, or one row) begins
            if units.size <= 1:
                log.error("embedding failed on %s %d record(s); they go to the dead letters",
                          "a block of" if m > 1 else "", m, exc_info=True)
                detail = f"{type(exc).__name__}: {exc}"[:1000]
                idx = np.arange(m)
                return Processed(dead=_dead_rows(table, idx, _ids_or_none(table, m), [detail] * m, origin,
                                                 Reason.EMBED_FAILED))
            half = int(units[units.size // 2])
            out = Processed()
            for lo, hi in ((0, half), (half, m)):
                out.extend(self.process(table.slice(lo, hi - lo), origin=origin.slice(lo, hi)))
            return out

    def _process(self, table: pa.Table | pa.RecordBatch, origin: RowOrigin) -> Processed:
        current = self.registry.current_version
        model = self.registry.current
        n_features = None if model.features is None or model.has_objects else int(model.features.shape[1])
        versions = self.registry.versions()
        ids = {v: got.landmark_ids for v in versions if (got := self.registry.get(v)) is not None}
        dec = decode_batch(table, n_landmarks=model.input_width, n_features=n_features, model_version=current,
                           accepted_versions=versions, origin=origin,
                           max_block_rows=self.max_block_rows, landmark_ids=ids, objects=self._object_spec(model),
                           keep_objects=self.monitor is not None and getattr(self.monitor, "keeps_objects", False),
                           unversioned=self._unversioned(current))
        out = Processed(dead=dec.dead)
        if dec.matrix.shape[0] == 0:
            return out
        groups = _version_groups(dec.versions, current)
        if dec.versions is not None and dec.blocks is not None:
            dec = self._refuse_mixed_blocks(table, dec, out, origin)
            groups = _version_groups(dec.versions, current)
        for version, sel in groups:
            out.extend(self._embed_group(table, dec, version, sel, origin))
        return out

    def _unversioned(self, current: int) -> UnversionedRule | None:
        """The rule for unversioned rows once the current version is not the one they are read as."""
        v = self.unversioned_rows
        if current == self.start_version or (v is not None and int(v) == current):
            return None  # one version so far (or they are read as the current one): nothing is ambiguous
        return UnversionedRule(None if v is None else int(v), current, self.registry.retain)

    def _object_spec(self, model: LandmarkModel) -> ObjectSpec | None:
        """What the metric takes: the configured spec (its placeability from the served model), else the model's
        own metric when it was fitted from objects or feature vectors."""
        placeable = model.features is not None
        if self.objects is not None:
            return replace(self.objects, placeable=placeable)
        if model.features is None or model.metric is None or model.input_kind == "similarity":
            return None
        return model.cached(("object-spec",), lambda: _spec_of(model))

    def _metric(self, model: LandmarkModel) -> Any:
        """The model's metric with the deployment's longest object (``[metric] max_object_length``)."""
        spec = self._object_spec(model)
        if spec is None:
            return None
        return model.cached(("metric", spec.metric, spec.max_length), lambda: _with_limit(spec))

    def _refuse_mixed_blocks(self, table: pa.Table | pa.RecordBatch, dec: DecodedBatch, out: Processed,
                             origin: RowOrigin) -> DecodedBatch:
        """Dead-letter the blocks whose members follow different landmark versions; the rest of ``dec``."""
        assert dec.blocks is not None and dec.versions is not None
        b = dec.blocks
        v = dec.versions[b.rows]
        first = np.concatenate([[0], np.cumsum(b.sizes)[:-1]]).astype(np.int64)
        lo, hi = np.minimum.reduceat(v, first), np.maximum.reduceat(v, first)
        mixed = np.repeat(lo != hi, b.sizes)
        if not mixed.any():
            return dec
        bad = b.rows[mixed]
        out.dead.extend(_dead_rows(table, dec.index[bad], dec.ids.take(numeric(bad)),
                                   ["block members follow different landmark versions"] * bad.size, origin,
                                   Reason.BAD_BLOCK))
        keep = np.ones(dec.matrix.shape[0], dtype=bool)
        keep[bad] = False
        pos = np.flatnonzero(keep)
        blocks = b.within(pos) if (lo == hi).any() else None
        take = numeric(pos)
        return replace(dec, ids=dec.ids.take(take), matrix=dec.matrix[pos], event_time=dec.event_time.take(take),
                       index=dec.index[pos], versions=dec.versions[pos], blocks=blocks)

    def _embed_group(self, table: pa.Table | pa.RecordBatch, dec: DecodedBatch, version: int,
                     sel: np.ndarray | None, origin: RowOrigin) -> Processed:
        """Embed the decoded rows ``sel`` (None: all) with model ``version``: single objects by the configured
        method, the blocks among them by block RR, all blocks in one solver call."""
        model = self.registry.get(version)
        assert model is not None
        if dec.blocks is None:  # the common case: every row a single object, no copies
            return self._place(model, version, table, dec, sel, None, origin)
        pos = np.arange(dec.matrix.shape[0]) if sel is None else sel
        blocks = dec.blocks.within(pos)
        out = Processed()
        if blocks.rows.size < pos.size:
            singles = pos[~blocks.member_mask(pos.size)]
            out.extend(self._place(model, version, table, dec, singles, None, origin))
        refusal = block_refusal(self.method)
        if blocks.sizes.size and refusal is not None:  # a convex method's promise holds for every row it writes
            rows = pos[blocks.rows]
            out.dead.extend(_dead_rows(table, dec.index[rows], dec.ids.take(numeric(rows)), [refusal] * rows.size,
                                       origin, Reason.BAD_BLOCK))
        elif blocks.sizes.size:
            out.extend(self._place(model, version, table, dec, pos[blocks.rows], blocks, origin))
        return out

    def _place(self, model: LandmarkModel, version: int, table: pa.Table | pa.RecordBatch, dec: DecodedBatch,
               sel: np.ndarray | None, blocks: Blocks | None, origin: RowOrigin) -> Processed:
        """Place the accepted rows ``sel`` (None: all; blocks: the members of ``blocks``, in block order)."""
        retained = version != self.registry.current_version
        A, ids, event_time, index = dec.matrix, dec.ids, dec.event_time, dec.index
        if sel is not None:
            take = numeric(sel)
            A, ids, event_time, index = A[sel], ids.take(take), event_time.take(take), index[sel]
        features = A if dec.kind == INPUT_FEATURES else None
        objects = None if dec.objects is None else (dec.objects if sel is None else dec.objects[sel])
        if features is not None:
            A = model.dissimilarities_to_landmarks(features)
        elif dec.kind == INPUT_OBJECT:
            try:
                A = model.dissimilarities_to_landmarks(objects, metric=self._metric(model))
            except MetricError as exc:  # the metric's own failure: these rows, with its message (not the daemon)
                return Processed(dead=_dead_rows(table, index, ids, [str(exc)[:1000]] * len(index), origin,
                                                 Reason.METRIC_FAILED))
        if blocks is None:
            res = model.place(A, None, method=self.method, k0_rows=self.k0_rows, errors="mask")
        else:
            res = model.place_blocks(A, blocks.cross, blocks.sizes, k0_rows=self.k0_rows, errors="mask",
                                     max_block_rows=self.max_block_rows)
        out = Processed()
        valid = np.asarray(res.valid, dtype=bool)
        if not valid.all():
            good, bad = split_valid(valid)
            problems = [res.reasons[i] for i in bad.tolist()]
            out.dead.extend(_dead_rows(table, index[bad], ids.take(numeric(bad)), problems, origin, None))
            if good.size == 0:
                return out
            res = res.take(good)
            ids, event_time = ids.take(numeric(good)), event_time.take(numeric(good))
            A = A[good]
            if features is not None:
                features = features[good]
            if objects is not None:
                objects = objects[good]
        if retained:
            res.flags = res.flags | FLAG_RETAINED_MODEL
        else:
            if self.consistency is not None and features is None and dec.kind != INPUT_OBJECT:
                self.consistency.observe(model, A, file=origin.file, flags=res.flags)
            if self.monitor is not None:
                extra = {} if objects is None else {"objects": objects}
                self.monitor.observe(A, res, ids=ids, features=features,
                                     block=None if blocks is None else _last_whole_block(blocks, valid, A, ids),
                                     **extra)
        out.output = encode_result(ids, res, model_version=version, event_time=event_time,
                                   processed_at_us=time.time_ns() // 1000, bit_names=self.bit_names,
                                   version=self.output_version,
                                   dtype=dec.matrix.dtype if self.output_dtype is None else self.output_dtype,
                                   lineage=model.lineage)
        out.results.append(res)
        return out


def _with_limit(spec: ObjectSpec) -> Any:
    from streamembed.core.inputs.metrics import resolve_metric

    return replace(resolve_metric(spec.metric), max_length=spec.max_length)


def _spec_of(model: LandmarkModel) -> ObjectSpec:
    from streamembed.core.inputs.metrics import resolve_metric

    metric = resolve_metric(str(model.metric))
    spec = ObjectSpec(metric.name, metric.takes, placeable=True)
    return spec if metric.max_length is None else replace(spec, max_length=metric.max_length)


def _last_whole_block(blocks: Blocks, valid: np.ndarray, A_valid: np.ndarray,
                      ids_valid: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray] | None:
    """(A rows, ids, cross) of the last block placed whole: the drift monitor's refit candidates."""
    ends = np.cumsum(blocks.sizes)
    ok_block = np.logical_and.reduceat(valid, ends - blocks.sizes) if valid.size else np.zeros(0, bool)
    whole = np.flatnonzero(ok_block)
    if whole.size == 0:
        return None
    b = int(whole[-1])
    k = int(blocks.sizes[b])
    # rows of valid blocks before b, in the valid-only arrays
    before = int(valid[:ends[b] - k].sum())
    return A_valid[before:before + k], ids_valid.slice(before, k), blocks.cross[b]


def _ids_or_none(table: pa.Table | pa.RecordBatch, m: int) -> pa.Array:
    try:
        names = table.schema.names
        if names.count("id") == 1:
            col = table.column(names.index("id"))
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            if pa.types.is_string(col.type):
                col.validate(full=True)
                return col
    except Exception:  # a dead letter must still be written
        pass
    return pa.nulls(m, pa.string())


def _dead_rows(table: pa.Table | pa.RecordBatch, index: np.ndarray, ids: pa.Array,
               details: list[Problem | str | None], origin: RowOrigin, reason: str | None) -> list[DeadRecord]:
    """Dead letters for accepted rows the core refused (a loop over those rows only).

    ``details`` are the core's Problems (their code is the reason) or, with
    ``reason`` given, texts.
    """
    out = []
    for j, (i, rid) in enumerate(zip(index.tolist(), ids.to_pylist(), strict=True)):
        detail = details[j]
        code = reason or (Reason(detail.code) if isinstance(detail, Problem) and str(detail.code) in REASONS
                          else Reason.REJECTED)
        out.append(DeadRecord(code, None if detail is None else str(detail), id=rid, file=origin.file,
                              row=origin.row(i), record=row_as_json(table, i)))
    return out


def _version_groups(versions: np.ndarray | None, current: int) -> list[tuple[int, np.ndarray | None]]:
    """(landmark version, its rows of the batch, None: all) for the row ``versions`` (None: all ``current``)."""
    if versions is None:
        return [(current, None)]
    return [(int(v), np.flatnonzero(versions == v)) for v in np.unique(versions)]
