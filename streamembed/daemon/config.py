"""Configuration loading: TOML files, environment overrides, validation, rendering.

The schema — every key, default, choice, range and its documentation — is
``streamembed.settings``; this module only reads, checks and writes it.

Precedence, lowest first: the schema's defaults (``settings.Config()``, which
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
:class:`ConfigError` naming the key and the value. Numbers must be finite
(``nan`` and ``inf`` are refused, from TOML, the environment and flags alike),
every duration (``*_seconds``, ``*_ms``) is at most ``MAX_DURATION_SECONDS``
(23 days), and settings whose memory grows with their value (the refit
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
import textwrap
import tomllib
import typing
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from streamembed.memlimit import MemoryLimit, format_bytes, memory_limit
from streamembed.settings import K0_STATISTICS, Config

__all__ = [
    "ConfigError",
    "Config",
    "ENV_PREFIX",
    "load_config",
    "default_toml_text",
    "reference_rows",
    "reference_markdown",
    "to_dict",
    "to_toml",
    "to_json",
    "parse_value",
    "check_memory",
    "memory_needs",
    "MAX_DURATION_SECONDS",
]

ENV_PREFIX = "STREAMEMBED_"
#: The longest duration any setting may name (seconds; ``*_ms`` settings in milliseconds): 23 days, below
#: the 2^31 ms that Kafka's protocol and ``threading`` waits can take.
MAX_DURATION_SECONDS = 2_000_000


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key and value."""


def _sections() -> dict[str, type]:
    hints = typing.get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config)}


def _keys(section_cls: type) -> dict[str, tuple[Any, dataclasses.Field[Any]]]:
    hints = typing.get_type_hints(section_cls)
    return {f.name: (hints[f.name], f) for f in dataclasses.fields(section_cls)}


# ------------------------------------------------------------------------ values


def _type_name(tp: Any) -> str:
    if tp is bool:
        return "a boolean"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if typing.get_origin(tp) is dict:
        return "a table (in the environment: a JSON object)"
    return "none, all or an integer"


def _check_value(key: str, tp: Any, f: dataclasses.Field[Any], value: Any) -> Any:  # noqa: C901 - see issue 25
    """Type-check and range-check one value (from TOML or already parsed)."""
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            try:
                value = float(value)
            except OverflowError:  # an integer too large for a float
                value = math.inf
            if not math.isfinite(value):
                raise ConfigError(f"{key} = {value!r} is not a finite number")
    elif tp is str:
        ok = isinstance(value, str)
    elif typing.get_origin(tp) is dict:  # a free-form table such as [kafka.client]
        ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
        if ok:
            value = dict(value)
    else:  # str | int: k0_rows
        ok = (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and value.lower() in ("none", "all"))
        if isinstance(value, str):
            value = value.lower()
    if not ok:
        raise ConfigError(f"{key} = {value!r} is not {_type_name(tp)}")
    meta = f.metadata
    choices = meta.get("choices")
    if choices is not None:
        cmp = value.upper() if key == "logging.level" and isinstance(value, str) else value
        if cmp not in choices:
            raise ConfigError(f"{key} = {value!r} is not one of {', '.join(map(repr, choices))}")
        value = cmp
    lo, hi = meta.get("min"), meta.get("max")
    if hi is None and key.endswith("_seconds"):
        hi = MAX_DURATION_SECONDS
    elif hi is None and key.endswith("_ms"):
        hi = MAX_DURATION_SECONDS * 1000
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if lo is not None and (value < lo or (meta.get("exclusive_min") and value <= lo)):
            rel = ">" if meta.get("exclusive_min") else ">="
            raise ConfigError(f"{key} = {value!r} is out of range (must be {rel} {lo})")
        if hi is not None and value > hi:
            raise ConfigError(f"{key} = {value!r} is out of range (must be <= {hi})")
    if key == "model.k0_rows" and isinstance(value, int) and value < 1:
        raise ConfigError(f"{key} = {value!r} is out of range (none, all or an integer >= 1)")
    return value


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_value(key: str, text: str) -> Any:
    """Parse the string ``text`` for ``section.key`` by the key's type."""
    section, name = _split_key(key)
    tp, f = _keys(_sections()[section])[name]
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
        raise ConfigError(f"{key} = {text!r} is not {_type_name(tp)}") from None


