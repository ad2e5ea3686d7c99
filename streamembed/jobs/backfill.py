"""Backfills on Dask: re-embed many input files on a ``distributed`` cluster, one task per file or row-group range.

A refit moves the map; the history then has to be embedded again, often far
more than one machine reads in reasonable time. This module spreads it over
an existing Dask cluster (the optional extra ``streamembed[dask]``):

* **Tasks.** :func:`plan` cuts the inputs into tasks: one per file, and a
  Parquet file of several row groups into ranges of whole row groups of at
  least ``rows_per_task`` rows. Each task reads its rows with the same
  readers and the same validation as ``streamembed embed`` and the daemon
  (``stream.readers.iter_file``, ``stream.embedder.BatchEmbedder``): every
  record ends embedded or dead-lettered.
* **Output.** Each task writes its own Parquet part, ``part-<task>.parquet``
  in the output directory, and its dead letters to
  ``dead-letter/dead-<task>.parquet``: written to a temporary name unique to
  the attempt, fsynced and renamed (``atomic.publish``). The name depends on
  the task only (input file and row range), so a task that is run again -
  its worker died, the run was restarted - rewrites the same file: every
  input row is in the output exactly once, whatever was retried.
* **The model** is sent to the workers once (``Client.scatter(...,
  broadcast=True)`` of the ``.npz`` bytes) and loaded with ``model_io`` on
  each worker, once per worker process (cached by the bytes' digest): no
  model object is ever pickled.
* **Failures.** A file that cannot be read or decoded is a dead letter (as
  in ``embed``). A task that raises (e.g. the output directory is not
  writable) is retried by Dask on another worker up to
  ``distributed.scheduler.allowed-failures`` times, then reported in
  :attr:`BackfillReport.failed` with its reason; the other tasks complete.

When to use what: a backfill (a bounded set of files, e.g. months of history
after a refit) belongs here; a stream (new data as it arrives) belongs to the
daemon, scaled out by a Kafka consumer group (docs/throughput.md).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Sequence

import pyarrow.parquet as pq

from streamembed.config.schema import OutputConfig
from streamembed.core.options import BATCH_ROWS, DEFAULTS, MAX_BLOCK_ROWS
from streamembed.stream.sources.files import expand_inputs

__all__ = ["Task", "TaskResult", "BackfillReport", "expand_inputs", "plan", "run_task", "backfill",
           "DEAD_LETTER_DIR"]

#: Subdirectory of the output directory for the tasks' dead letters.
DEAD_LETTER_DIR = "dead-letter"
#: Temporary files of task attempts start with ``.`` and this (left behind only by a killed worker).
ATTEMPT_PREFIX = "attempt-"


@dataclass(frozen=True)
class Task:
    """Rows ``start_row`` .. ``end_row - 1`` (None: to the end) of ``path``.

    ``name`` is the file's name in dead letters.
    """

    path: str
    name: str
    start_row: int = 0
    end_row: int | None = None

    @property
    def stem(self) -> str:
        """The output name of this task: the input's name, a digest of its path and the row range."""
        from streamembed.stream.sinks import safe_label

        digest = hashlib.blake2s(os.fsencode(self.path), digest_size=4).hexdigest()
        rows = "" if self.start_row == 0 and self.end_row is None else f"-r{self.start_row:012d}"
        return f"{safe_label(Path(self.path).name, 64)}-{digest}{rows}"


@dataclass
class TaskResult:
    """What one task did (returned by a worker: plain data only)."""

    task: Task
    records: int = 0
    embedded: int = 0
    dead: int = 0
    output: str | None = None
    dead_letters: str | None = None
    unreadable: bool = False
    seconds: float = 0.0
    worker_pid: int = 0


