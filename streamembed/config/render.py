"""Rendering the configuration: documented TOML (``config/default.toml``), JSON, and the key reference table.

The output format is fixed: ``config/default.toml`` and the configuration
reference (``streamembed config --reference``) are generated from it and
compared by tests (tests/daemon/test_config.py, tests/test_readme.py).
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from typing import Any

from streamembed.config.ranges import describe_range, range_of
from streamembed.config.schema import Config, section_keys, sections

__all__ = ["default_toml_text", "to_dict", "to_json", "to_toml", "reference_markdown", "reference_rows"]

_HEADER = """\
# streamembed - the default configuration, generated from the schema (streamembed/config/schema.py)
# by `streamembed config --defaults`; a test keeps config/default.toml equal to it.
#
# `streamembed run` with no --config runs exactly these values. A file given with
# --config only needs the keys it changes. Every key can also be set from the
# environment, STREAMEMBED_<SECTION>__<KEY>=<value> (e.g. STREAMEMBED_METRICS__PORT=0),
# and on the command line, --set section.key=value.
# Precedence: these defaults < --config file < environment < command-line flags.
# Unknown keys, wrong types and out-of-range values refuse to start (exit 2).
"""


def default_toml_text() -> str:
    """The default configuration as documented TOML (what ``config/default.toml`` holds)."""
    return _HEADER + "\n" + to_toml(Config())


def to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    return {name: dataclasses.asdict(getattr(cfg, name)) for name in sections()}


def _redacted(cfg: Config) -> dict[str, dict[str, Any]]:
    """:func:`to_dict` with secrets (passwords) replaced, for printing."""
    doc = to_dict(cfg)
    for section, cls in sections().items():
        for name, (_, f) in section_keys(cls).items():
            value = doc[section][name]
            if f.metadata.get("secret") and value:
                doc[section][name] = "<redacted>"
            elif isinstance(value, dict):
                doc[section][name] = {k: "<redacted>" if "password" in k.lower() else v for k, v in value.items()}
    return doc


def to_json(cfg: Config) -> str:
    return json.dumps(_redacted(cfg), indent=2)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):  # an inline table
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string is a JSON string for our values


def to_toml(cfg: Config, *, comments: bool = True) -> str:
    """The configuration as TOML: every key, with its documentation as comments above it."""
    lines: list[str] = []
    shown = _redacted(cfg)
    for section, cls in sections().items():
        tables: list[tuple[str, Any, str]] = []
        if comments and cls.__doc__:
            lines.append(f"# {cls.__doc__.strip()}")
        lines.append(f"[{section}]")
        for name, (_, f) in section_keys(cls).items():
            value = shown[section][name]
            doc = f.metadata.get("doc", "")
            ch = f.metadata.get("choices")
            if ch and comments:
                doc += f" One of: {', '.join(map(str, ch))}."
            if isinstance(value, dict):  # a sub-table: rendered after the section's keys
                tables.append((name, value, doc))
                continue
            if comments and doc:
                lines.extend(textwrap.wrap(doc, 88, initial_indent="# ", subsequent_indent="# "))
            lines.append(f"{name} = {_toml_value(value)}")
        for name, value, doc in tables:
            lines.append("")
            if comments and doc:
                lines.extend(textwrap.wrap(doc, 88, initial_indent="# ", subsequent_indent="# "))
            lines.append(f"[{section}.{name}]")
            lines.extend(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items())
        lines.append("")
    return "\n".join(lines)


def reference_markdown() -> str:
    """The key reference as a Markdown table (``streamembed config --reference``, docs/configuration.md)."""
    lines = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key, default, doc in reference_rows():
        cell = doc.replace("|", "\\|")
        lines.append(f"| `{key}` | `{default}` | {cell} |")
    return "\n".join(lines) + "\n"


def reference_rows() -> list[tuple[str, str, str]]:
    """(``section.key``, default as TOML, documentation) for every key."""
    cfg = Config()
    rows = []
    for section, cls in sections().items():
        for name, (_, f) in section_keys(cls).items():
            doc = f.metadata.get("doc", "")
            ch = f.metadata.get("choices")
            if ch:
                doc += f" (one of: {', '.join(map(str, ch))})"
            r = range_of(f"{section}.{name}")
            if r is not None:
                doc += f" (range: {describe_range(r)})"
            rows.append((f"{section}.{name}", _toml_value(getattr(getattr(cfg, section), name)), doc))
    return rows