def _split_key(key: str) -> tuple[str, str]:
    _retired(key)
    section, _, name = key.partition(".")
    sections = _sections()
    if section not in sections:
        raise ConfigError(f"unknown config section {section!r} (in {key!r}); known: {', '.join(sections)}")
    if name not in _keys(sections[section]):
        raise ConfigError(f"unknown config key {key!r}; keys of [{section}]: {', '.join(_keys(sections[section]))}")
    return section, name


# ------------------------------------------------------------------------ loading


_HEADER = """\
# streamembed - the default configuration, generated from the schema (streamembed/settings.py)
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


#: Keys that were removed or merged, with what to use instead.
_RETIRED = {
    "drift.k0_sample": "drift.k0_sample was merged into model.k0_rows (rows per batch with exact k0, used by the "
                       "output and by drift monitoring)",
}


def _retired(key: str) -> None:
    if key in _RETIRED:
        raise ConfigError(f"{key} is no longer a setting: {_RETIRED[key]}")


def _apply_doc(cfg: Config, doc: Mapping[str, Any], origin: str) -> None:
    sections = _sections()
    for section, body in doc.items():
        if section not in sections:
            raise ConfigError(f"unknown config section [{section}] in {origin}; known: {', '.join(sections)}")
        if not isinstance(body, dict):
            raise ConfigError(f"{section} in {origin} must be a table ([{section}])")
        keys = _keys(sections[section])
        target = getattr(cfg, section)
        for name, value in body.items():
            key = f"{section}.{name}"
            _retired(key)
            if name not in keys:
                raise ConfigError(f"unknown config key {key!r} in {origin}; keys of [{section}]: {', '.join(keys)}")
            tp, f = keys[name]
            setattr(target, name, _check_value(key, tp, f, value))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None


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
    return [f"{ENV_PREFIX}{section.upper()}__{name.upper()}" for section, cls in _sections().items()
            for name in _keys(cls)]


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
        tp, f = _keys(_sections()[section])[name]
        v = parse_value(key, value) if isinstance(value, str) else _check_value(key, tp, f, value)
        setattr(getattr(cfg, section), name, v)
    _cross_check(cfg)
    return cfg


def _cross_check(cfg: Config) -> None:
    g, m = cfg.generator, cfg.model
    if cfg.drift.enabled and m.k0_rows == "none" and cfg.drift.statistic in K0_STATISTICS:
        raise ConfigError(f"drift.statistic = {cfg.drift.statistic!r} needs exact k0 rows, but model.k0_rows = "
                          f"'none': set model.k0_rows to a count (e.g. 32) or 'all'")
    if g.intrinsic_dims >= g.n_features:
        raise ConfigError(f"generator.intrinsic_dims = {g.intrinsic_dims} must be < generator.n_features = "
                          f"{g.n_features}")
    if not m.path:
        if m.n_landmarks > m.fit_sample:
            raise ConfigError(f"model.n_landmarks = {m.n_landmarks} must be <= model.fit_sample = {m.fit_sample}")
        if m.n_components >= m.n_landmarks:
            raise ConfigError(f"model.n_components = {m.n_components} must be < model.n_landmarks = "
                              f"{m.n_landmarks}")
        if m.landmark_map != "cmds" and m.method not in ("stress", "l1"):
            raise ConfigError(f"model.landmark_map = {m.landmark_map!r} needs model.method = 'stress' or 'l1' "
                              f"(a SMACOF/Sammon map has no projection), got {m.method!r}")
        if m.geodesic_neighbors >= m.n_landmarks:
            raise ConfigError(f"model.geodesic_neighbors = {m.geodesic_neighbors} must be < model.n_landmarks = "
                              f"{m.n_landmarks}")
    if cfg.source.kind == "directory" and not m.path:
        raise ConfigError("source.kind = 'directory' needs a model: set model.path to a .npz file "
                          "(make one with `streamembed fit`)")
    _cross_check_kafka(cfg)
    _check_modes(cfg)
    check_memory(cfg)


def _check_modes(cfg: Config) -> None:
    from streamembed.fsafe import parse_mode

    o = cfg.output
    for key, text, need, allowed in (("output.file_mode", o.file_mode, 0o600, 0o777),
                                     ("output.dir_mode", o.dir_mode, 0o700, 0o2777)):
        try:
            mode = parse_mode(text)
        except ValueError as exc:
            raise ConfigError(f"{key} = {text!r}: {exc}") from None
        if mode & need != need:
            raise ConfigError(f"{key} = {text!r} does not let the owner {'read and write' if need == 0o600 else 'use'} "
                              f"what the daemon creates (needs {need:04o})")
        if mode & ~allowed:
            bits = "setuid, sticky" + (", setgid" if allowed == 0o777 else "")
            raise ConfigError(f"{key} = {text!r} sets special bits ({bits}): not allowed")


def memory_needs(cfg: Config, n_features: int | None = None, n_landmarks: int | None = None
                 ) -> list[tuple[str, float, str]]:
    """(key, bytes it needs at least, what for) of the settings whose memory grows with their value.

    ``n_features`` and ``n_landmarks`` are the model's once it is known; before, the generator's settings
    when the model is fitted from it, else the smallest possible (a lower bound).
    """
    m, d, k = cfg.model, cfg.drift, cfg.kafka
    fitted_here = not m.path
    p = n_features if n_features is not None else (cfg.generator.n_features if fitted_here else 1)
    n = n_landmarks if n_landmarks is not None else (m.n_landmarks if fitted_here else 2)
    block = cfg.source.max_block_rows
    needs: list[tuple[str, float, str]] = [
        ("drift.reservoir_objects", d.reservoir_objects * (16.0 + 8.0 * p),
         f"each candidate keeps {p} float64 feature(s) and an id"),
        ("drift.window_objects", d.window_objects * 8.0, "a float64 per object in the window"),
        ("source.max_block_rows", (block + 1.0) ** 2 * 8.0 + (block + 1.0) * n * 8.0,
         "a block of that many rows: its m x m cross dissimilarities in float64"),
        ("source.batch_rows", cfg.source.batch_rows * (n + 8.0) * 8.0 * 3, "a batch's rows, decoded, placed and "
                                                                           "written (about three copies)"),
    ]
    if fitted_here and n_landmarks is None:
        needs.append(("model.n_landmarks", 3.0 * m.n_landmarks ** 2 * 8.0, "fitting: the n x n landmark kernel and "
                                                                          "its eigendecomposition"))
        needs.append(("model.fit_sample", m.fit_sample * (cfg.generator.n_features + m.n_landmarks) * 8.0,
                      "fitting: the sample's features and their distances to the landmarks"))
    if cfg.source.kind == "kafka" or cfg.output.kafka_topic:
        needs.append(("kafka.fetch_max_bytes", float(k.fetch_max_bytes), "one fetch's messages"))
        needs.append(("kafka.max_unacked_bytes", float(k.max_unacked_bytes), "produced bytes kept until acknowledged"))
    return needs


def check_memory(cfg: Config, limit: MemoryLimit | None = None, *, n_features: int | None = None,
                 n_landmarks: int | None = None) -> None:
    """Refuse (ConfigError) settings whose memory cannot fit the process's memory limit (see :func:`memory_needs`)."""
    limit = limit if limit is not None else memory_limit()
    if limit is None:
        return
    needs = memory_needs(cfg, n_features, n_landmarks)
    where = f"the memory limit of {format_bytes(limit.bytes)} ({limit.source})"
    for key, need, why in needs:
        if need > limit.bytes:
            section, name = key.split(".")
            raise ConfigError(f"{key} = {getattr(getattr(cfg, section), name)!r} needs at least {format_bytes(need)} "
                              f"({why}), more than {where}: lower it")
    total = sum(need for _, need, _ in needs)
    if total > limit.bytes:
        top = sorted(needs, key=lambda kn: -kn[1])[:3]
        parts = ", ".join(f"{key} {format_bytes(need)}" for key, need, _ in top)
        raise ConfigError(f"together these settings need at least {format_bytes(total)} ({parts}), more than "
                          f"{where}: lower them")


