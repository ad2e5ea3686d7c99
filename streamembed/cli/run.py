"""``streamembed run``: the daemon (``streamembed.daemon.app``) on the effective configuration."""

from __future__ import annotations

import argparse
from typing import Any

from streamembed.cli.common import Subparsers, config_args, load, subcommand

__all__ = ["add_parser", "run"]

#: The subcommand's line in ``streamembed --help``.
HELP = "run the streaming engine (default: generator demo)"


def run(args: argparse.Namespace) -> int:
    from streamembed.daemon.app import run_daemon

    extra: dict[str, Any] = {}
    if args.max_batches is not None:
        extra["run.max_batches"] = args.max_batches
    if args.max_records is not None:
        extra["run.max_records"] = args.max_records
    if args.metrics_port is not None:
        extra["metrics.port"] = args.metrics_port
    if args.fresh:
        extra["run.fresh"] = True
    return run_daemon(load(args, extra))


def add_parser(subparsers: Subparsers) -> None:
    r = subcommand(subparsers, "run", HELP, run,
                   "Run the engine: read batches from the source, embed, write Parquet output and dead letters,\n"
                   "checkpoint; serve /metrics, /healthz, /readyz. SIGTERM/SIGINT finish the current batch,\n"
                   "flush, checkpoint and exit 0. Without --config the defaults run the built-in generator\n"
                   "against a model fitted at startup.\n\n"
                   "Output (output.root, default ./streamembed-out): embeddings/part-<position>.parquet,\n"
                   "dead-letter/dead-<position>.parquet (or .jsonl), checkpoint.json, models/, and the\n"
                   "histories model-history.jsonl and drift-history.jsonl. One root holds one map's run: a\n"
                   "root holding another model's run is refused (exit 2) unless --fresh moves it aside.")
    config_args(r)
    r.add_argument("--max-batches", type=int, metavar="N", help="stop after N batches (run.max_batches)")
    r.add_argument("--max-records", type=int, metavar="N", help="stop after N input records (run.max_records)")
    r.add_argument("--metrics-port", type=int, metavar="PORT", help="metrics.port (0: a free port)")
    r.add_argument("--fresh", action="store_true",
                   help="start over: move the previous run's state in output.root aside (run.fresh)")
