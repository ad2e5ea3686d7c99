"""Cross-field checks of a loaded configuration: the option table's rules and the daemon's own.

Each key is checked alone by ``config.load`` (type, choices, range); here the
combinations: the model options' rules come from ``core.options`` (one
statement, shared with the estimator and the command line), then the rules
only a running daemon has (sources, Kafka security, file modes, and memory
against the process's limit, ``streamembed.memlimit``).
"""

from __future__ import annotations

from streamembed.config.schema import K0_STATISTICS, Config, ModelConfig
from streamembed.config.kafka_clients import check_client_library
from streamembed.config.sources import check_source, consumes_kafka
from streamembed.core.errors import InputError
from streamembed.core.options import check_options, config_names
from streamembed.memlimit import MemoryLimit, format_bytes, memory_limit

__all__ = ["ConfigError", "cross_check", "check_memory", "memory_needs", "weakening_settings"]

#: [model] keys that are ``core.options`` options with the same meaning (their rules apply to a fitted model).
_TABLE_RULE_KEYS = ("method", "landmark_map", "input", "correction", "landmark_selection", "kernel")


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key and value."""


def cross_check(cfg: Config) -> None:
    """Refuse (ConfigError) a configuration whose keys are each valid but do not go together."""
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
        _check_model_options(m)
        if m.geodesic_neighbors >= m.n_landmarks:
            raise ConfigError(f"model.geodesic_neighbors = {m.geodesic_neighbors} must be < model.n_landmarks = "
                              f"{m.n_landmarks}")
    try:
        check_source(cfg)  # the source kind's own checks (config.sources)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _cross_check_kafka(cfg)
    _check_modes(cfg)
    check_memory(cfg)


def _check_model_options(m: ModelConfig) -> None:
    """The option table's rules (``core.options.RULES``) on a generator-fitted model's [model] options."""
    try:
        check_options(config_names("model"), **{name: getattr(m, name) for name in _TABLE_RULE_KEYS})
    except InputError as exc:
        raise ConfigError(str(exc)) from None


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
    if consumes_kafka(cfg) or cfg.output.kafka_topic:
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
    _check_failover(cfg)
    try:
        check_client_library(cfg)  # installed (else exit 2 naming the extra), and offering kafka.assignor
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if consumes_kafka(cfg) and k.assignor != "range" and k.client_library == "kafka-python":
        from streamembed.kafka.client import assignors

        try:
            assignors(k.assignor)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if k.client:
        # the library's own settings are known to the Kafka layer only: imported when a table is given
        from streamembed.kafka.libraries import validate_client_table

        try:
            validate_client_table(k.client, k.client_library)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def _check_failover(cfg: Config) -> None:
    """Refuse group timings under which a member is dropped while it works, or never while it is dead."""
    k, batch = cfg.kafka, cfg.model.max_batch_seconds
    if k.heartbeat_interval_ms * 3 > k.session_timeout_ms:
        raise ConfigError(f"kafka.heartbeat_interval_ms = {k.heartbeat_interval_ms} must be at most a third of "
                          f"kafka.session_timeout_ms = {k.session_timeout_ms} (range: 100 to "
                          f"{k.session_timeout_ms // 3}), or the group drops members that are alive: raise the "
                          f"session timeout or lower the heartbeat interval")
    if consumes_kafka(cfg) and batch > 0 and k.max_poll_interval_ms <= batch * 1000:
        raise ConfigError(f"kafka.max_poll_interval_ms = {k.max_poll_interval_ms} must be more than "
                          f"model.max_batch_seconds = {batch:g} s (a batch may take that long between two polls, "
                          f"and the group would drop the member meanwhile): set it above {batch * 1000:.0f} or "
                          f"lower model.max_batch_seconds")


def weakening_settings(cfg: Config) -> list[str]:
    """Settings that are valid but weaken the defaults' protection, one WARNING line each (logged at start)."""
    from streamembed.fsafe import parse_mode

    out: list[str] = []
    m = cfg.metrics
    if m.enabled and m.host not in ("127.0.0.1", "localhost", "::1"):
        out.append(f"metrics.host = {m.host!r}: the ops server (/metrics, /map with object ids and residuals) is "
                   f"reachable beyond this machine; protect it with a firewall or a network policy")
    if m.enabled and "*" in [h.strip() for h in m.allowed_hosts.split(",")]:
        out.append("metrics.allowed_hosts = '*': the ops server answers any Host name, so a web page whose name "
                   "resolves to this machine (DNS rebinding) can read /metrics and /map.json")
    for key, text, loose in (("output.file_mode", cfg.output.file_mode, 0o006),
                             ("output.dir_mode", cfg.output.dir_mode, 0o007)):
        mode = parse_mode(text)
        if mode & loose or mode & 0o020:
            who = "every user" if mode & loose else "the group"
            default = "0640" if key.endswith("file_mode") else "0750"
            out.append(f"{key} = {text!r} lets {who} {'write' if mode & 0o022 else 'read'} what the daemon creates "
                       f"(outputs, checkpoint, models): the default is {default}")
    return out
