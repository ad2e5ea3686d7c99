"""The configuration: its schema, loading, checks and rendering (one concept, one folder).

* ``schema`` — every section, key, default and choice, with its documentation
  (model options from ``core.options``), written with the field helpers of ``fields``;
* ``ranges`` — the range of every numeric key, one table;
* ``load`` — defaults < TOML file < environment < overrides, each value checked by its key's type;
* ``checks`` — the combinations: the option table's rules, then the daemon's own (memory included);
* ``render`` — ``config/default.toml``, JSON, and the key reference table;
* ``core_args`` — the one boundary to the core: a setting's "off" value (0, "none") becomes None;
* ``sources`` — the source kinds (``source.kind``): each one's builder, settings, commits and file names.

The names below are the ones the commands, the daemon and the tests use.
"""

from streamembed.config.checks import ConfigError, check_memory, memory_needs, weakening_settings
from streamembed.config.load import ENV_PREFIX, env_overrides, load_config, parse_value
from streamembed.config.render import (default_toml_text, reference_markdown, reference_rows, to_dict, to_json,
                                       to_toml)
from streamembed.config.core_args import core_args, core_value, k0_rows_value
from streamembed.config.schema import MAX_DURATION_SECONDS, Config

__all__ = ["Config", "ConfigError", "ENV_PREFIX", "MAX_DURATION_SECONDS", "load_config", "parse_value",
           "env_overrides", "check_memory", "memory_needs", "default_toml_text", "reference_markdown",
           "reference_rows", "to_dict", "to_json", "to_toml", "k0_rows_value", "core_args",
           "core_value", "weakening_settings"]