@dataclass
class BackfillReport:
    """The outcome of :func:`backfill`: per-task results, failed tasks with their reasons, totals."""

    results: list[TaskResult] = field(default_factory=list)
    failed: list[tuple[Task, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return sum(r.records for r in self.results)

    @property
    def embedded(self) -> int:
        return sum(r.embedded for r in self.results)

    @property
    def dead(self) -> int:
        return sum(r.dead for r in self.results)

    @property
    def complete(self) -> bool:
        """Every task ran and every record was embedded."""
        return not self.failed and self.dead == 0


# ----------------------------------------------------------------------------- planning


def plan(paths: Sequence[str | os.PathLike[str]], *, rows_per_task: int = 1 << 20) -> list[Task]:
    """One task per file; a Parquet file of several row groups in ranges of whole row groups.

    A range holds at least ``rows_per_task`` rows (the last one may hold fewer).
    """
    from streamembed.stream.readers import file_format

    tasks: list[Task] = []
    for p in paths:
        path = str(p)
        name = Path(path).name
        if file_format(path) == "parquet":
            try:
                md = pq.ParquetFile(path).metadata
            except Exception:  # unreadable: one task, whose reader dead-letters it
                tasks.append(Task(path, name))
                continue
            sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
            if sum(sizes) > rows_per_task and len(sizes) > 1:
                start = rows = 0
                for n in sizes:
                    rows += n
                    if rows - start >= rows_per_task:
                        tasks.append(Task(path, name, start, rows))
                        start = rows
                if rows > start:
                    tasks.append(Task(path, name, start, rows))
                continue
        tasks.append(Task(path, name))
    return tasks


# ----------------------------------------------------------------------------- the task (runs on a worker)

_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def _model(model_bytes: bytes) -> Any:
    """The model of these ``.npz`` bytes, loaded once per process (``model_io.model_from_bytes``)."""
    from streamembed.model_io import model_from_bytes

    key = hashlib.sha256(model_bytes).hexdigest()
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = model_from_bytes(model_bytes)
            _MODELS.clear()  # one map at a time
            _MODELS[key] = model
    return model


def run_task(task: Task, model_bytes: bytes, out_dir: str, *, method: str = DEFAULTS["method"],
             k0_rows: None | str | int = None, batch_rows: int = BATCH_ROWS, max_block_rows: int = MAX_BLOCK_ROWS,
             row_group_rows: int = OutputConfig.row_group_rows, compression: str = OutputConfig.compression,
             schema_version: int = OutputConfig.schema_version,
             precision: str | None = None) -> TaskResult:
    """Embed one task's rows into its own published Parquet part (and dead letters); see the module doc.

    The daemon's loop (``stream.loop.EmbeddingLoop``) over the task's row range (``stream.sources.FileSource``),
    into a single-file Parquet sink and a dead-letter sink, published once at the end.
    """
    from streamembed.config.schema import RunConfig
    from streamembed.stream.checkpoint import Checkpointer
    from streamembed.stream.embedder import BatchEmbedder
    from streamembed.stream.loop import EmbeddingLoop, RollPolicy
    from streamembed.stream.sinks import DeadLetterSink, ParquetSink
    from streamembed.stream.sources import FileSource

    t0 = time.perf_counter()
    model = _model(model_bytes)
    embedder = BatchEmbedder(model, method=method, k0_rows=k0_rows, max_block_rows=max_block_rows,
                             output_version=schema_version, output_dtype=precision)
    out = Path(out_dir)
    # the temporary file is named for this attempt (two attempts of one task never share it), the
    # published file for the task (a retry replaces it)
    part = ParquetSink(out, prefix=f"{ATTEMPT_PREFIX}{os.getpid()}-{os.urandom(4).hex()}",
                       final_name=f"part-{task.stem}.parquet", row_group_rows=row_group_rows,
                       compression=compression)
    # other tasks write into the same directory at the same time: nobody's temporary files are removed here
    dead = DeadLetterSink(out / DEAD_LETTER_DIR, source="backfill", compression=compression, clean=False)
    source = FileSource([task.path], batch_rows=batch_rows, max_block_rows=max_block_rows, names=[task.name],
                        name="backfill", row_range=(task.start_row, task.end_row), label=task.stem)
    checkpointer = Checkpointer([part, dead], source, None)
    loop = EmbeddingLoop(embedder, source, part, dead, checkpointer, run=RunConfig(progress_seconds=0),
                         roll=RollPolicy.at_end(), warn_dead_letters=False)
    try:
        stats = loop.run()
        if not stats.commits:  # no batch at all: still remove what an earlier attempt published
            checkpointer.commit(None, task.stem)
    finally:
        part.close()  # drops the temporary file of an attempt that failed
        dead.close()
    return TaskResult(task, records=stats.records_in, embedded=stats.embedded, dead=stats.dead,
                      output=str(part.final_path(task.stem)) if stats.embedded else None,
                      dead_letters=str(dead.path_for(task.stem)) if stats.dead else None,
                      unreadable=bool(source.unreadable), seconds=time.perf_counter() - t0, worker_pid=os.getpid())


def _file_bytes(path: str | os.PathLike[str]) -> bytes:
    """The content of the model file ``path`` (its errors named as ``model_io`` names them)."""
    from streamembed.core.errors import ModelFileError
    from streamembed.model_io import load_model

    try:
        return Path(path).read_bytes()
    except OSError as exc:
        load_model(path)  # does not exist, a directory, ...: the loader's precise message
        raise ModelFileError(f"model file {path} cannot be read: {exc}") from exc


def _remove_leftovers(out: Path) -> None:
    """Temporary files of attempts whose worker was killed (every task has finished: none is being written)."""
    for p in [*out.glob(f".{ATTEMPT_PREFIX}*.tmp"), *(out / DEAD_LETTER_DIR).glob(".dead-*.tmp")]:
        p.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- the client side


def _client(scheduler: Any) -> tuple[Any, bool]:
    """(a distributed Client, whether it was made here) for a Client, an address or a cluster object."""
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - the optional extra
        raise ImportError("the Dask backfill needs the optional extra: pip install 'streamembed[dask]'") from exc
    if isinstance(scheduler, Client):
        return scheduler, False
    return Client(scheduler), True  # type: ignore[no-untyped-call]


def backfill(inputs: Iterable[str | os.PathLike[str]], model: str | os.PathLike[str] | bytes,
             out_dir: str | os.PathLike[str], scheduler: Any, *, method: str = DEFAULTS["method"],
             k0_rows: None | str | int = None, batch_rows: int = BATCH_ROWS, max_block_rows: int = MAX_BLOCK_ROWS,
             row_group_rows: int = OutputConfig.row_group_rows, compression: str = OutputConfig.compression,
             rows_per_task: int = 1 << 20, progress: Any = None,
             schema_version: int = OutputConfig.schema_version) -> BackfillReport:
    """Embed every row of ``inputs`` (files, directories, globs) on Dask into parts in ``out_dir``.

    ``model``: the ``.npz`` path (or its bytes), sent to every worker once.
    ``scheduler``: a ``distributed.Client``, a scheduler address
    (``tcp://host:8786``) or a cluster object (e.g. ``LocalCluster``).
    ``progress(result)`` is called as each task finishes. ``schema_version``:
    the output record format (``stream.output``); in version 2 every part is
    written in the precision of all the inputs together (one data set, one
    schema: ``stream.input_precision``). Raises ImportError
    without the ``dask`` extra, FileNotFoundError for inputs naming nothing,
    ``ModelFileError`` for an unusable model (checked here, before any task).
    """
    from streamembed.stream.input_precision import common_precision

    paths = expand_inputs(inputs)
    model_bytes = bytes(model) if isinstance(model, (bytes, bytearray)) else _file_bytes(model)
    _model(model_bytes).check_method(method)  # refuse an unusable model or method before any task
    out = Path(out_dir)
    (out / DEAD_LETTER_DIR).mkdir(parents=True, exist_ok=True)
    tasks = plan(paths, rows_per_task=rows_per_task)
    precision = common_precision(paths).name if schema_version >= 2 else None
    client, own = _client(scheduler)
    report = BackfillReport()
    t0 = time.perf_counter()
    try:
        from distributed import as_completed

        shared = client.scatter(model_bytes, broadcast=True, hash=False)
        futures = {client.submit(run_task, t, shared, str(out), method=method, k0_rows=k0_rows,
                                 batch_rows=batch_rows, max_block_rows=max_block_rows,
                                 row_group_rows=row_group_rows, compression=compression,
                                 schema_version=schema_version, precision=precision,
                                 key=f"streamembed-backfill-{t.stem}-{os.urandom(3).hex()}", pure=False): t
                   for t in tasks}
        for fut in as_completed(list(futures)):  # type: ignore[no-untyped-call]
            task = futures[fut]
            if fut.status == "finished":
                result = fut.result()
                report.results.append(result)
                if progress is not None:
                    progress(result)
            else:
                exc = fut.exception()
                report.failed.append((task, f"{type(exc).__name__}: {exc}"))
            fut.release()
    finally:
        if own:
            client.close()
    _remove_leftovers(out)
    report.seconds = time.perf_counter() - t0
    report.results.sort(key=lambda r: (r.task.path, r.task.start_row))
    return report