def _cross_check_kafka(cfg: Config) -> None:
    k = cfg.kafka
    if cfg.source.kind == "kafka":
        if not k.input_topic:
            raise ConfigError("source.kind = 'kafka' needs kafka.input_topic")
        if not cfg.model.path and not k.model_topic:
            raise ConfigError("source.kind = 'kafka' needs a model: set model.path to a .npz file, or "
                              "kafka.model_topic to take the model another replica published")
    if not cfg.output.parquet and not cfg.output.kafka_topic:
        raise ConfigError("output.parquet = false and output.kafka_topic is empty: the embeddings would go nowhere")
    if k.security_protocol.startswith("SASL_") and not k.sasl_mechanism:
        raise ConfigError(f"kafka.security_protocol = {k.security_protocol!r} needs kafka.sasl_mechanism")
    if k.sasl_mechanism and not k.security_protocol.startswith("SASL_"):
        raise ConfigError(f"kafka.sasl_mechanism = {k.sasl_mechanism!r} needs kafka.security_protocol = "
                          "'SASL_PLAINTEXT' or 'SASL_SSL'")
    if k.sasl_mechanism and not k.sasl_plain_username:
        raise ConfigError(f"kafka.sasl_mechanism = {k.sasl_mechanism!r} needs kafka.sasl_plain_username "
                          "(and kafka.sasl_plain_password)")
    if k.heartbeat_interval_ms * 3 > k.session_timeout_ms:
        raise ConfigError(f"kafka.heartbeat_interval_ms = {k.heartbeat_interval_ms} must be at most a third of "
                          f"kafka.session_timeout_ms = {k.session_timeout_ms}")
    if k.client:
        from streamembed.kafka.client import validate_client_table

        try:
            validate_client_table(k.client)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


