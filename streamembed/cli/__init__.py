"""The ``streamembed`` command line: the parser's assembly and dispatch, one module per subcommand.

Subcommands: ``run`` (the daemon), ``fit`` (a landmark model from a file),
``embed`` (one file in, one Parquet file out), ``model info``, ``model landmarks``,
``refit``, ``producer rows|answer`` (the producer kit),
``config``, ``plot`` and ``evaluate`` (its own parser; the benchmarks are not
installed: ``python -m benchmarks`` from a source checkout). Each module exports
``HELP`` (its line in ``--help``), ``add_parser(subparsers)`` and ``run(args)
-> int`` and imports its heavy dependencies inside ``run``: building the parser
stays cheap. Option choices and defaults come from ``core.options`` and
``config.schema`` (which import numpy), so only the subcommand a command line
names gets its whole parser: ``streamembed --help`` lists every subcommand by
its ``HELP`` line and imports neither numpy nor pyarrow
(tests/design/test_imports.py).
Exit codes (``cli.common``): 0 success; 1 done with failures (``embed``: dead
letters) or failed while running (``run`` resumes from its checkpoint); 2
refused (bad arguments, configuration, model, input or run state: the message
says what to fix); 3 ``run``: the environment is not ready (full disk, port
taken, brokers unreachable), retry later.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from streamembed.cli import config, embed, evaluate, fit, model, plot, producer, refit, run
from streamembed.cli.common import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, Refused

__all__ = ["main", "build_parser", "SUBCOMMANDS"]

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

#: The subcommands in the order ``--help`` lists them.
SUBCOMMANDS = (run, fit, embed, model, refit, producer, evaluate, plot, config)

#: Subcommands that read their own arguments before the tree is built: ``evaluate`` (its parser describes the
#: evaluation code, which imports scipy). Name -> ``main(argv) -> int``.
_OWN_ARGUMENTS = {"evaluate": evaluate.main}


class _Version(argparse.Action):
    """``--version``: the installed version, read (``importlib.metadata``) only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from streamembed import __version__

        sys.stdout.write(f"streamembed {__version__}\n")
        parser.exit()


def _name(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[1]


def build_parser(command: str | None = "*") -> argparse.ArgumentParser:
    """The parser: one subparser per subcommand, in full (its module's ``add_parser``) for ``command`` ("*", the
    default: every subcommand; None: none), by its name and ``HELP`` line only for the others."""
    p = argparse.ArgumentParser(
        prog="streamembed",
        description="Streaming incremental embedding: place arriving objects on a landmark MDS map.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        if command in ("*", _name(module)):
            module.add_parser(sub)
        else:
            sub.add_parser(_name(module), help=module.HELP)
    return p


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
    if args_list and args_list[0] in _OWN_ARGUMENTS:
        return int(_OWN_ARGUMENTS[args_list[0]](args_list[1:]))
    named = args_list[0] if args_list and args_list[0] in {_name(m) for m in SUBCOMMANDS} else None
    parser = build_parser(named)  # the others' parsers are not built: `streamembed --help` stays cheap
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

