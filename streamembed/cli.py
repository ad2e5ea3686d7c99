"""The ``streamembed`` command line: parsing and dispatch (each subcommand lives in ``streamembed.commands``).

Subcommands: ``run`` (the daemon), ``fit`` (a landmark model from a file),
``embed`` (one file in, one Parquet file out), ``model info``, ``refit``,
``config``, and ``bench`` / ``evaluate`` / ``plot`` (their own parsers).
Exit codes: 0 success; 1 done with failures (``embed``: dead letters) or
failed while running (``run`` resumes from its checkpoint); 2 refused (bad
arguments, configuration, model, input or run state: the message says what
to fix); 3 ``run``: the environment is not ready (full disk, port taken,
brokers unreachable), retry later.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any
from collections.abc import Callable, Sequence

from streamembed.commands import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, Refused

__all__ = ["main", "build_parser"]

_EPILOG = """\
configuration (run, config, refit):
  the defaults < --config FILE < environment STREAMEMBED_<SECTION>__<KEY>=value
  < --set section.key=value < flags such as --max-batches. `streamembed config`
  prints the effective configuration with every key documented.

examples:
  streamembed run --max-batches 50          # generator demo, output in ./streamembed-out
  streamembed fit --features X.npy --metric euclidean --landmarks 200 -o model.npz
  streamembed embed objects.parquet -m model.npz -o embedded.parquet
  streamembed model info model.npz          # landmark ids in model order, version, lineage
  STREAMEMBED_SOURCE__KIND=directory STREAMEMBED_MODEL__PATH=model.npz streamembed run

exit codes: 0 done; 1 done with failures (embed: dead letters) or failed while running
  (run resumes from its checkpoint); 2 refused: bad arguments or configuration, missing or
  corrupt model, unreadable input, another map's state in output.root (the message says
  what to fix); 3 run: the environment is not ready (disk full, port taken, brokers
  unreachable), retry later.

the mathematics: docs/math.md in the source repository.
"""


# --------------------------------------------------------------------------- config helpers


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in getattr(args, "set", None) or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise Refused(f"--set expects section.key=value, got {item!r}")
        out[key.strip()] = value
    return out


def _load(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> Any:
    from streamembed.config import ConfigError, load_config

    overrides = _overrides(args)
    overrides.update(extra or {})
    try:
        return load_config(args.config, environ=os.environ, overrides=overrides)
    except ConfigError as exc:
        raise Refused(f"configuration error: {exc}") from None


# --------------------------------------------------------------------------- run, refit, config


def _cmd_run(args: argparse.Namespace) -> int:
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
    return run_daemon(_load(args, extra))


def _cmd_refit(args: argparse.Namespace) -> int:
    """Ask the running daemon of this configuration for a landmark refit (SIGUSR1)."""
    import signal

    from streamembed.daemon.state import PidLock

    cfg = _load(args)
    pid = PidLock.running(cfg.pid_path)
    if pid is None:
        raise Refused(f"no running daemon for output.root = {cfg.output.root!r} ({cfg.pid_path} is missing, or "
                      f"stale: its daemon is gone); start one with `streamembed run`")
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        raise Refused(f"the daemon (pid {pid}) exited just now") from None
    print(f"asked daemon {pid} for a refit; see {cfg.history_path} and streamembed_refits_total", file=sys.stderr)
    return EXIT_OK


def _cmd_config(args: argparse.Namespace) -> int:
    from streamembed.config import default_toml_text, reference_markdown, to_json, to_toml

    if args.defaults:
        print(default_toml_text(), end="")
        return EXIT_OK
    if args.reference:
        print(reference_markdown(), end="")
        return EXIT_OK
    cfg = _load(args)
    print(to_json(cfg) if args.format == "json" else to_toml(cfg, comments=not args.no_comments))
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from streamembed import __version__
    from streamembed.commands import embed, fit, model

    p = argparse.ArgumentParser(
        prog="streamembed",
        description="Streaming incremental embedding: place arriving objects on a landmark MDS map.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"streamembed {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_: str, func: Callable[[argparse.Namespace], int] | None,
            desc: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=desc, formatter_class=argparse.RawDescriptionHelpFormatter)
        if func is not None:
            sp.set_defaults(func=func)
        return sp

    def config_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--config", metavar="PATH", help="TOML file overriding the defaults (only the keys it sets)")
        sp.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                        help="override one key (repeatable); beats the file and the environment")

    r = add("run", "run the streaming engine (default: generator demo)", _cmd_run,
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

    fit.add_parser(add)
    embed.add_parser(add)
    model.add_parser(add)

    rf = add("refit", "ask the running daemon for a landmark refit now", _cmd_refit,
             "Send SIGUSR1 to the daemon holding <output.root>/streamembed.pid (a stale file is refused:\n"
             "a live daemon holds a lock on it). The daemon refits in the background from its reservoir\n"
             "of landmark candidates, aligns the new map to the old one by Procrustes, swaps it in\n"
             "between batches and appends a record to <output.root>/model-history.jsonl.")
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
    "evaluate": ("streamembed.commands.evaluate", "landmark choice for your data against a full classical MDS "
                 "(--features/--dissimilarities)"),
    "plot": ("streamembed.plots", "render the map or the drift history to PNG (needs matplotlib)"),
}


#: Former subcommands that measure rather than serve (not installed with the package): name -> where they went.
_MOVED: dict[str, str] = {"bench": "python -m benchmarks bench"}


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns (and, as a script, exits with) the exit code."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader went away (`streamembed config | head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in _MOVED:
        print(f"streamembed {args_list[0]}: benchmarks are not installed with the package; run "
              f"`{_MOVED[args_list[0]]}` from a source checkout", file=sys.stderr)
        return EXIT_REFUSED
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
    except Refused as exc:
        print(f"streamembed {args.command}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