# ------------------------------------------------------------------------ output


def to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    return {name: dataclasses.asdict(getattr(cfg, name)) for name in _sections()}


def _redacted(cfg: Config) -> dict[str, dict[str, Any]]:
    """:func:`to_dict` with secrets (passwords) replaced, for printing."""
    doc = to_dict(cfg)
    for section, cls in _sections().items():
        for name, (_, f) in _keys(cls).items():
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
    for section, cls in _sections().items():
        tables: list[tuple[str, Any, str]] = []
        if comments and cls.__doc__:
            lines.append(f"# {cls.__doc__.strip()}")
        lines.append(f"[{section}]")
        for name, (_, f) in _keys(cls).items():
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
    """The key reference as a Markdown table (``streamembed config --reference``, README)."""
    lines = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key, default, doc in reference_rows():
        cell = doc.replace("|", "\\|")
        lines.append(f"| `{key}` | `{default}` | {cell} |")
    return "\n".join(lines) + "\n"


def reference_rows() -> list[tuple[str, str, str]]:
    """(``section.key``, default as TOML, documentation) for every key."""
    cfg = Config()
    rows = []
    for section, cls in _sections().items():
        for name, (_, f) in _keys(cls).items():
            doc = f.metadata.get("doc", "")
            ch = f.metadata.get("choices")
            if ch:
                doc += f" (one of: {', '.join(map(str, ch))})"
            rows.append((f"{section}.{name}", _toml_value(getattr(getattr(cfg, section), name)), doc))
    return rows
