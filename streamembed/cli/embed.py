"""``streamembed embed``: input files through the daemon's loop into one Parquet file, or on Dask.

The same streaming loop as the daemon (``stream.loop``), with a file source
(the inputs in order: files, directories, globs), a single-file Parquet sink,
a dead-letter directory and no checkpoint. With ``--dask ADDRESS`` the inputs
are embedded on a Dask cluster instead (``streamembed.jobs.backfill``): one task
per file or row-group range, each publishing its own part into the OUTPUT
directory. Exit codes: 0 every record embedded; 1 done, but some records are
dead letters (in the dead-letter directory, with their reasons), some Dask
tasks failed, or the rows look like they follow another landmark order
(the input consistency alarm of ``monitors.consistency``, docs/math.md §4.5:
the output is written, and one line says why; not checked with --dask);
2 refused: the model or an argument is unusable, the input
cannot be read, or no record could be embedded (then no output file is
written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamembed.cli.common import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, Refused, Subparsers, subcommand

if TYPE_CHECKING:
    from streamembed.stream.loop import LoopStats

__all__ = ["add_parser", "run", "Progress"]

#: The subcommand's line in ``streamembed --help``.
HELP = "embed files (Parquet/Arrow/JSONL) into a Parquet file, or on Dask"


class Progress:
    """A one-line progress bar on stderr: rows done, rate, and a bar when the total is known."""

    def __init__(self, total: int | None, enabled: bool, width: int = 30) -> None:
        self.total, self.enabled, self.width = total, enabled, width
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, done: int, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not final and now - self._last < 0.2:
            return
        self._last = now
        rate = done / max(now - self.t0, 1e-9)
        if self.total:
            frac = min(1.0, done / self.total)
            fill = int(frac * self.width)
            bar = "#" * fill + "-" * (self.width - fill)
            msg = f"\r[{bar}] {frac * 100:5.1f}% {done:,}/{self.total:,} rows {rate:,.0f} rows/s"
        else:
            msg = f"\r{done:,} rows {rate:,.0f} rows/s"
        sys.stderr.write(msg + ("\n" if final else ""))
        sys.stderr.flush()


def _total_rows(paths: list[Path]) -> int | None:
    from streamembed.stream.readers import file_format

    total = 0
    for path in paths:
        try:
            if file_format(path) != "parquet":
                return None
            import pyarrow.parquet as pq

            total += int(pq.ParquetFile(path).metadata.num_rows)
        except Exception:  # unknown total: no percentage
            return None
    return total


def _inputs(items: list[str]) -> list[Path]:
    from streamembed.stream.readers import FORMATS, file_format
    from streamembed.stream.sources.files import expand_inputs

    try:
        paths = expand_inputs(items)
    except FileNotFoundError as exc:
        raise Refused(f"input {exc}") from None
    for src in paths:
        if file_format(src) is None:
            raise Refused(f"input {src}: unknown file extension {src.suffix!r} (expected one of "
                          f"{', '.join(sorted(FORMATS))})")
    return paths


def _cmd_dask(args: argparse.Namespace, paths: list[Path], k0: Any) -> int:
    try:
        from streamembed.jobs.backfill import backfill
    except ImportError as exc:
        raise Refused(f"--dask: {exc}") from None
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise Refused("--dask needs the optional extra: pip install 'streamembed[dask]'") from None
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise Refused(f"-o {args.output}: with --dask the output is a directory (one part per task)")
    scheduler: Any = args.dask
    cluster = None
    if args.dask.startswith("local"):
        from distributed import LocalCluster

        workers = int(args.dask.partition(":")[2] or 2)
        cluster = scheduler = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)  # type: ignore[no-untyped-call]
    done = [0]

    def progress(result: Any) -> None:
        done[0] += 1
        if args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty()):
            sys.stderr.write(f"\r{done[0]} tasks done")
            sys.stderr.flush()

    try:
        report = backfill(paths, args.model, out, scheduler, method=args.method, k0_rows=k0,
                          batch_rows=args.batch_rows, max_block_rows=args.max_block_rows,
                          row_group_rows=args.row_group_rows, compression=args.compression, progress=progress,
                          schema_version=args.schema_version)
    except OSError as exc:
        raise Refused(f"--dask {args.dask}: {exc}") from None
    finally:
        if cluster is not None:
            cluster.close()
    for task, reason in report.failed:
        print(f"task failed: {task.name} rows {task.start_row}-{task.end_row or 'end'}: {reason}", file=sys.stderr)
    rate = report.records / max(report.seconds, 1e-9)
    print(f"{report.records} records in {len(report.results)} tasks: {report.embedded} embedded -> {out}/, "
          f"{report.dead} dead letters, {len(report.failed)} failed tasks ({rate:,.0f} records/s)", file=sys.stderr)
    if report.embedded == 0 and not report.failed:
        raise Refused(f"no record could be embedded ({report.records} records, {report.dead} dead letters -> "
                      f"{out}/dead-letter/)")
    return EXIT_OK if report.complete else EXIT_FAILED


def _dead_summary(stats: LoopStats) -> str:
    """e.g. "wrong_length 120, bad_id 2; e.g. row 0: 'dissimilarities' has 30 values, expected 40"."""
    if not stats.failed_by_reason:
        return ""
    top = sorted(stats.failed_by_reason.items(), key=lambda kv: -kv[1])
    ex = stats.first_dead[top[0][0]]
    where = f"row {ex.row}" + (f" (id {ex.id!r})" if ex.id is not None else "") if ex.row is not None else "the file"
    return (", ".join(f"{k} {v:,}" for k, v in top) + f"; e.g. {where}: {ex.reason}: {ex.detail}")


def _mapping(mode: str) -> str:
    """The reader's mapping mode for ``--mmap``: ``auto`` maps every Arrow IPC and Parquet input, whether it was
    published by rename or written in place, once a truncation under the mapping is sure to end embed with a
    message and exit 2 rather than a bare SIGBUS (``stream.mapped.exit_on_truncation``; the output is written
    atomically, so nothing half-written remains). A change that keeps the file's pages (appends, rewrites of
    the same size) is caught by the size and modification-time checks before, during and after the read."""
    if mode != "auto":
        return mode
    from streamembed.stream.mapped import exit_on_truncation

    installed = exit_on_truncation(
        "streamembed embed: an input file was truncated while it was read memory-mapped (--mmap auto): nothing was "
        "written. Run it again once the file is complete, or with --mmap never for inputs that change while they "
        "are read.\n", EXIT_REFUSED)
    return "always" if installed else "auto"


def run(args: argparse.Namespace) -> int:
    from streamembed.core.errors import ModelFileError
    from streamembed.config import ConfigError, parse_value
    from streamembed.model_io import read_model_file
    from streamembed.config.core_args import k0_rows_value
    from streamembed.config.schema import RunConfig
    from streamembed.stream.checkpoint import Checkpointer
    from streamembed.monitors.consistency import ConsistencyMonitor
    from streamembed.stream.embedder import BatchEmbedder
    from streamembed.stream.input_precision import common_precision
    from streamembed.stream.loop import EmbeddingLoop, RollPolicy
    from streamembed.stream.read_ahead import ReadAhead
    from streamembed.stream.records import Reason
    from streamembed.stream.sinks import DeadLetterSink, ParquetSink
    from streamembed.stream.sources import FileSource
    from streamembed import quick_exit

    paths = _inputs(args.input)
    try:
        model, params = read_model_file(args.model)
    except ModelFileError as exc:
        raise Refused(f"cannot load model {args.model}: {exc}") from None
    if args.method is None:  # the method the model was fitted for (fit --method), else the table's default
        from streamembed.core.options import DEFAULTS

        args.method = str(params.get("method") or DEFAULTS["method"])
    try:
        k0 = k0_rows_value(parse_value("model.k0_rows", args.k0_rows))
    except ConfigError as exc:
        raise Refused(f"--k0-rows: {exc}") from None
    try:
        model.check_method(args.method)
    except ValueError as exc:
        raise Refused(f"--method {args.method}: {exc}") from None
    if args.dask:
        return _cmd_dask(args, paths, k0)
    out = Path(args.output)
    if not out.parent.is_dir():
        raise Refused(f"-o {args.output}: directory {out.parent} does not exist")
    dead_dir = Path(args.dead_letter) if args.dead_letter else out.with_name(out.stem + ".dead-letter")
    names = [str(p) for p in paths] if len(paths) > 1 else [paths[0].name]
    source = FileSource(list(paths), batch_rows=args.batch_rows, max_block_rows=args.max_block_rows,
                        names=names, name="embed", mapping=_mapping(args.mmap))
    output = ParquetSink(out.parent, final_name=out.name, row_group_rows=args.row_group_rows,
                         compression=args.compression)
    dead = DeadLetterSink(dead_dir, fmt=args.dead_letter_format, source="embed")
    ahead = ReadAhead(source, depth=2)
    consistency = None if args.no_order_check else ConsistencyMonitor(warn=False)
    # one output file, one schema: version 2 writes the precision of the inputs (float64 if any is)
    embedder = BatchEmbedder(model, method=args.method, k0_rows=k0, max_block_rows=args.max_block_rows,
                             consistency=consistency, output_version=args.schema_version,
                             output_dtype=common_precision(paths) if args.schema_version >= 2 else None)
    progress = Progress(_total_rows(paths), {"always": True, "never": False}.get(args.progress, sys.stderr.isatty()))
    loop = EmbeddingLoop(embedder, ahead, output, dead, Checkpointer([output, dead], ahead, None),
                         run=RunConfig(progress_seconds=0), roll=RollPolicy.at_end(),  # one output file
                         between_batches=lambda: progress.update(loop.stats.records_in),
                         warn_dead_letters=False)  # the final message counts them
    try:
        stats = loop.run()
    finally:
        ahead.close()
        output.close()
        dead.close()
    quick_exit.allow()  # published and closed: the process may end without the interpreter's teardown
    progress.update(stats.records_in, final=True)
    where = f" -> {dead_dir}/" if stats.dead else ""
    src = paths[0] if len(paths) == 1 else f"{len(paths)} inputs"
    if source.unreadable and len(source.unreadable) == len(paths):
        out.unlink(missing_ok=True)
        ex = stats.first_dead.get(Reason.UNREADABLE_FILE) or next(iter(stats.first_dead.values()), None)
        why = f"{ex.detail}" if ex is not None else "see the dead letter"
        raise Refused(f"cannot read {src}: {why} (dead letter{where})")
    if stats.embedded == 0:
        out.unlink(missing_ok=True)
        hint = ""
        if Reason.WRONG_LENGTH in stats.failed_by_reason:
            hint = (f"; rows of the wrong length are input for another model: {args.model} has "
                    f"{model.n_landmarks} landmarks (`streamembed model info {args.model}` lists them in order)")
        raise Refused(f"no record of {src} could be embedded: {stats.records_in:,} records, {stats.dead:,} dead "
                      f"letters{where} ({_dead_summary(stats)}){hint}")
    print(f"{stats.records_in:,} records: {stats.embedded:,} embedded -> {out}, {stats.dead:,} dead letters{where}"
          + (f" ({_dead_summary(stats)})" if stats.dead else ""), file=sys.stderr)
    _explained_summary(model)
    if consistency is not None and consistency.first_alarm is not None:
        print(f"input consistency alarm after {consistency.first_alarm_objects:,} rows: {consistency.first_alarm} "
              f"(--no-order-check skips this check)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_FAILED if stats.dead else EXIT_OK


def _explained_summary(model: Any) -> None:
    """What the map explains of its fit population (docs/math.md §4.9), with the WARNING of a map that explains
    little."""
    from streamembed.core.monitor.explained import explained, warning_text

    e = explained(model)
    why = warning_text(e)
    print(f"explained: {e.line()}" + (f"\nWARNING: {why}" if why else ""), file=sys.stderr)


def add_parser(subparsers: Subparsers) -> None:
    from streamembed.config.schema import choices, default
    from streamembed.core.options import DEFAULTS, OPTIONS

    description = (
        "One-shot embedding of INPUT files with MODEL into OUTPUT (Parquet, written atomically), through\n"
        "the daemon's own loop. INPUT: files, directories or globs (in that order). Rejected records go\n"
        "to a dead-letter directory (default: <OUTPUT stem>.dead-letter). With --dask the inputs are\n"
        "embedded on a Dask cluster, one task per file or row-group range, each writing its own part\n"
        "into the OUTPUT directory (a backfill; see docs/throughput.md). Exit codes: 0 every record\n"
        "embedded, 1 done with dead letters (or failed Dask tasks), or rows that look like they follow\n"
        "another landmark order (the input consistency alarm, docs/math.md 4.5), 2 refused (unusable\n"
        "model or input, or nothing could be embedded: no output is written).")
    e = subcommand(subparsers, "embed", HELP, run, description)
    e.add_argument("input", metavar="INPUT", nargs="+",
                   help="input files (.parquet, .arrow/.arrows, .jsonl), directories or globs")
    e.add_argument("-m", "--model", required=True, metavar="MODEL.npz")
    e.add_argument("-o", "--output", required=True, metavar="OUTPUT.parquet",
                   help="output file (with --dask: output directory)")
    e.add_argument("--dask", metavar="SCHEDULER", default="",
                   help="embed on this Dask scheduler (tcp://host:8786; 'local:N' starts N local workers); needs "
                        "the extra streamembed[dask]")
    e.add_argument("--method", choices=OPTIONS["method"].values, default=None,
                   help="embedding method (default: the one stored with the model by fit --method)")
    e.add_argument("--k0-rows", default="none", metavar="none|all|N", help="rows per batch with exact k0")
    e.add_argument("--batch-rows", type=int, default=DEFAULTS["batch_rows"], metavar="N",
                   help="rows per batch (default %(default)s)")
    e.add_argument("--row-group-rows", type=int, default=default("output.row_group_rows"), metavar="N",
                   help="Parquet row-group size (default %(default)s: each row group is encoded while the next "
                        "batches are embedded)")
    e.add_argument("--max-block-rows", type=int, default=DEFAULTS["max_block_rows"], metavar="N",
                   help="largest block with 'cross' (default %(default)s)")
    e.add_argument("--compression", default=default("output.compression"), choices=choices("output.compression"))
    e.add_argument("--schema-version", type=int, default=default("output.schema_version"),
                   choices=choices("output.schema_version"),
                   help="output record format: 2 (default: the lean format, y0..y{d-1} columns in the input's "
                        "precision, flag_bits) or 1 (y list of float64, flags list of names; for one more release); "
                        "docs/formats.md")
    e.add_argument("--mmap", choices=choices("directory.mmap"), default=default("directory.mmap"),
                   help="memory-map Arrow IPC and Parquet inputs instead of copying them: auto (default) maps "
                        "every such input, published by rename or written in place; a file truncated while embed "
                        "reads it ends embed with exit 2 and nothing written (without the compiled extension: only "
                        "files renamed, linked or with restored times since their last write); always maps them "
                        "whatever happens (a truncation kills the process); never copies them")
    e.add_argument("--no-order-check", action="store_true",
                   help="do not score the rows' consistency with the model's landmark order (docs/math.md 4.5)")
    e.add_argument("--dead-letter", metavar="DIR", help="dead-letter directory")
    e.add_argument("--dead-letter-format", choices=choices("output.dead_letter_format"),
                   default=default("output.dead_letter_format"))
    e.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress bar on stderr (auto: when stderr is a terminal)")
