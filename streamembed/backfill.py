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

import glob
import hashlib
import io
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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


def expand_inputs(inputs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named by ``inputs``: files as given, directories (their readable files, sorted), globs (sorted).

    Hidden files (``.x``, ``_x``) and files of unknown extensions inside
    directories are skipped; a named file is kept whatever its name (the
    reader then says what is wrong with it). Raises FileNotFoundError for an
    input that names nothing.
    """
    from streamembed.stream.readers import file_format

    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith((".", "_"))
                           and file_format(q) is not None)
        elif p.exists():
            found = [p]
        else:
            found = sorted(Path(q) for q in glob.glob(str(item), recursive=True) if Path(q).is_file())
        if not found:
            raise FileNotFoundError(f"{item}: no such file, directory or matching files")
        out.extend(found)
    unique: dict[Path, Path] = {}  # a file named twice (a file and its directory) is read once
    for p in out:
        unique.setdefault(p.resolve(), p)
    return list(unique.values())


def plan(paths: Sequence[str | os.PathLike[str]], *, rows_per_task: int = 1 << 20) -> list[Task]:
    """One task per file; a Parquet file of several row groups in ranges of whole row groups.

    Each range holds at least ``rows_per_task`` rows.
    """
    from streamembed.stream.readers import file_format

    tasks: list[Task] = []
    for p in paths:
        path = str(p)
        name = Path(path).name
        if file_format(path) == "parquet":
            try:
                md = pq.ParquetFile(path).metadata
            except Exception:  # noqa: BLE001 - unreadable: one task, whose reader dead-letters it
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
    """The model of these ``.npz`` bytes, loaded once per process (``model_io``, through a temporary file)."""
    import tempfile

    from streamembed.model_io import load_model

    key = hashlib.sha256(model_bytes).hexdigest()
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            with tempfile.TemporaryDirectory(prefix="streamembed-model-") as d:
                path = Path(d) / "model.npz"
                path.write_bytes(model_bytes)
                model = load_model(path)
            _MODELS.clear()  # one map at a time
            _MODELS[key] = model
    return model


def run_task(task: Task, model_bytes: bytes, out_dir: str, *, method: str = "projection",
             k0_rows: None | str | int = None, batch_rows: int = 8192, max_block_rows: int = 4096,
             row_group_rows: int = 65536, compression: str = "zstd", schema_version: int = 1,
             precision: str | None = None) -> TaskResult:
    """Embed one task's rows into its own published Parquet part (and dead letters); see the module doc."""
    from streamembed.stream.codecs import DeadRecord, encode_dead_letters
    from streamembed.stream.embedder import BatchEmbedder
    from streamembed.stream.readers import FileChanged, iter_file
    from streamembed.stream.records import Reason
    from streamembed.stream.sinks import ParquetSink

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
    dead: list[DeadRecord] = []
    res = TaskResult(task, worker_pid=os.getpid())
    end = task.end_row
    row = task.start_row
    try:
        try:
            for chunk in iter_file(task.path, batch_rows=batch_rows, start_row=task.start_row,
                                   max_block_rows=max_block_rows, name=task.name, progressive=True):
                if end is not None and chunk.start_row >= end:
                    break
                table, rows, chunk_dead = chunk.table, chunk.rows, chunk.dead
                if end is not None and chunk.end_row > end and table is not None:
                    keep = (rows < end) if rows is not None else np.arange(table.num_rows) + chunk.start_row < end
                    table = table.filter(pa.array(keep))
                    rows = rows[keep] if rows is not None else None
                    chunk_dead = [d for d in chunk_dead if d.row is None or d.row < end]
                if table is None and any(d.row is None for d in chunk_dead):
                    res.unreadable = True
                dead.extend(chunk_dead)
                res.records += len(chunk_dead)
                row = chunk.end_row
                if table is None or table.num_rows == 0:
                    continue
                res.records += table.num_rows
                done = embedder.process(table, file=task.name, rows=rows, row_base=chunk.start_row)
                dead.extend(done.dead)
                if done.output is not None and done.output.num_rows:
                    part.write(done.output, task.stem)
                    res.embedded += done.output.num_rows
        except FileChanged as exc:
            dead.append(DeadRecord(Reason.UNREADABLE_FILE, f"{exc}: rows from {row} on were not read",
                                   file=task.name, row=row if row else None))
            res.records += 1
            res.unreadable = res.unreadable or row == task.start_row
        res.dead = len(dead)
        published = part.flush(task.stem)
        res.output = None if published is None else str(published)
        res.dead_letters = _publish_dead(out / DEAD_LETTER_DIR / f"dead-{task.stem}.parquet", dead,
                                         embedder.model_version, compression, encode_dead_letters)
    finally:
        part.close()  # drops the temporary file of an attempt that failed
    res.seconds = time.perf_counter() - t0
    return res


def _publish_dead(final: Path, dead: list[Any], model_version: int, compression: str, encode: Any) -> str | None:
    """Publish the task's dead letters (or remove an earlier attempt's file when there are none)."""
    from streamembed.atomic import fsync_dir, publish

    if not dead:
        if final.exists():
            final.unlink()
            fsync_dir(final.parent)
        return None
    final.parent.mkdir(parents=True, exist_ok=True)
    table = encode(dead, source="backfill", model_version=model_version, failed_at_us=time.time_ns() // 1000)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression=compression)
    tmp = final.with_name(f".{final.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")  # unique per attempt
    try:
        tmp.write_bytes(buf.getvalue())
        publish(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return str(final)


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
    return Client(scheduler), True


def backfill(inputs: Iterable[str | os.PathLike[str]], model: str | os.PathLike[str] | bytes,
             out_dir: str | os.PathLike[str], scheduler: Any, *, method: str = "projection",
             k0_rows: None | str | int = None, batch_rows: int = 8192, max_block_rows: int = 4096,
             row_group_rows: int = 65536, compression: str = "zstd", rows_per_task: int = 1 << 20,
             progress: Any = None, schema_version: int = 1) -> BackfillReport:
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
    from streamembed.model_io import load_model
    from streamembed.stream.input_precision import common_precision

    paths = expand_inputs(inputs)
    if isinstance(model, (bytes, bytearray)):
        model_bytes = bytes(model)
        _model(model_bytes).check_method(method)
    else:
        load_model(model).check_method(method)  # refuse an unusable model or method before any task
        model_bytes = Path(model).read_bytes()
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
        for fut in as_completed(list(futures)):
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
