"""``streamembed refit``: ask the running daemon of this configuration for a landmark refit (SIGUSR1)."""

from __future__ import annotations

import argparse
import os
import sys

from streamembed.cli.common import EXIT_OK, Refused, Subparsers, config_args, load, subcommand

__all__ = ["add_parser", "run"]

#: The subcommand's line in ``streamembed --help``.
HELP = "ask the running daemon for a landmark refit now"


def run(args: argparse.Namespace) -> int:
    """Ask the running daemon of this configuration for a landmark refit (SIGUSR1)."""
    import signal

    from streamembed.daemon.state import PidLock

    cfg = load(args)
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


def add_parser(subparsers: Subparsers) -> None:
    rf = subcommand(subparsers, "refit", HELP, run,
                    "Send SIGUSR1 to the daemon holding <output.root>/streamembed.pid (a stale file is refused:\n"
                    "a live daemon holds a lock on it). The daemon refits in the background from its reservoir\n"
                    "of landmark candidates, aligns the new map to the old one by Procrustes, swaps it in\n"
                    "between batches and appends a record to <output.root>/model-history.jsonl.")
    config_args(rf)
