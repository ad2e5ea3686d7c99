"""What every subcommand of the command line shares: exit codes, refusal, the subparser and configuration helpers.

Exit codes shared by every subcommand: 0 success, 1 done with failures (e.g.
``embed`` wrote dead letters) or failed while running, 2 refused (bad
arguments, configuration, model or input: the message says what to fix),
3 the environment is not ready (``run``: retry later).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = ["Refused", "EXIT_OK", "EXIT_FAILED", "EXIT_REFUSED", "Subparsers", "subcommand", "config_args", "load"]

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2

#: What ``argparse.ArgumentParser.add_subparsers`` returns (a private argparse class, hence the string).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class Refused(Exception):
    """Refuse with exit code 2 and this message."""


def subcommand(subparsers: Subparsers, name: str, help_: str, run: Callable[[argparse.Namespace], int] | None,
               description: str) -> argparse.ArgumentParser:
    """Register subcommand ``name`` (help and description printed as written) and its ``run(args) -> int``."""
    parser = subparsers.add_parser(
        name, help=help_, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    if run is not None:
        parser.set_defaults(func=run)
    return parser


def config_args(parser: argparse.ArgumentParser) -> None:
    """``--config`` and ``--set``: the flags of the subcommands that read the configuration (run, refit, config)."""
    parser.add_argument("--config", metavar="PATH", help="TOML file overriding the defaults (only the keys it sets)")
    parser.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                        help="override one key (repeatable); beats the file and the environment")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in getattr(args, "set", None) or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise Refused(f"--set expects section.key=value, got {item!r}")
        out[key.strip()] = value
    return out


def load(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> Any:
    """The effective configuration: defaults < ``--config`` < environment < ``--set`` < ``extra`` (flags)."""
    from streamembed.config import ConfigError, load_config

    overrides = _overrides(args)
    overrides.update(extra or {})
    try:
        return load_config(args.config, environ=os.environ, overrides=overrides)
    except ConfigError as exc:
        raise Refused(f"configuration error: {exc}") from None
