"""Configuration: dataclass schema, TOML files, environment overrides, validation.

Precedence, lowest first: the embedded default (``streamembed/default.toml``)
< a TOML file (``--config``) < environment variables < command-line flags.

Environment overrides: ``STREAMEMBED_<SECTION>__<KEY>=<value>``, section and
key in any case, separated by a double underscore, e.g.
``STREAMEMBED_OUTPUT__ROLL_ROWS=5000`` or ``STREAMEMBED_METRICS__PORT=0``.
The value is parsed by the key's type: integers and floats as numbers,
booleans as true/false/1/0/yes/no/on/off, strings verbatim (no quotes);
``model.k0_rows`` takes ``none``, ``all`` or an integer. A variable that
starts with ``STREAMEMBED_`` and contains ``__`` but names no key is an error.

Any unknown section or key, wrong type or out-of-range value raises
:class:`ConfigError` naming the key and the value.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "ConfigError",
    "Config",
    "ENV_PREFIX",
    "load_config",
    "default_toml_text",
    "to_dict",
    "to_toml",
    "to_json",
    "parse_value",
]

ENV_PREFIX = "STREAMEMBED_"


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key and value."""


def _f(default: Any, doc: str, *, choices: tuple[Any, ...] | None = None, min: float | None = None,
       max: float | None = None, exclusive_min: bool = False, secret: bool = False) -> Any:
    meta = {"doc": doc, "choices": choices, "min": min, "max": max, "exclusive_min": exclusive_min,
            "secret": secret}
    if isinstance(default, dict):  # a table of free-form settings ([kafka.client])
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class ModelConfig:
    path: str = _f("", "landmark model (.npz from `streamembed fit`); empty: fit one from the generator at startup")
    method: str = _f("projection", "embedding method for single objects (stress, l1: MATH.md §3 other criteria)",
                     choices=("projection", "restricted", "stress", "l1"))
    k0_rows: str | int = _f("none", "rows per batch with the exact residual k0: none, all, or a count (>= 1)")
    n_landmarks: int = _f(100, "landmarks of a generator-fitted model", min=2, max=100_000)
    n_components: int = _f(2, "map dimensions d of a generator-fitted model", min=1, max=1000)
    landmark_selection: str = _f("maxmin", "how a generator-fitted model picks landmarks",
                                 choices=("maxmin", "random"))
    fit_sample: int = _f(2000, "generator objects drawn to pick landmarks from", min=2, max=10_000_000)
    metric: str = _f("euclidean", "feature metric of a generator-fitted model (scipy cdist name)")
    save_path: str = _f("", "save a generator-fitted model here (.npz); empty: do not save")
    input: str = _f("dissimilarity", "what a generator-fitted model embeds: feature dissimilarities, or kernel "
                    "similarities (model.kernel; seed 000 §3)", choices=("dissimilarity", "similarity"))
    kernel: str = _f("linear", "feature kernel when model.input = similarity", choices=("linear", "cosine", "rbf"))
    geodesic_neighbors: int = _f(0, "landmark Isomap: geodesic distances through this many nearest landmarks "
                                 "(0: off; seed 001 §4)", min=0, max=100_000)
    correction: str = _f("none", "non-Euclidean correction of the landmark kernel (seed 001 §4.2)",
                         choices=("none", "cailliez"))
    landmark_map: str = _f("cmds", "landmark map: classical MDS, or refined by SMACOF stress or Sammon mapping "
                           "(seed 001 §2.2-3; needs model.method = stress or l1)", choices=("cmds", "smacof", "sammon"))


@dataclass
class SourceConfig:
    kind: str = _f("generator", "where objects come from", choices=("generator", "directory", "kafka"))
    batch_rows: int = _f(8192, "most rows per batch; larger batches amortise the per-batch work", min=1,
                         max=10_000_000)
    max_block_rows: int = _f(4096, "largest block (batch with `cross`) accepted", min=1, max=1_000_000)


@dataclass
class DirectoryConfig:
    path: str = _f("input", "directory watched for input files")
    pattern: str = _f("*", "glob of files to read (`**/` or `/` in it: search subdirectories)")
    poll_seconds: float = _f(0.5, "seconds between directory scans when idle", min=0.0, max=3600.0,
                             exclusive_min=True)
    settle_seconds: float = _f(1.0, "ignore files modified less than this long ago", min=0.0, max=3600.0)
    exit_when_idle: bool = _f(False, "stop when no unread file is left (batch mode)")


