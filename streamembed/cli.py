"""The ``streamembed`` command line.

Subcommands: ``run`` (the daemon), ``fit`` (a landmark model from a file),
``embed`` (one file in, one Parquet file out), ``config`` (the effective
configuration). Exit codes: 0 success, 1 failure while running, 2 refused
(bad arguments, bad configuration, missing or corrupt model or input).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2

_EPILOG = """\
configuration (run, config):
  the embedded default < --config FILE < environment STREAMEMBED_<SECTION>__<KEY>=value
  < --set section.key=value < flags such as --max-batches. `streamembed config`
  prints the effective configuration with every key documented.

examples:
  streamembed run --max-batches 50          # generator demo, output in ./streamembed-out
  streamembed fit --features X.npy --metric euclidean --landmarks 200 -o model.npz
  streamembed embed objects.parquet -m model.npz -o embedded.parquet
  STREAMEMBED_SOURCE__KIND=directory STREAMEMBED_MODEL__PATH=model.npz streamembed run

exit codes: 0 done (run: stopped by SIGTERM/SIGINT or a limit), 1 failed while running
  (run resumes from its checkpoint), 2 refused: bad arguments or configuration, missing
  or corrupt model, unreadable input or checkpoint (the message says what to fix).

more subcommands (bench, evaluate, refit) will join these.
"""


class _Refused(Exception):
    """Refuse with exit code 2 and this message."""


# --------------------------------------------------------------------------- config helpers


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in getattr(args, "set", None) or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise _Refused(f"--set expects section.key=value, got {item!r}")
        out[key.strip()] = value
    return out


def _load(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> Any:
    from streamembed.daemon.config import ConfigError, load_config

    overrides = _overrides(args)
    overrides.update(extra or {})
    try:
        return load_config(args.config, environ=os.environ, overrides=overrides)
    except ConfigError as exc:
        raise _Refused(f"configuration error: {exc}") from None


# --------------------------------------------------------------------------- run


def _cmd_run(args: argparse.Namespace) -> int:
    from streamembed.daemon.app import run_daemon

    extra: dict[str, Any] = {}
    if args.max_batches is not None:
        extra["run.max_batches"] = args.max_batches
    if args.max_records is not None:
        extra["run.max_records"] = args.max_records
    if args.metrics_port is not None:
        extra["metrics.port"] = args.metrics_port
    cfg = _load(args, extra)
    return run_daemon(cfg)


# --------------------------------------------------------------------------- config


def _cmd_refit(args: argparse.Namespace) -> int:
    """Ask the running daemon of this configuration for a landmark refit (SIGUSR1)."""
    import signal

    cfg = _load(args)
    pid_path = cfg.pid_path
    try:
        pid = int(pid_path.read_text().strip())
    except (OSError, ValueError):
        raise _Refused(f"no running daemon: {pid_path} is missing or unreadable (is `streamembed run` running "
                       f"with output.root = {cfg.output.root!r}?)") from None
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        raise _Refused(f"no process {pid} (stale {pid_path})") from None
    print(f"asked daemon {pid} for a refit; see {cfg.history_path} and streamembed_refits_total", file=sys.stderr)
    return EXIT_OK


def _cmd_config(args: argparse.Namespace) -> int:
    from streamembed.daemon.config import default_toml_text, reference_rows, to_json, to_toml

    if args.defaults:
        print(default_toml_text(), end="")
        return EXIT_OK
    if args.reference:
        print("| key | default | meaning |\n| --- | --- | --- |")
        for key, default, doc in reference_rows():
            print(f"| `{key}` | `{default}` | {doc} |")
        return EXIT_OK
    cfg = _load(args)
    print(to_json(cfg) if args.format == "json" else to_toml(cfg, comments=not args.no_comments))
    return EXIT_OK


# --------------------------------------------------------------------------- fit


def _read_matrix(path: str, column: str) -> tuple[np.ndarray, list[str] | None]:
    """(N, w) float matrix and optional ids from .npy, Parquet/Arrow/JSONL (list column or numeric columns) or CSV."""
    import pyarrow as pa

    p = Path(path)
    if not p.exists():
        raise _Refused(f"{path} does not exist")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
            if arr.ndim != 2:
                raise _Refused(f"{path} holds an array of shape {arr.shape}, expected 2-D")
            return arr, None
        if suffix == ".csv":
            table = _read_csv(p)
        else:
            from streamembed.stream.readers import iter_file

            chunks = list(iter_file(p, batch_rows=1 << 30, max_block_rows=1 << 30))
            dead = [d for c in chunks for d in c.dead]
            if dead:
                raise _Refused(f"{path}: {dead[0].reason}: {dead[0].detail}")
            tables = [c.table for c in chunks if c.table is not None]
            if not tables:
                raise _Refused(f"{path} holds no rows")
            table = pa.concat_tables(tables)
    except _Refused:
        raise
    except Exception as exc:  # noqa: BLE001 - any unreadable input refuses with the reason
        raise _Refused(f"cannot read {path}: {exc}") from None
    ids = table.column("id").to_pylist() if "id" in table.schema.names else None
    if column in table.schema.names:
        from streamembed.stream.codecs import list_column_to_matrix

        try:
            return list_column_to_matrix(table.column(column)), ids
        except ValueError as exc:
            raise _Refused(f"{path}: column '{column}': {exc}") from None
    numeric = [n for n, t in zip(table.schema.names, table.schema.types) if pa.types.is_integer(t) or pa.types.is_floating(t)]
    if not numeric:
        raise _Refused(f"{path} has no '{column}' list column and no numeric columns")
    return np.column_stack([table.column(n).to_numpy().astype(np.float64) for n in numeric]), ids


def _read_csv(p: Path) -> Any:
    import pyarrow.csv as pacsv

    with open(p, encoding="utf-8") as fh:
        first = fh.readline().strip().split(",")
    headerless = True
    for x in first:
        try:
            float(x)
        except ValueError:
            headerless = False
            break
    ro = pacsv.ReadOptions(autogenerate_column_names=headerless)
    return pacsv.read_csv(p, read_options=ro)


def _cmd_fit(args: argparse.Namespace) -> int:
    from streamembed import LandmarkMDS
    from streamembed.core.landmarks import maxmin_select

    features = args.features is not None
    sims = args.similarities is not None
    path = args.features if features else (args.similarities if sims else args.dissimilarities)
    M, ids = _read_matrix(path, "features" if features else "dissimilarities")
    N = M.shape[0]
    if not features and M.shape[1] != N:
        raise _Refused(f"{path}: a {'similarity' if sims else 'dissimilarity'} matrix must be square, got shape {M.shape}")
    M_select = M
    if sims:  # landmarks are chosen on the equivalent dissimilarities (seed 000 §3)
        from streamembed.core.kernel_input import check_similarity_matrix, landmark_dissimilarities

        try:
            M_select = landmark_dissimilarities(check_similarity_matrix(M, "similarities"))
        except ValueError as exc:
            raise _Refused(f"{path}: {exc}") from None
    n = args.landmarks or N
    if not 2 <= n <= N:
        raise _Refused(f"--landmarks {n} must be between 2 and the {N} objects in {path}")
    rng = np.random.default_rng(args.seed)
    if n == N:
        idx = np.arange(N)
    elif args.selection == "maxmin":
        first = int(rng.integers(N))
        idx = maxmin_select(n, X=M, metric=args.metric, first=first) if features else maxmin_select(n, D=M_select, first=first)
    elif args.selection == "random":
        idx = np.sort(rng.choice(N, size=n, replace=False))
    else:
        idx = np.arange(n)
    lm_ids = [ids[i] for i in idx] if ids is not None else None
    est = LandmarkMDS(n_components=args.n_components, method=args.method, input="similarity" if sims else "dissimilarity",
                      geodesic_neighbors=args.geodesic_neighbors, correction=args.correction,
                      landmark_map=args.landmark_map)
    t0 = time.perf_counter()
    try:
        if features:
            est.fit_features(M[idx], metric=args.metric, landmark_ids=lm_ids)
        else:
            est.fit(M[np.ix_(idx, idx)], landmark_ids=lm_ids)
    except ValueError as exc:
        raise _Refused(f"cannot fit: {exc}") from None
    est.save(args.output)
    print(f"wrote {args.output}: {n} landmarks (of {N}), d = {args.n_components}, "
          f"{'features/' + args.metric if features else ('similarities' if sims else 'dissimilarities')}, "
          f"fitted in {time.perf_counter() - t0:.2f} s",
          file=sys.stderr)
    return EXIT_OK


# --------------------------------------------------------------------------- embed


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


class _RowGroups:
    """Collects output batches into Parquet row groups of about ``rows`` rows."""

    def __init__(self, writer: Any, rows: int) -> None:
        self.writer, self.rows = writer, rows
        self.pending: list[Any] = []
        self.count = 0

    def add(self, batch: Any) -> None:
        self.pending.append(batch)
        self.count += batch.num_rows
        if self.count >= self.rows:
            self.finish()

    def finish(self) -> None:
        import pyarrow as pa

        if self.pending:
            self.writer.write_table(pa.Table.from_batches(self.pending), row_group_size=max(self.rows, self.count))
        self.pending, self.count = [], 0


def _total_rows(path: Path) -> int | None:
    from streamembed.stream.readers import file_format

    try:
        if file_format(path) == "parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(path).metadata.num_rows)
    except Exception:  # noqa: BLE001 - unknown total: no percentage
        return None
    return None


def _cmd_embed(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from streamembed import ModelFileError
    from streamembed.daemon.app import k0_rows_value
    from streamembed.model_io import load_model
    from streamembed.daemon.config import ConfigError, parse_value
    from streamembed.stream.embedder import BatchEmbedder
    from streamembed.stream.pipeline import BackgroundConsumer, prefetch
    from streamembed.stream.readers import iter_file
    from streamembed.stream.records import output_schema
    from streamembed.atomic import fsync_dir
    from streamembed.stream.sinks import DeadLetterSink

    src = Path(args.input)
    if not src.exists():
        raise _Refused(f"input {src} does not exist")
    try:
        est = load_model(args.model)
    except (ModelFileError, OSError) as exc:
        raise _Refused(f"cannot load model {args.model}: {exc}") from None
    try:
        k0 = k0_rows_value(parse_value("model.k0_rows", args.k0_rows))
    except ConfigError as exc:
        raise _Refused(f"--k0-rows: {exc}") from None
    try:
        est.check_method(args.method)
    except ValueError as exc:
        raise _Refused(f"--method {args.method}: {exc}") from None
    emb = BatchEmbedder(est, method=args.method, k0_rows=k0, max_block_rows=args.max_block_rows)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    dead_path = Path(args.dead_letter) if args.dead_letter else out.with_name(out.stem + ".dead-letter")
    dead_sink: DeadLetterSink | None = None
    progress = Progress(_total_rows(src), {"always": True, "never": False}.get(args.progress, sys.stderr.isatty()))
    writer = pq.ParquetWriter(tmp, output_schema(est.n_components), compression=args.compression)
    # read ahead and write behind on background threads while this one embeds (pipeline.py)
    grouped = _RowGroups(writer, args.row_group_rows)
    background = BackgroundConsumer(grouped.add)
    n_in = n_out = n_dead = 0
    try:
        chunks = iter_file(src, batch_rows=args.batch_rows, max_block_rows=args.max_block_rows, name=src.name)
        for chunk in prefetch(chunks, depth=2):
            dead = list(chunk.dead)
            if chunk.table is not None and chunk.table.num_rows:
                res, more = emb.process(chunk.table, file=src.name, rows=chunk.rows, row_base=chunk.start_row)
                dead.extend(more)
                if res is not None:
                    background.put(res)
                    n_out += res.num_rows
            n_in += (chunk.table.num_rows if chunk.table is not None else 0) + len(chunk.dead)
            if dead:
                if dead_sink is None:
                    dead_sink = DeadLetterSink(dead_path, fmt=args.dead_letter_format, source="embed")
                dead_sink.write(dead, src.name, model_version=emb.model_version)
                n_dead += len(dead)
            progress.update(n_in)
        background.close()
        grouped.finish()
        writer.close()
        os.replace(tmp, out)
        fsync_dir(out.parent)
        if dead_sink is not None:
            dead_sink.flush(src.name)
    except BaseException:
        try:
            background.close()
        finally:
            writer.close()
            tmp.unlink(missing_ok=True)
        raise
    progress.update(n_in, final=True)
    print(f"{n_in} records: {n_out} embedded -> {out}, {n_dead} dead letters"
          + (f" -> {dead_path}/" if n_dead else ""), file=sys.stderr)
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="streamembed",
        description="Streaming incremental embedding: place arriving objects on a landmark MDS map.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from streamembed import __version__

    p.add_argument("--version", action="version", version=f"streamembed {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_: str, func: Callable[[argparse.Namespace], int], desc: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=desc, formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(func=func)
        return sp

    def config_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--config", metavar="PATH", help="TOML file overriding the embedded default (only the keys it sets)")
        sp.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                        help="override one key (repeatable); beats the file and the environment")

    r = add("run", "run the streaming engine (default: generator demo)", _cmd_run,
            "Run the engine: read batches from the source, embed, write Parquet output and dead letters,\n"
            "checkpoint; serve /metrics, /healthz, /readyz. SIGTERM/SIGINT finish the current batch,\n"
            "flush, checkpoint and exit 0. Without --config the embedded default runs the built-in\n"
            "generator against a model fitted at startup.\n\n"
            "Output (output.root, default ./streamembed-out): embeddings/part-<position>.parquet,\n"
            "dead-letter/dead-<position>.parquet (or .jsonl), checkpoint.json.")
    config_args(r)
    r.add_argument("--max-batches", type=int, metavar="N", help="stop after N batches (run.max_batches)")
    r.add_argument("--max-records", type=int, metavar="N", help="stop after N input records (run.max_records)")
    r.add_argument("--metrics-port", type=int, metavar="PORT", help="metrics.port (0: a free port)")

    f = add("fit", "fit a landmark model (.npz) from a dissimilarity matrix or feature vectors", _cmd_fit,
            "Fit a landmark model. Input: --dissimilarities (N x N, not squared) or --features (N x p)\n"
            "from .npy, .csv (numeric columns; an 'id' column names objects), or Parquet/Arrow/JSONL\n"
            "(a 'dissimilarities' / 'features' list column, or numeric columns; optional 'id').\n"
            "With --landmarks n < N, n landmarks are chosen by --selection (maxmin: farthest point).")
    src = f.add_mutually_exclusive_group(required=True)
    src.add_argument("--dissimilarities", metavar="FILE", help="N x N dissimilarity matrix")
    src.add_argument("--features", metavar="FILE", help="N x p feature vectors (feature-mode model)")
    src.add_argument("--similarities", metavar="FILE",
                     help="N x N similarity (kernel) matrix: a model whose input rows are similarities (seed 000 §3)")
    f.add_argument("--metric", default="euclidean", help="scipy cdist metric for --features (default: euclidean)")
    f.add_argument("--landmarks", type=int, metavar="N", help="number of landmarks (default: all objects)")
    f.add_argument("--selection", choices=("maxmin", "random", "first"), default="maxmin",
                   help="how to choose the landmarks (default: maxmin)")
    f.add_argument("--n-components", type=int, default=2, metavar="D", help="map dimensions (default: 2)")
    f.add_argument("--method", choices=("projection", "restricted", "stress", "l1"), default="projection",
                   help="default embedding method stored with the model")
    f.add_argument("--geodesic-neighbors", type=int, metavar="K",
                   help="landmark Isomap: geodesic distances through the K-nearest-neighbour graph (seed 001 §4)")
    f.add_argument("--correction", choices=("none", "cailliez"), default="none",
                   help="non-Euclidean correction: cailliez adds the constant making the kernel PSD (seed 001 §4.2)")
    f.add_argument("--landmark-map", choices=("cmds", "smacof", "sammon"), default="cmds",
                   help="refine the landmark map by SMACOF or Sammon (seed 001 §2.2-3; needs --method stress or l1)")
    f.add_argument("--seed", type=int, default=0, help="seed for the first max-min / random landmarks")
    f.add_argument("-o", "--output", required=True, metavar="MODEL.npz", help="where to write the model")

    e = add("embed", "embed one file (Parquet/Arrow/JSONL) into a Parquet file", _cmd_embed,
            "One-shot embedding of INPUT with MODEL into OUTPUT (Parquet, written atomically).\n"
            "Rejected records go to a dead-letter directory (default: <OUTPUT stem>.dead-letter).")
    e.add_argument("input", metavar="INPUT", help="input file (.parquet, .arrow/.arrows, .jsonl)")
    e.add_argument("-m", "--model", required=True, metavar="MODEL.npz")
    e.add_argument("-o", "--output", required=True, metavar="OUTPUT.parquet")
    e.add_argument("--method", choices=("projection", "restricted", "stress", "l1"), default="projection")
    e.add_argument("--k0-rows", default="none", metavar="none|all|N", help="rows per batch with exact k0")
    e.add_argument("--batch-rows", type=int, default=8192, metavar="N", help="rows per batch (default 8192)")
    e.add_argument("--row-group-rows", type=int, default=262144, metavar="N", help="Parquet row-group size")
    e.add_argument("--max-block-rows", type=int, default=4096, metavar="N", help="largest block with 'cross'")
    e.add_argument("--compression", default="zstd", choices=("zstd", "snappy", "gzip", "lz4", "none"))
    e.add_argument("--dead-letter", metavar="DIR", help="dead-letter directory")
    e.add_argument("--dead-letter-format", choices=("parquet", "jsonl"), default="parquet")
    e.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress bar on stderr (auto: when stderr is a terminal)")

    rf = add("refit", "ask the running daemon for a landmark refit now", _cmd_refit,
             "Send SIGUSR1 to the daemon whose pid file is <output.root>/streamembed.pid. The daemon refits\n"
             "in the background from its reservoir of landmark candidates, aligns the new map to the old one\n"
             "by Procrustes, swaps it in between batches and appends a record to <output.root>/model-history.jsonl.")
    config_args(rf)

    for name, (_, help_) in _TOOLS.items():
        sub.add_parser(name, help=help_, add_help=False)  # listed here; main() hands them their arguments

    c = add("config", "print the effective configuration (TOML or JSON)", _cmd_config,
            "Print the effective configuration after the file, environment and --set overrides.\n"
            "Environment: STREAMEMBED_<SECTION>__<KEY>=value, e.g. STREAMEMBED_METRICS__PORT=0.")
    config_args(c)
    c.add_argument("--format", choices=("toml", "json"), default="toml")
    c.add_argument("--no-comments", action="store_true", help="TOML without the per-key documentation")
    c.add_argument("--reference", action="store_true", help="print the key reference as a Markdown table")
    c.add_argument("--defaults", action="store_true",
                   help="print the documented default configuration (what config/default.toml holds)")
    return p


#: Subcommands with their own parsers: name -> (module with main(argv), help).
_TOOLS: dict[str, tuple[str, str]] = {
    "bench": ("streamembed.evaluation.bench", "throughput against the memory-read ceiling (and scikit-learn)"),
    "evaluate": ("streamembed.evaluation.evaluate", "placement quality of every method against full refits"),
    "plot": ("streamembed.evaluation.plots", "render the map or the drift history to PNG (needs matplotlib)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns (and, as a script, exits with) the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in _TOOLS:
        import importlib

        module = importlib.import_module(_TOOLS[args_list[0]][0])
        return int(module.main(args_list[1:]))
    parser = build_parser()
    args = parser.parse_args(args_list)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_REFUSED
    try:
        return int(args.func(args))
    except _Refused as exc:
        print(f"streamembed {args.command}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
