"""Loading the configuration: defaults, a TOML file, environment variables and command-line overrides.

The schema — every key, default, choice, range and its documentation — is
``streamembed.config.schema``; this module reads and checks values by each
key's type and metadata only (no key is special-cased by name), then
``config.checks`` checks the combinations.

Precedence, lowest first: the schema's defaults (``Config()``, which
``config/default.toml`` renders) < a TOML file (``--config``) < environment
variables < command-line flags.

Environment overrides: ``STREAMEMBED_<SECTION>__<KEY>=<value>``, the whole
name in any case (``streamembed_output__roll_rows`` too; two variables naming
one key are an error), separated by a double underscore, e.g.
``STREAMEMBED_OUTPUT__ROLL_ROWS=5000`` or ``STREAMEMBED_METRICS__PORT=0``.
The value is parsed by the key's type: integers and floats as numbers,
booleans as true/false/1/0/yes/no/on/off, strings verbatim (no quotes);
``model.k0_rows`` takes ``none``, ``all`` or an integer. A variable that
starts with ``STREAMEMBED_`` and contains ``__`` but names no key is an error,
and so is one without ``__`` that looks like a key (``STREAMEMBED_MODEL_PATH``:
"did you mean STREAMEMBED_MODEL__PATH?").

Any unknown section or key, wrong type or out-of-range value raises
:class:`ConfigError` naming the key, the value and the range (every numeric
key's range is stated on its field, ``config.fields``; ``config.ranges`` reads
them as one table). Numbers must be finite (``nan`` and ``inf`` are refused,
from TOML, the environment and flags alike), every duration (``*_seconds``,
``*_ms``) is at most ``MAX_DURATION_SECONDS`` (23 days), and settings whose memory grows with their value (the refit
reservoir, the drift window, the largest block, a generator-fitted model, the
Kafka buffers) are checked against the process's memory limit
(``streamembed.memlimit``): a configuration that cannot fit is refused with
what it needs and what there is.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import stat
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamembed.config.checks import ConfigError, cross_check
from streamembed.config.ranges import describe_range, range_of
from streamembed.config.schema import Config, section_keys, sections

__all__ = ["ConfigError", "ENV_PREFIX", "load_config", "parse_value", "env_overrides"]

ENV_PREFIX = "STREAMEMBED_"


# ------------------------------------------------------------------------ values


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_name(tp: Any, f: dataclasses.Field[Any]) -> str:
    if typing.get_origin(tp) is dict:
        return "a table (in the environment: a JSON object)"
    words = f.metadata.get("words")
    if words:  # a str | int field: words or an integer
        return ", ".join(words) + " or an integer"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}[tp]


def _float(key: str, value: Any) -> float:
    try:
        x = float(value)
    except OverflowError:  # an integer too large for a float
        x = math.inf
    if not math.isfinite(x):
        raise ConfigError(f"{key} = {value!r} is not a finite number")
    return x


def _typed(key: str, tp: Any, f: dataclasses.Field[Any], value: Any) -> tuple[bool, Any]:
    """(value is of the key's type, the value normalised: a float, a dict copy, a word in lower case)."""
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return _is_int(value), value
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, _float(key, value) if ok else value
    if tp is str:
        return isinstance(value, str), value
    if typing.get_origin(tp) is dict:  # a free-form table such as [kafka.client]
        ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
        return ok, dict(value) if ok else value
    # a str | int field: an integer, or one of its words in any case
    if isinstance(value, str):
        return value.lower() in f.metadata.get("words", ()), value.lower()
    return _is_int(value), value


def _chosen(key: str, f: dataclasses.Field[Any], value: Any) -> Any:
    """The value among the key's choices (matched in any case where the schema says so), or ConfigError."""
    choices = f.metadata.get("choices")
    if choices is None:
        return value
    if f.metadata.get("fold_case") and isinstance(value, str):
        value = next((c for c in choices if isinstance(c, str) and c.lower() == value.lower()), value)
    if value not in choices:
        raise ConfigError(f"{key} = {value!r} is not one of {', '.join(map(repr, choices))}")
    return value


def _in_range(key: str, f: dataclasses.Field[Any], value: Any) -> None:
    """Refuse a number outside the key's range (its field's ``min`` / ``max``, read through ``config.ranges``)."""
    r = range_of(key)
    if r is None:
        raise ConfigError(f"{key} = {value!r}: {key} takes no number")
    if not r.contains(value):
        raise ConfigError(f"{key} = {value!r} is out of range (must be {describe_range(r)})")


def _check_value(key: str, tp: Any, f: dataclasses.Field[Any], value: Any) -> Any:
    """Type-check, choice-check and range-check one value (from TOML or already parsed), by the key's field."""
    ok, value = _typed(key, tp, f, value)
    if not ok:
        raise ConfigError(f"{key} = {value!r} is not {_type_name(tp, f)}")
    value = _chosen(key, f, value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _in_range(key, f, value)
    return value


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_value(key: str, text: str) -> Any:
    """Parse the string ``text`` for ``section.key`` by the key's type."""
    section, name = _split_key(key)
    tp, f = section_keys(sections()[section])[name]
    t = text.strip()
    try:
        if tp is bool:
            if t.lower() in _TRUE:
                return _check_value(key, tp, f, True)
            if t.lower() in _FALSE:
                return _check_value(key, tp, f, False)
            raise ValueError
        if tp is int:
            return _check_value(key, tp, f, int(t))
        if tp is float:
            return _check_value(key, tp, f, float(t))
        if tp is str:
            return _check_value(key, tp, f, text)
        if typing.get_origin(tp) is dict:
            return _check_value(key, tp, f, json.loads(text))
        return _check_value(key, tp, f, int(t) if t.lstrip("+-").isdigit() else t)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{key} = {text!r} is not {_type_name(tp, f)}") from None


def _split_key(key: str) -> tuple[str, str]:
    _retired(key)
    section, _, name = key.partition(".")
    known = sections()
    if section not in known:
        raise ConfigError(f"unknown config section {section!r} (in {key!r}); known: {', '.join(known)}")
    keys = section_keys(known[section])
    if name not in keys:
        raise ConfigError(f"unknown config key {key!r}; keys of [{section}]: {', '.join(keys)}")
    return section, name


# ------------------------------------------------------------------------ loading


#: Keys that were removed or merged, with what to use instead.
_RETIRED = {
    "drift.k0_sample": "drift.k0_sample was merged into model.k0_rows (rows per batch with exact k0, used by the "
                       "output and by drift monitoring)",
}


def _retired(key: str) -> None:
    if key in _RETIRED:
        raise ConfigError(f"{key} is no longer a setting: {_RETIRED[key]}")


def _apply_doc(cfg: Config, doc: Mapping[str, Any], origin: str) -> None:
    known = sections()
    for section, body in doc.items():
        if section not in known:
            raise ConfigError(f"unknown config section [{section}] in {origin}; known: {', '.join(known)}")
        if not isinstance(body, dict):
            raise ConfigError(f"{section} in {origin} must be a table ([{section}])")
        keys = section_keys(known[section])
        target = getattr(cfg, section)
        for name, value in body.items():
            key = f"{section}.{name}"
            _retired(key)
            if name not in keys:
                raise ConfigError(f"unknown config key {key!r} in {origin}; keys of [{section}]: {', '.join(keys)}")
            tp, f = keys[name]
            setattr(target, name, _check_value(key, tp, f, value))


#: The largest configuration file read (bytes): a configuration is a few kilobytes.
MAX_CONFIG_BYTES = 1 << 20


def _read_toml(path: Path) -> dict[str, Any]:
    """The TOML document of ``path``: a regular file of at most ``MAX_CONFIG_BYTES``, opened without blocking (a
    FIFO or a device is refused, not waited on or read forever), any failure a ConfigError naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"config file {path} is not a regular file (a directory, device or FIFO): give the "
                              f"path of a TOML file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {path} has {st.st_size} bytes, more than a configuration "
                              f"({MAX_CONFIG_BYTES} at most): is it the right file?")
        data = os.read(fd, MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    finally:
        os.close(fd)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not text (UTF-8): {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config file {path} is not a configuration: its tables or arrays are nested too "
                          f"deeply") from None


def env_overrides(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(``section.key``, value) pairs from ``STREAMEMBED_<SECTION>__<KEY>`` variables."""
    out = []
    known = _env_names()
    named: dict[str, str] = {}  # key -> the variable that set it
    for var, value in sorted(environ.items()):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX):
            continue
        if "__" not in upper[len(ENV_PREFIX):]:
            near = difflib.get_close_matches(upper, known, n=1, cutoff=0.85)
            if near:
                raise ConfigError(f"environment variable {var} names no setting: did you mean {near[0]}? "
                                  f"(STREAMEMBED_<SECTION>__<KEY>, with a double underscore)")
            continue
        section, _, name = upper[len(ENV_PREFIX):].partition("__")
        key = f"{section.lower()}.{name.lower()}"
        try:
            _split_key(key)
        except ConfigError as exc:
            raise ConfigError(f"environment variable {var}: {exc}") from None
        if key in named:
            raise ConfigError(f"environment variables {named[key]} and {var} both set {key} (names are matched in "
                              f"any case): keep one")
        named[key] = var
        out.append((key, value))
    return out


def _env_names() -> list[str]:
    return [f"{ENV_PREFIX}{section.upper()}__{name.upper()}" for section, cls in sections().items()
            for name in section_keys(cls)]


def load_config(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """The effective configuration (see the module doc for precedence).

    ``overrides`` maps ``section.key`` to a value: strings are parsed like
    environment values, other values are type-checked as given.
    """
    cfg = Config()
    if path is not None:
        _apply_doc(cfg, _read_toml(Path(path)), str(path))
    env = environ or {}
    named = {f"{v.upper()}": v for v in env}
    for key, text in env_overrides(env):
        section, name = _split_key(key)
        try:
            setattr(getattr(cfg, section), name, parse_value(key, text))
        except ConfigError as exc:
            var = named.get(f"{ENV_PREFIX}{section.upper()}__{name.upper()}", f"{ENV_PREFIX}{section.upper()}__"
                                                                              f"{name.upper()}")
            raise ConfigError(f"environment variable {var}: {exc}") from None
    for key, value in (overrides or {}).items():
        section, name = _split_key(key)
        tp, f = section_keys(sections()[section])[name]
        v = parse_value(key, value) if isinstance(value, str) else _check_value(key, tp, f, value)
        setattr(getattr(cfg, section), name, v)
    cross_check(cfg)
    return cfg


