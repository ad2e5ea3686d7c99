"""``streamembed config``: the effective configuration (TOML or JSON), the documented defaults, the key reference."""

from __future__ import annotations

import argparse

from streamembed.cli.common import EXIT_OK, Subparsers, config_args, load, subcommand

__all__ = ["add_parser", "run"]

#: The subcommand's line in ``streamembed --help``.
HELP = "print the effective configuration (TOML or JSON)"


def run(args: argparse.Namespace) -> int:
    from streamembed.config import default_toml_text, reference_markdown, to_json, to_toml

    if args.defaults:
        print(default_toml_text(), end="")
        return EXIT_OK
    if args.reference:
        print(reference_markdown(), end="")
        return EXIT_OK
    cfg = load(args)
    print(to_json(cfg) if args.format == "json" else to_toml(cfg, comments=not args.no_comments))
    return EXIT_OK


def add_parser(subparsers: Subparsers) -> None:
    c = subcommand(subparsers, "config", HELP, run,
                   "Print the effective configuration after the file, environment and --set overrides.\n"
                   "Environment: STREAMEMBED_<SECTION>__<KEY>=value, e.g. STREAMEMBED_METRICS__PORT=0.")
    config_args(c)
    c.add_argument("--format", choices=("toml", "json"), default="toml")
    c.add_argument("--no-comments", action="store_true", help="TOML without the per-key documentation")
    c.add_argument("--reference", action="store_true", help="print the key reference as a Markdown table")
    c.add_argument("--defaults", action="store_true",
                   help="print the documented default configuration (what config/default.toml holds)")