@dataclass
class GeneratorConfig:
    seed: int = _f(0, "seed: the same seed gives the same objects", min=0)
    n_features: int = _f(10, "feature dimension p", min=2, max=100_000)
    clusters: int = _f(4, "mixture components", min=1, max=10_000)
    intrinsic_dims: int = _f(3, "dimension of the subspace the components live in (< n_features)", min=1)
    cluster_spread: float = _f(5.0, "scale of the component means", min=0.0)
    cluster_std: float = _f(0.5, "standard deviation within a component", min=0.0)
    noise_std: float = _f(0.01, "isotropic noise in all n_features directions", min=0.0)
    drift_speed: float = _f(0.0, "component means move this far per 100,000 objects", min=0.0)
    new_cluster_after: int = _f(0, "object index from which a component off the landmarks' span appears (0: never)",
                                min=0)
    new_cluster_offset: float = _f(5.0, "distance of that component from the span", min=0.0)
    rate: float = _f(5000.0, "objects per second (0: as fast as possible)", min=0.0)
    emit: str = _f("features", "emit feature vectors or dissimilarities to the landmarks",
                   choices=("features", "dissimilarities"))
    id_prefix: str = _f("gen", "ids are <id_prefix>-<seed>-<index>")


@dataclass
class OutputConfig:
    root: str = _f("streamembed-out", "root of the default output locations below")
    embeddings_dir: str = _f("", "Parquet output files; empty: <root>/embeddings")
    dead_letter_dir: str = _f("", "dead-letter files; empty: <root>/dead-letter")
    dead_letter_format: str = _f("parquet", "dead-letter file format", choices=("parquet", "jsonl"))
    checkpoint_path: str = _f("", "checkpoint file; empty: <root>/checkpoint.json")
    roll_rows: int = _f(100_000, "publish files and checkpoint after this many rows", min=1)
    roll_seconds: float = _f(5.0, "... or this many seconds after the first unpublished row", min=0.0,
                             exclusive_min=True)
    row_group_rows: int = _f(65536, "Parquet row-group size", min=1)
    compression: str = _f("zstd", "Parquet compression", choices=("zstd", "snappy", "gzip", "lz4", "none"))
    parquet: bool = _f(True, "write the Parquet output files (off: only the Kafka output topic)")
    kafka_topic: str = _f("", "Kafka topic the embedded rows are produced to ([kafka] settings); empty: none")


@dataclass
class RunConfig:
    max_batches: int = _f(0, "stop after this many batches (0: unbounded)", min=0)
    max_records: int = _f(0, "stop after this many input records (0: unbounded)", min=0)


@dataclass
class DriftConfig:
    enabled: bool = _f(True, "monitor drift through k0 (MATH.md §4) and trigger refits")
    window_objects: int = _f(50_000, "objects in the sliding drift window", min=100)
    window_seconds: float = _f(0.0, "also drop objects older than this (0: by count only)", min=0.0)
    k0_sample: int = _f(32, "rows per batch whose exact k0 is computed (O(n·r) each)", min=0, max=1_000_000)
    reservoir_objects: int = _f(2000, "recent objects kept as landmark candidates (feature mode)", min=0)
    stats_every_objects: int = _f(10_000, "recompute the window statistics after this many objects ...", min=1)
    stats_every_seconds: float = _f(1.0, "... or this many seconds, whichever comes first", min=0.0)
    statistic: str = _f("relative_unexplained_mean", "statistic the refit trigger watches",
                        choices=("relative_unexplained_mean", "relative_unexplained_p90", "relative_k0_mean",
                                 "kernel_distance_bound", "gap_ratio"))
    ratio: float = _f(1.5, "drift = statistic above baseline x ratio ...", min=1.0)
    margin: float = _f(0.05, "... and above baseline + margin", min=0.0)
    threshold: float = _f(0.0, "absolute trigger level instead of the baseline rule (0: baseline rule)", min=0.0)
    hysteresis: float = _f(0.5, "clear level = baseline + hysteresis x (trigger level - baseline)", min=0.0, max=1.0)
    min_objects: int = _f(20_000, "objects above the level before a refit fires", min=1)
    baseline_objects: int = _f(20_000, "objects after a (re)fit before the baseline is taken", min=1)
    cooldown_seconds: float = _f(300.0, "no automatic refit within this time after one", min=0.0)


