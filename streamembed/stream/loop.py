"""The streaming loop: source -> decode/validate -> embed -> encode -> sinks -> checkpoint.

One thread, one batch at a time, whole-batch operations only. Ordering is
what makes a crash harmless:

1. a batch's embedded rows and dead letters are written to the sinks'
   temporary files;
2. when a roll is due (``roll_rows`` rows or ``roll_seconds`` since the first
   unflushed row, the source has nothing new, or the loop is stopping) both
   sinks publish atomically under a name derived from the roll's first input
   position;
3. only then the checkpoint is committed with the position of the last batch.

After a crash the engine restarts from the last checkpoint, so at most the
batches since that commit are processed again, and their files are rewritten
under the same names: every input id ends up in the output or the dead
letters, with duplicates only when input positions changed between runs.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamembed.stream.checkpoint import Checkpoint, CheckpointStore
from streamembed.stream.codecs import DeadRecord
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.sinks import DeadLetterSink, ParquetSink
from streamembed.stream.sources import Source, SourceBatch

__all__ = ["LoopSettings", "LoopStats", "EmbeddingLoop"]

log = logging.getLogger("streamembed.loop")


@dataclass
class LoopSettings:
    """How the loop embeds and when it rolls files (see the config reference)."""

    method: str = "projection"
    block_method: str = "restricted"
    k0_rows: None | str | int = None
    max_batches: int = 0
    max_records: int = 0
    roll_rows: int = 100_000
    roll_seconds: float = 10.0
    max_block_rows: int = 4096
    max_idle_sleep: float = 1.0


@dataclass
class LoopStats:
    """Counts of one run (batches: those with at least one record)."""

    batches: int = 0
    records_in: int = 0
    embedded: int = 0
    dead: int = 0
    commits: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


class EmbeddingLoop:
    """Runs ``source`` through ``estimator`` into ``output`` and ``dead`` sinks.

    ``metrics`` (a :class:`streamembed.daemon.metrics.Metrics`) and ``health``
    (a :class:`streamembed.daemon.health.HealthState`) are optional. Setting
    ``stop`` ends the loop after the current batch, with a final flush and
    commit.
    """

    def __init__(
        self,
        estimator: Any,
        source: Source,
        output: ParquetSink,
        dead: DeadLetterSink,
        checkpoints: CheckpointStore,
        *,
        settings: LoopSettings | None = None,
        metrics: Any = None,
        health: Any = None,
        stop: threading.Event | None = None,
        registry: Any = None,
        monitor: Any = None,
        between_batches: Any = None,
    ) -> None:
        self.est = estimator
        self.source = source
        self.output = output
        self.dead = dead
        self.checkpoints = checkpoints
        self.settings = settings or LoopSettings()
        self.metrics = metrics
        self.health = health
        self.stop = stop or threading.Event()
        self.between_batches = between_batches
        self.stats = LoopStats()
        s = self.settings
        self.embedder = BatchEmbedder(estimator, method=s.method, block_method=s.block_method,
                                      k0_rows=s.k0_rows, max_block_rows=s.max_block_rows,
                                      registry=registry, monitor=monitor)
        self._sources_state: dict[str, Any] = {}
        self._position: Any = None
        self._roll_label: str | None = None
        self._uncommitted = False

    @property
    def model_version(self) -> int:
        return self.embedder.model_version

    # ------------------------------------------------------------------ restore
    def restore(self) -> None:
        """Load the checkpoint (if any) and resume the source from it."""
        ckpt = self.checkpoints.load()
        if ckpt is None:
            return
        self._sources_state = dict(ckpt.sources)
        state = ckpt.sources.get(self.source.name)
        if state is not None:
            self.source.restore(state)
            log.info("resuming from checkpoint", extra={"source": self.source.name, "position": state})

    # --------------------------------------------------------------------- run
    def run(self) -> LoopStats:
        """Process batches until stopped, limits reached or the source is exhausted."""
        s = self.settings
        self._set_state("running")
        try:
            while not self.stop.is_set():
                self._beat()
                if self.between_batches is not None:
                    self.between_batches()
                if s.max_batches and self.stats.batches >= s.max_batches:
                    break
                if s.max_records and self.stats.records_in >= s.max_records:
                    break
                batch = self.source.poll()
                if batch is None:
                    # caught up with the input (not merely rate-limited): publish now
                    if self._uncommitted and (getattr(self.source, "caught_up", True) or self._roll_due()):
                        self.commit()
                    if self.source.exhausted:
                        break
                    wait = min(self.source.wait_hint(), s.max_idle_sleep)
                    if wait > 0:
                        self.stop.wait(wait)
                    continue
                self.handle(batch)
                if self._roll_due():
                    self.commit()
            self._set_state("stopping")
            if self._uncommitted:
                self.commit()
        finally:
            self._set_state("stopped")
        return self.stats

    def _roll_due(self) -> bool:
        s = self.settings
        rows = self.output.pending_rows + self.dead.pending_rows
        age = max(self.output.pending_age, self.dead.pending_age)
        return rows >= s.roll_rows or age >= s.roll_seconds

    def commit(self) -> None:
        """Publish both sinks' files, then commit the checkpoint.

        A source that keeps its own positions (``commit``, e.g. Kafka: the
        consumer group's offsets) commits them instead of the checkpoint file.
        """
        label = self._roll_label or "empty"
        out_path = self.output.flush(label)
        dead_path = self.dead.flush(label)
        commit_source = getattr(self.source, "commit", None)
        if commit_source is not None:
            commit_source(self._position)
        else:
            self._sources_state[self.source.name] = self._position
            self.checkpoints.save(Checkpoint(sources=self._sources_state, model_version=self.model_version))
        self.stats.commits += 1
        self._roll_label, self._uncommitted = None, False
        if self.metrics is not None:
            self.metrics.checkpoints.inc()
            if out_path is not None:
                self.metrics.files_written.labels(kind="output").inc()
            if dead_path is not None:
                self.metrics.files_written.labels(kind="dead_letter").inc()
        log.debug("committed", extra={"output": str(out_path), "dead": str(dead_path)})

    # ------------------------------------------------------------------- batch
    def handle(self, batch: SourceBatch) -> None:
        """Process one batch and hand its rows to the sinks (not yet durable)."""
        t0 = time.perf_counter()
        if self._roll_label is None:
            self._roll_label = batch.label
        dead = list(batch.dead)
        out: pa.RecordBatch | None = None
        if batch.table is not None and batch.table.num_rows:
            out, more = self.embedder.process(batch.table, file=batch.file, rows=batch.rows,
                                              row_base=batch.row_base)
            dead.extend(more)
        if out is not None and out.num_rows:
            self.output.write(out, self._roll_label)
        if dead:
            self.dead.write(dead, self._roll_label, model_version=self.model_version, source=self.source.name)
        self._position = batch.position
        self._uncommitted = True
        n_out = 0 if out is None else out.num_rows
        if batch.n_records:  # end-of-file markers do not count towards max_batches
            self.stats.batches += 1
        self.stats.records_in += batch.n_records
        self.stats.embedded += n_out
        self.stats.dead += len(dead)
        for r in dead:
            self.stats.reasons[r.reason] = self.stats.reasons.get(r.reason, 0) + 1
        if self.metrics is not None:
            self._observe(batch, out, dead, time.perf_counter() - t0)

    # ----------------------------------------------------------------- metrics
    def _observe(self, batch: SourceBatch, out: pa.RecordBatch | None, dead: list[DeadRecord],
                 seconds: float) -> None:
        m = self.metrics
        m.records_in.inc(batch.n_records)
        if dead:
            m.dead_letters.inc(len(dead))
            counts: dict[str, int] = {}
            for r in dead:
                counts[r.reason] = counts.get(r.reason, 0) + 1
            for reason, c in counts.items():
                m.records_failed.labels(reason=reason).inc(c)
        if out is not None and out.num_rows:
            methods = out.column("method")
            m.records_embedded.labels(method=methods[0].as_py()).inc(out.num_rows)
            processed = out.column("processed_at")[0].value  # microseconds
            et = pc.cast(out.column("event_time"), pa.int64()).to_numpy(zero_copy_only=False)  # NaN: no event_time
            m.latency.observe_many((processed - et.astype(np.float64)) / 1e6)
            beta = out.column("beta").to_numpy()
            unexplained = out.column("unexplained").to_numpy()
            with np.errstate(divide="ignore", invalid="ignore"):
                m.relative_unexplained.observe_many(np.where(beta > 0, unexplained / beta, np.nan))
            flags = out.column("flags")
            if flags.offsets[-1].as_py() > flags.offsets[0].as_py():
                vc = pc.value_counts(flags.flatten())
                for item in vc.to_pylist():
                    m.flags.labels(flag=item["values"]).inc(item["counts"])
        m.batch_seconds.observe(seconds)
        m.last_batch.set(time.time())

    # ------------------------------------------------------------------ health
    def _beat(self) -> None:
        if self.health is not None:
            self.health.beat()

    def _set_state(self, state: str) -> None:
        if self.health is not None:
            self.health.set_state(state)
