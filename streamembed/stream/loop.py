"""The one streaming loop: source -> decode/validate -> embed -> encode -> sinks -> checkpoint.

The daemon and the one-shot ``streamembed embed`` both run this loop; only
their sources, sinks and checkpoint differ. One thread embeds, one batch at a
time, with whole-batch operations only; the source is read ahead on another
thread (``read_ahead.ReadAhead``). The order is what makes a crash harmless:

1. a batch's embedded rows and dead letters are handed to the sinks
   (``BatchEmbedder.process``: every record ends embedded or dead-lettered);
2. when a roll is due (``output.roll_rows`` rows or ``output.roll_seconds``
   since the first unflushed row, the source has nothing new, or the loop is
   stopping) the ``Checkpointer`` flushes the sinks, commits the source's
   positions and writes the checkpoint, in that order.

After a crash the engine restarts from the last checkpoint, so at most the
batches since that commit are processed again, and their files are rewritten
under the same names: rows go to the sinks under the label of the first batch
of the roll - per ``stream`` when the source reads several in parallel (Kafka
partitions, whose interleaving a restart does not reproduce), so that each
label stays a function of the input position. A batch that crashed the process ``run.max_batch_attempts``
times in a row is quarantined (``checkpoint.CrashGuard``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from streamembed.core.runtime import Cancelled, single_blas_thread
from streamembed.core.flags import FLAG_NAMES
from streamembed.config.schema import OutputConfig, RunConfig
from streamembed.stream.arrow_build import to_numpy
from streamembed.stream.checkpoint import Checkpointer, CrashGuard
from streamembed.stream.commit_behind import CommitBehind
from streamembed.stream.codecs import DeadRecord, row_as_json
from streamembed.stream.contracts import Health, LoopMetrics
from streamembed.stream.embedder import BatchEmbedder, Processed
from streamembed.stream.records import Reason
from streamembed.stream.sinks.base import DeadSink, OutputSink
from streamembed.stream.sources import Source, SourceBatch

__all__ = ["LoopStats", "RollPolicy", "EmbeddingLoop"]

log = logging.getLogger("streamembed.loop")

#: Longest sleep while the source has nothing (the loop still beats and polls between batches this often).
MAX_IDLE_SLEEP = 0.5
#: At most one dead-letter WARNING this often (seconds): the first dead letters are reported at once, the
#: counts after them are summed into the next WARNING (or into a last one when the loop stops).
DEAD_LETTER_WARNING_SECONDS = 10.0


@dataclass
class LoopStats:
    """Counts of one run (batches: those with at least one record; dead letters by reason, with the first of each)."""

    batches: int = 0
    records_in: int = 0
    embedded: int = 0
    dead: int = 0
    commits: int = 0
    failed_by_reason: Counter[str] = field(default_factory=Counter)
    first_dead: dict[str, DeadRecord] = field(default_factory=dict)

    def count_dead(self, dead: list[DeadRecord]) -> None:
        self.dead += len(dead)
        for r in dead:
            self.failed_by_reason[r.reason] += 1
            self.first_dead.setdefault(r.reason, r)


@dataclass(frozen=True)
class RollPolicy:
    """When the loop publishes its files and commits: after ``rows`` pending rows or ``seconds`` of age.

    :meth:`at_end` never rolls before the source is exhausted or the loop
    stops (one output file: ``streamembed embed``).
    """

    rows: float = 100_000
    seconds: float = 5.0

    @classmethod
    def of(cls, cfg: OutputConfig) -> RollPolicy:
        """The policy of ``[output]`` (roll_rows, roll_seconds)."""
        return cls(cfg.roll_rows, cfg.roll_seconds)

    @classmethod
    def at_end(cls) -> RollPolicy:
        return cls(math.inf, math.inf)

    def due(self, pending_rows: int, pending_age: float) -> bool:
        return pending_rows >= self.rows or pending_age >= self.seconds


class EmbeddingLoop:
    """Runs ``source`` through ``embedder`` into ``output`` and ``dead`` sinks, committing through ``checkpointer``.

    ``run`` gives the limits (max_batches, max_records) and the progress log
    interval; ``roll`` when to publish (default: ``[output]``'s defaults). ``metrics``
    and ``health`` (``stream.contracts``: the daemon's ``Metrics`` and
    ``HealthState``) are optional. Setting ``stop`` ends the loop after the current batch, with
    a final flush and commit. ``between_batches`` runs before every poll
    (refits, model topic). ``on_batch``, when set, is called with each batch's
    ``Processed`` after its rows went to the sinks (the live map).
    ``warn_dead_letters`` False: no dead-letter WARNINGs (the caller reports them itself).
    ``overlap_commits``: a roll's commit (publish, source commit, checkpoint) runs on a thread while the
    next batches are embedded (``stream.commit_behind``: the same order, one roll in flight); the loop
    waits for it before the next roll and before it returns.
    """

    def __init__(
        self,
        embedder: BatchEmbedder,
        source: Source,
        output: OutputSink,
        dead: DeadSink,
        checkpointer: Checkpointer,
        *,
        run: RunConfig | None = None,
        roll: RollPolicy | None = None,
        metrics: LoopMetrics | None = None,
        health: Health | None = None,
        stop: threading.Event | None = None,
        between_batches: Callable[[], None] | None = None,
        crash_guard: CrashGuard | None = None,
        on_batch: Callable[[Processed], None] | None = None,
        warn_dead_letters: bool = True,
        overlap_commits: bool = False,
    ) -> None:
        self.embedder = embedder
        self.source = source
        self.output = output
        self.dead = dead
        self.checkpointer = checkpointer
        self.run_cfg = run or RunConfig()
        self.roll = roll or RollPolicy.of(OutputConfig())
        self.metrics = metrics
        self.health = health
        self.stop = stop or threading.Event()
        self.between_batches = between_batches
        self.guard = crash_guard or CrashGuard(None)
        self.on_batch = on_batch
        self.stats = LoopStats()
        self._position: Any = None
        self._roll_label: str | None = None
        self._stream_labels: dict[str | None, str] = {}
        self._uncommitted = False
        self._reporter = _Reporter(self.run_cfg.progress_seconds, warn_dead_letters)
        self._behind: CommitBehind[tuple[list[Any], set[str]]] | None = CommitBehind() if overlap_commits else None

    @property
    def model_version(self) -> int:
        return self.embedder.model_version

    # --------------------------------------------------------------------- run
    def run(self) -> LoopStats:
        """Process batches until stopped, limits reached or the source is exhausted."""
        r = self.run_cfg
        self._set_state("running")
        # one BLAS thread while the loop runs: its products are narrow (a batch by d + 1 columns), the loop has
        # threads of its own (read-ahead, the Parquet writer, the projection's workers), and an OpenBLAS worker
        # woken by a product spins for a while after it (5 % of embed's CPU); refits run in processes of their own
        with single_blas_thread():
            return self._run_batches(r)

    def _run_batches(self, r: RunConfig) -> LoopStats:
        """``run``'s body: poll, handle and commit until stopped, the limits ``r`` reached or the source exhausted."""
        try:
            while not self.stop.is_set():
                if self._behind is not None and self._behind.done:  # counted, and its error raised, at once
                    self._wait_commit()
                self._beat()
                if self.between_batches is not None:
                    self.between_batches()
                if r.max_batches and self.stats.batches >= r.max_batches:
                    break
                if r.max_records and self.stats.records_in >= r.max_records:
                    break
                batch = self.source.poll()
                self._report()
                if batch is None:
                    # caught up with the input (not merely rate-limited): publish now
                    if self._uncommitted and (self.source.caught_up or self._roll_due()):
                        self.commit()
                    if self.source.exhausted:
                        break
                    wait = min(self.source.wait_hint(), MAX_IDLE_SLEEP)
                    if wait > 0:
                        self.stop.wait(wait)
                    continue
                try:
                    self.handle(batch)
                except Cancelled:
                    log.info("stopping mid-batch: the batch is not written and will be read again after a restart")
                    break
                if self._roll_due():
                    self.commit()
            self._set_state("stopping")
            if self._uncommitted:
                self.commit()
            self._wait_commit()
            self.guard.close()
            self._reporter.flush()
        finally:
            if self._behind is not None and self._behind.busy:  # leaving on an error: let the commit end
                with contextlib.suppress(Exception):
                    self._behind.wait()
            self._set_state("stopped")
        return self.stats

    def _roll_due(self) -> bool:
        return self.roll.due(self.checkpointer.pending_rows, self.checkpointer.pending_age)

    def commit(self) -> None:
        """Publish the sinks' files, then commit the position of the last batch (``Checkpointer``).

        With ``overlap_commits`` this seals the roll and commits it on a thread (after the previous
        commit returned); :meth:`_wait_commit` collects it.
        """
        if self._behind is None:
            paths = self.checkpointer.commit(self._position, self._roll_label or "empty")
            self._roll_label, self._uncommitted = None, False
            self._stream_labels.clear()
            self._committed(paths, None)
            return
        self._wait_commit()
        finish = self.checkpointer.seal(self._position, self._roll_label or "empty")
        finished = self.guard.sealed()
        self._roll_label, self._uncommitted = None, False
        self._stream_labels.clear()
        self._behind.start(lambda: (finish(), finished))

    def _wait_commit(self) -> None:
        """Wait for the commit running behind (if any); raise its error."""
        if self._behind is not None:
            done = self._behind.wait()
            if done is not None:
                self._committed(*done)

    def _committed(self, paths: list[Any], finished: set[str] | None) -> None:
        self.guard.committed(finished)
        self.stats.commits += 1
        if self.metrics is not None:
            self.metrics.checkpoints.inc()
            for kind, path in zip(("output", "dead_letter"), paths, strict=True):
                if path is not None:
                    self.metrics.files_written.labels(kind=kind).inc()
        log.debug("committed", extra={"files": [str(p) for p in paths if p is not None]})

    # ------------------------------------------------------------------- batch
    def handle(self, batch: SourceBatch) -> None:
        """Process one batch and hand its rows to the sinks (not yet durable)."""
        t0 = time.perf_counter()
        if self._roll_label is None:
            self._roll_label = batch.label
        label = self._stream_labels.setdefault(batch.stream, batch.label)
        if batch.table is not None and batch.table.num_rows and self.guard.quarantined(batch.key):
            done = Processed(dead=_quarantined(batch, self.guard.attempts(batch.key)))
            log.error("batch %s crashed the daemon %d times: its %d records are quarantined as dead letters",
                      batch.key, self.guard.attempts(batch.key), batch.table.num_rows)
            if self.metrics is not None:
                self.metrics.quarantined_batches.inc()
        elif batch.table is not None and batch.table.num_rows:
            self.guard.enter(batch.key)
            done = self.embedder.process(batch.table, origin=batch.origin)
            self.guard.finished()
        else:
            done = Processed()
        dead = list(batch.dead) + done.dead
        if done.output is not None and done.output.num_rows:
            if self._uncommitted and not self.output.accepts(done.output.schema, label):
                # the open output file holds rows of another schema (another input precision): publish it
                # and the position before this batch, and start a new roll with this batch
                self.commit()
                self._roll_label = batch.label
                label = self._stream_labels.setdefault(batch.stream, batch.label)
            self.output.write(done.output, label)
        if dead:
            self.dead.write(dead, label, model_version=self.model_version, source=self.source.name)
        self._position = batch.position
        self._uncommitted = True
        if batch.n_records:  # end-of-file markers do not count towards max_batches
            self.stats.batches += 1
        self.stats.records_in += batch.n_records
        self.stats.embedded += done.n_out
        self.stats.count_dead(dead)
        self._reporter.count(batch.n_records, done.n_out, dead)
        if self.metrics is not None:
            self._observe(batch, done, dead, time.perf_counter() - t0)
        if self.on_batch is not None:
            self.on_batch(done)

    # ----------------------------------------------------------------- metrics
    def _observe(self, batch: SourceBatch, done: Processed, dead: list[DeadRecord], seconds: float) -> None:
        m = self.metrics
        assert m is not None
        m.records_in.inc(batch.n_records)
        if dead:
            m.dead_letters.inc(len(dead))
            for reason, c in Counter(r.reason for r in dead).items():
                m.records_failed.labels(reason=reason).inc(c)
        out = done.output
        if out is not None and out.num_rows:
            m.records_embedded.labels(method=out.column("method")[0].as_py()).inc(out.num_rows)
            processed = out.column("processed_at")[0].value  # microseconds
            # a zero-copy view of the microseconds (pyarrow.compute's cast: 0.06 s to import); NaN: no event_time
            et = to_numpy(out.column("event_time").view(pa.int64()))
            m.latency.observe_many((processed - et.astype(np.float64)) / 1e6)
            for res in done.results:
                m.relative_unexplained.observe_many(res.relative_unexplained)
                bits = np.bitwise_or.reduce(res.flags) if res.flags.size else 0
                for bit, name in FLAG_NAMES.items():
                    if bits & bit:
                        m.flags.labels(flag=name).inc(int(np.count_nonzero(res.flags & bit)))
        m.batch_seconds.observe(seconds)
        m.last_batch.set(time.time())

    # ------------------------------------------------------------------ health and logs
    def _beat(self) -> None:
        if self.health is not None:
            self.health.beat()
            self.health.set_problem("source", getattr(self.source, "problem", None))

    def _set_state(self, state: str) -> None:
        if self.health is not None:
            self.health.set_state(state)

    def _report(self) -> None:
        self._reporter.maybe_log(self.model_version, getattr(self.source, "backlog", None))


def _quarantined(batch: SourceBatch, attempts: int) -> list[DeadRecord]:
    table = batch.table
    assert table is not None
    detail = (f"the daemon crashed {attempts} times while processing this batch ({batch.key}); its records are "
              f"set aside so the stream can go on")
    ids = table.column("id").to_pylist() if table.schema.names.count("id") == 1 else [None] * table.num_rows
    return [DeadRecord(Reason.QUARANTINED, detail, id=rid if isinstance(rid, str) else None, file=batch.origin.file,
                       row=batch.origin.row(i),
                       record=row_as_json(table, i))
            for i, rid in enumerate(ids)]


class _Reporter:
    """The loop's log lines: a progress line every ``every`` seconds, and rate-limited dead-letter WARNINGs.

    The first dead letters are reported at once; later ones at most once per
    ``DEAD_LETTER_WARNING_SECONDS`` (summed), and whatever is left when the
    loop stops in one last WARNING, so no dead letter goes unmentioned.
    """

    def __init__(self, every: float, warn: bool = True) -> None:
        self.every = float(every)
        self.warn = warn
        now = time.monotonic()
        self._last_progress = now
        self._last_warning = -math.inf
        self._since = now
        self._in = self._out = self._dead = 0
        self._reasons: Counter[str] = Counter()
        self._example: DeadRecord | None = None

    def count(self, n_in: int, n_out: int, dead: list[DeadRecord]) -> None:
        self._in += n_in
        self._out += n_out
        self._dead += len(dead)
        if dead and self.warn:
            if not self._reasons:
                self._since = time.monotonic()
            self._reasons.update(r.reason for r in dead)
            self._example = self._example or dead[0]

    def _warn(self, now: float) -> None:
        ex = self._example
        assert ex is not None
        where = f"{ex.file or ''}" + (f" row {ex.row}" if ex.row is not None else "")
        log.warning("%d dead letters in the last %.0f s (%s); e.g. %s: %s%s", sum(self._reasons.values()),
                    max(now - self._since, 0.0), ", ".join(f"{k} {v}" for k, v in self._reasons.most_common()),
                    ex.reason, ex.detail, f" ({where})" if where.strip() else "",
                    extra={"reasons": dict(self._reasons)})
        self._reasons.clear()
        self._example = None
        self._last_warning = now

    def flush(self) -> None:
        """At stop: the dead letters not yet reported."""
        if self._reasons:
            self._warn(time.monotonic())

    def maybe_log(self, model_version: int, backlog: int | None) -> None:
        now = time.monotonic()
        if self._reasons and now - self._last_warning >= DEAD_LETTER_WARNING_SECONDS:
            self._warn(now)
        if self.every > 0 and now - self._last_progress >= self.every:
            dt = now - self._last_progress
            log.info("progress: %.0f records/s in, %.0f embedded/s, %.1f dead letters/s, backlog %s, model version %d",
                     self._in / dt, self._out / dt, self._dead / dt, "unknown" if backlog is None else backlog,
                     model_version, extra={"records_in": self._in, "embedded": self._out, "dead_letters": self._dead,
                                           "seconds": round(dt, 3), "backlog": backlog,
                                           "model_version": model_version})
            self._in = self._out = self._dead = 0
            self._last_progress = now