@dataclass
class RefitConfig:
    auto: bool = _f(True, "refit when the drift trigger fires (manual: SIGUSR1 or `streamembed refit`)")
    n_landmarks: int = _f(0, "landmarks of a refitted model (0: as many as now)", min=0, max=100_000)
    retain_versions: int = _f(3, "older model versions kept to embed inputs that name them", min=0, max=100)
    timeout_seconds: float = _f(600.0, "kill a refit worker running longer than this", min=1.0)
    model_dir: str = _f("", "versioned models model-v<N>.npz; empty: <root>/models")
    history_path: str = _f("", "JSON lines record of every refit; empty: <root>/model-history.jsonl")


@dataclass
class KafkaConfig:
    bootstrap_servers: str = _f("127.0.0.1:9092", "comma-separated host:port of Kafka brokers")
    input_topic: str = _f("", "topic read when source.kind = kafka")
    group_id: str = _f("streamembed", "consumer group: replicas with the same group share the input partitions")
    client_id: str = _f("streamembed", "client id prefix (-consumer / -producer appended)")
    auto_offset_reset: str = _f("earliest", "where a group without committed offsets starts",
                                choices=("earliest", "latest"))
    dead_letter_topic: str = _f("", "topic of refused input messages and rows; empty: <input_topic>.dlq")
    output_format: str = _f("arrow", "messages of output.kafka_topic: one Arrow IPC stream per batch, or one "
                            "JSON object per row", choices=("arrow", "json"))
    model_topic: str = _f("", "compacted topic distributing the landmark model to every replica; empty: off")
    model_name: str = _f("streamembed", "key of this deployment's model in model_topic")
    model_poll_seconds: float = _f(2.0, "how often the loop looks for a newer model between batches", min=0.0)
    model_wait_seconds: float = _f(60.0, "without model.path: wait this long for a model on model_topic",
                                   min=0.0)
    poll_timeout_ms: int = _f(200, "longest wait for new messages in one poll", min=0, max=60_000)
    max_poll_records: int = _f(500, "messages decoded per consumer poll", min=1, max=1_000_000)
    max_poll_interval_ms: int = _f(300_000, "the group drops a member that does not poll for this long", min=1000)
    session_timeout_ms: int = _f(45_000, "the group drops a member without heartbeats for this long", min=1000)
    heartbeat_interval_ms: int = _f(3000, "heartbeat period (below a third of session_timeout_ms)", min=100)
    fetch_max_bytes: int = _f(52_428_800, "most bytes one fetch returns", min=1024)
    max_partition_fetch_bytes: int = _f(16_777_216, "most bytes per partition per fetch (>= a batch message)",
                                        min=1024)
    max_request_size: int = _f(16_777_216, "largest produce request (output, dead letters of large inputs)",
                               min=1024)
    batch_size: int = _f(1_048_576, "producer batch bytes per partition", min=0)
    linger_ms: int = _f(5, "producer wait for more messages to batch", min=0, max=60_000)
    acks: str = _f("all", "acknowledgements a produce waits for", choices=("all", "1", "0"))
    max_unacked_bytes: int = _f(67_108_864, "pause the input while this many produced bytes are unacknowledged",
                                min=1)
    startup_timeout_seconds: float = _f(60.0, "give up (exit 2) when the brokers are unreachable this long at start",
                                        min=0.0)
    retry_backoff_max_seconds: float = _f(10.0, "longest wait between retries of a transient error", min=0.0,
                                          exclusive_min=True)
    security_protocol: str = _f("PLAINTEXT", "transport security",
                                choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    sasl_mechanism: str = _f("", "SASL mechanism (with SASL_*); empty: none",
                             choices=("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    sasl_plain_username: str = _f("", "SASL user name")
    sasl_plain_password: str = _f("", "SASL password (prefer STREAMEMBED_KAFKA__SASL_PLAIN_PASSWORD)", secret=True)
    ssl_cafile: str = _f("", "CA certificate file (PEM) to verify the brokers")
    ssl_certfile: str = _f("", "client certificate file (PEM)")
    ssl_keyfile: str = _f("", "client private key file (PEM)")
    ssl_check_hostname: bool = _f(True, "verify that the broker certificate matches its host name")
    client: dict[str, Any] = _f({}, "[kafka.client]: more kafka-python settings, passed to the consumer and/or "
                                "producer that knows each key (unknown keys refuse to start)")


@dataclass
class MetricsConfig:
    enabled: bool = _f(True, "serve /metrics, /healthz and /readyz")
    host: str = _f("127.0.0.1", "address to bind")
    port: int = _f(9108, "TCP port (0: an ephemeral port, logged and written to port_file)", min=0, max=65535)
    port_file: str = _f("", "write the bound port to this file; empty: do not")
    wedged_after_seconds: float = _f(120.0, "/healthz fails when the loop has not beaten for this long", min=0.0,
                                     exclusive_min=True)


@dataclass
class LoggingConfig:
    level: str = _f("INFO", "log level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    format: str = _f("text", "text, or json (one JSON object per line)", choices=("text", "json"))


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    directory: DirectoryConfig = field(default_factory=DirectoryConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    run: RunConfig = field(default_factory=RunConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    refit: RefitConfig = field(default_factory=RefitConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    # derived locations
    @property
    def embeddings_dir(self) -> Path:
        return Path(self.output.embeddings_dir or Path(self.output.root) / "embeddings")

    @property
    def dead_letter_dir(self) -> Path:
        return Path(self.output.dead_letter_dir or Path(self.output.root) / "dead-letter")

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.output.checkpoint_path or Path(self.output.root) / "checkpoint.json")

    @property
    def model_dir(self) -> Path:
        return Path(self.refit.model_dir or Path(self.output.root) / "models")

    @property
    def history_path(self) -> Path:
        return Path(self.refit.history_path or Path(self.output.root) / "model-history.jsonl")

    @property
    def pid_path(self) -> Path:
        return Path(self.output.root) / "streamembed.pid"


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


def _check_value(key: str, tp: Any, f: dataclasses.Field[Any], value: Any) -> Any:
    """Type-check and range-check one value (from TOML or already parsed)."""
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            value = float(value)
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
    section, _, name = key.partition(".")
    sections = _sections()
    if section not in sections:
        raise ConfigError(f"unknown config section {section!r} (in {key!r}); known: {', '.join(sections)}")
    if name not in _keys(sections[section]):
        raise ConfigError(f"unknown config key {key!r}; keys of [{section}]: {', '.join(_keys(sections[section]))}")
    return section, name


# ------------------------------------------------------------------------ loading


def default_toml_text() -> str:
    """The embedded default configuration (package data ``streamembed/default.toml``)."""
    return resources.files("streamembed").joinpath("default.toml").read_text(encoding="utf-8")


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
    for var, value in sorted(environ.items()):
        if not var.startswith(ENV_PREFIX) or "__" not in var[len(ENV_PREFIX):]:
            continue
        section, _, name = var[len(ENV_PREFIX):].partition("__")
        key = f"{section.lower()}.{name.lower()}"
        try:
            _split_key(key)
        except ConfigError as exc:
            raise ConfigError(f"environment variable {var}: {exc}") from None
        out.append((key, value))
    return out


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
    _apply_doc(cfg, tomllib.loads(default_toml_text()), "the embedded default")
    if path is not None:
        _apply_doc(cfg, _read_toml(Path(path)), str(path))
    for key, text in env_overrides(environ or {}):
        section, name = _split_key(key)
        try:
            setattr(getattr(cfg, section), name, parse_value(key, text))
        except ConfigError as exc:
            var = f"{ENV_PREFIX}{section.upper()}__{name.upper()}"
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
    """The configuration as TOML (every key, with its documentation as comments)."""
    lines: list[str] = []
    shown = _redacted(cfg)
    for section, cls in _sections().items():
        lines.append(f"[{section}]")
        for name, (_, f) in _keys(cls).items():
            line = f"{name} = {_toml_value(shown[section][name])}"
            if comments and f.metadata.get("doc"):
                line = f"{line:<40} # {f.metadata['doc']}"
            lines.append(line)
        lines.append("")
    return "\n".join(lines)


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
