"""Client settings from the ``[kafka]`` config (kafka-python's names), transient errors and retries.

* :func:`consumer_settings` / :func:`producer_settings` turn the ``[kafka]``
  section (security options, sizes, the free-form ``[kafka.client]`` table)
  into keyword arguments for ``KafkaConsumer`` / ``KafkaProducer``.
* :func:`validate_client_table` refuses ``[kafka.client]`` keys that
  kafka-python does not know (a typo must not start a daemon silently
  running with the default), keys streamembed manages itself, and a
  ``compression_type`` whose codec package is missing (which a restart cannot
  fix: exit 2, not 3).
* :func:`is_transient` says which errors are retried with exponential
  backoff (never dead-lettered): timeouts, lost connections, leader moves.
* The producer that tracks durability is ``kafka.producer.ReliableProducer``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, TypeVar
from collections.abc import Callable, Iterable, Mapping

from streamembed.liveness import WAITS

__all__ = [
    "MANAGED_KEYS",
    "is_too_large",
    "KafkaDeliveryError",

    "Backoff",
    "is_transient",
    "retry",
    "security_settings",
    "consumer_settings",
    "producer_settings",
    "managed_consumer_settings",
    "managed_producer_settings",
    "validate_client_table",
    "known_client_keys",
    "assignors",
    "CAUGHT_UP_FETCH",
    "BEHIND_FETCH",
]

log = logging.getLogger("streamembed.kafka")

T = TypeVar("T")

#: kafka-python settings streamembed sets itself; ``[kafka.client]`` may not override them.
MANAGED_KEYS: frozenset[str] = frozenset({
    "bootstrap_servers", "group_id", "enable_auto_commit", "key_deserializer", "value_deserializer",
    "key_serializer", "value_serializer", "consumer_timeout_ms",
})


class KafkaDeliveryError(RuntimeError):
    """Messages could not be made durable (a permanent error, or stopped while retrying)."""


def known_client_keys() -> frozenset[str]:
    """Every setting ``KafkaConsumer`` or ``KafkaProducer`` of the installed kafka-python accepts."""
    from kafka import KafkaConsumer, KafkaProducer

    return frozenset(KafkaConsumer.DEFAULT_CONFIG) | frozenset(KafkaProducer.DEFAULT_CONFIG)


def validate_client_table(table: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first unusable ``[kafka.client]`` key (kafka-python's settings; the table of
    another library: ``kafka.libraries.validate_client_table``)."""
    known = known_client_keys()
    for key, value in table.items():
        if key in MANAGED_KEYS:
            raise ValueError(f"kafka.client.{key} is managed by streamembed and cannot be set here")
        if key not in known:
            import difflib

            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"kafka.client.{key} is not a kafka-python setting{hint}")
        if isinstance(value, (dict, list)) and key not in ("api_version",) \
                and not (isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value)):
            raise ValueError(f"kafka.client.{key} = {value!r}: only numbers, strings, booleans and lists of them")
        _check_type(key, value)
        if key == "compression_type":
            _check_codec(value)


def _check_type(key: str, value: Any) -> None:
    """Refuse a value of another type than kafka-python's default for ``key`` (``"soon"`` for ``linger_ms``),
    and a negative count, size or duration: the client would fail only later, at every start."""
    from kafka import KafkaConsumer, KafkaProducer

    default = {**KafkaConsumer.DEFAULT_CONFIG, **KafkaProducer.DEFAULT_CONFIG}.get(key)
    if key == "acks" and value == "all":  # kafka-python takes "all" as well as its default's integers
        return
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, bool):
        ok, want = isinstance(value, bool), "a boolean"
    elif isinstance(default, (int, float)):
        ok, want = numeric, "a number"
    elif isinstance(default, str):
        ok, want = isinstance(value, str), "a string"
    else:
        return
    if not ok:
        raise ValueError(f"kafka.client.{key} = {value!r} is not {want} (kafka-python's default is {default!r})")
    if numeric and (value < 0 or value != value or value in (float("inf"), float("-inf"))):
        raise ValueError(f"kafka.client.{key} = {value!r} is out of range (must be a finite number >= 0)")


#: compression_type -> (kafka-python's check, the package that provides the codec)
_CODEC_PACKAGES = {"gzip": ("has_gzip", "the standard library"), "snappy": ("has_snappy", "python-snappy"),
                   "lz4": ("has_lz4", "lz4"), "zstd": ("has_zstd", "zstandard")}


def _check_codec(value: Any) -> None:
    """Refuse a compression_type kafka-python cannot produce here (it would fail in the producer's constructor)."""
    if value is None or value == "none":
        return
    import kafka.codec

    if value not in _CODEC_PACKAGES:
        raise ValueError(f"kafka.client.compression_type = {value!r}: one of none, {', '.join(_CODEC_PACKAGES)}")
    check, package = _CODEC_PACKAGES[value]
    if not getattr(kafka.codec, check)():
        raise ValueError(f"kafka.client.compression_type = {value!r} needs the {package} package, which is not "
                         f"installed (it is a streamembed dependency: reinstall streamembed)")


# ----------------------------------------------------------------------------- errors, retries


def _transient_types() -> tuple[type[BaseException], ...]:
    import kafka.errors as ke

    names = ("KafkaTimeoutError", "NoBrokersAvailable", "NotLeaderForPartitionError", "NotLeaderOrFollowerError",
             "KafkaConnectionError", "RequestTimedOutError", "LeaderNotAvailableError", "NodeNotReadyError",
             "CoordinatorNotAvailableError", "NotCoordinatorError", "NotEnoughReplicasError",
             "NotEnoughReplicasAfterAppendError", "UnknownTopicOrPartitionError")
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    types.extend(t for n in names if isinstance(t := getattr(ke, n, None), type))
    return tuple(types)


_TRANSIENT: tuple[type[BaseException], ...] | None = None


def is_transient(exc: BaseException) -> bool:
    """True for errors that go away by themselves (retry with backoff, never dead-letter)."""
    global _TRANSIENT
    if _TRANSIENT is None:
        _TRANSIENT = _transient_types()
    if isinstance(exc, _TRANSIENT):
        return True
    return bool(getattr(exc, "retriable", False))


def is_too_large(exc: BaseException | None) -> bool:
    """True for a message refused for its size (by the client's max_request_size or the broker's limit)."""
    return type(exc).__name__ in ("MessageSizeTooLargeError", "RecordListTooLargeError", "RecordTooLargeError")


@dataclass
class Backoff:
    """Exponential backoff with full jitter: ``initial * 2**k``, capped at ``maximum`` seconds."""

    initial: float = 0.1
    maximum: float = 10.0
    attempt: int = 0

    def next_delay(self) -> float:
        cap = min(self.maximum, self.initial * (2 ** self.attempt))
        self.attempt += 1
        return cap / 2 + random.random() * cap / 2

    def reset(self) -> None:
        self.attempt = 0


def retry(fn: Callable[[], T], what: str, *, stop: threading.Event | None = None, metrics: Any = None,
          max_backoff: float = 10.0, deadline: float | None = None) -> T:
    """``fn()``, retried with exponential backoff while it raises transient errors.

    Gives up (re-raising the last error) when ``stop`` is set or the
    monotonic ``deadline`` has passed; permanent errors are raised at once.
    While it retries, the process counts as alive but unready (``liveness.WAITS``).
    """
    backoff = Backoff(maximum=max_backoff)
    with WAITS.waiting(what) as attempt_failed:  # alive while retrying, not ready (liveness.py)
        while True:
            try:
                return fn()
            except Exception as exc:  # classified below
                if not is_transient(exc):
                    raise
                if (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() >= deadline):
                    raise
                attempt_failed(f"{type(exc).__name__}: {exc}")
                _backoff(what, exc, backoff, stop, metrics)


def _backoff(what: str, exc: BaseException, backoff: Backoff, stop: threading.Event | None, metrics: Any) -> None:
    """Log the failed attempt and sleep its backoff (cut short by ``stop``)."""
    delay = backoff.next_delay()
    if metrics is not None:
        metrics.kafka_retries.inc()
    log.warning("%s failed transiently (%s: %s); retrying in %.2f s", what, type(exc).__name__, exc, delay)
    if stop is not None:
        stop.wait(delay)
    else:
        time.sleep(delay)


# ----------------------------------------------------------------------------- settings


def security_settings(k: Any) -> dict[str, Any]:
    """The security options of a ``[kafka]`` section as kafka-python settings (empty ones left out)."""
    out: dict[str, Any] = {"security_protocol": k.security_protocol}
    for key in ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "ssl_cafile", "ssl_certfile",
                "ssl_keyfile"):
        value = getattr(k, key)
        if value:
            out[key] = value
    if k.security_protocol in ("SSL", "SASL_SSL"):
        out["ssl_check_hostname"] = bool(k.ssl_check_hostname)
    return out


def _common(k: Any, role: str) -> dict[str, Any]:
    servers = [s.strip() for s in k.bootstrap_servers.split(",") if s.strip()]
    return {"bootstrap_servers": servers, "client_id": f"{k.client_id}-{role}", **security_settings(k)}


#: Seconds one attempt to reach the first broker may block (kafka-python 3's constructor): attempts are retried
#: until ``kafka.startup_timeout_seconds``, and a stop signal is seen between two of them.
BOOTSTRAP_ATTEMPT_SECONDS = 5.0


def _bootstrap_timeout(k: Any, defaults: Iterable[str]) -> dict[str, Any]:
    """kafka-python 3's client blocks its constructor up to ``bootstrap_timeout_ms`` (30 s) for the first
    broker: ``BOOTSTRAP_ATTEMPT_SECONDS`` at most (and never longer than ``kafka.startup_timeout_seconds``), so
    that an unreachable cluster exits 3 in time and a stop signal during the wait is answered within seconds."""
    if "bootstrap_timeout_ms" not in set(defaults):
        return {}
    return {"bootstrap_timeout_ms": int(max(1.0, min(BOOTSTRAP_ATTEMPT_SECONDS, float(k.startup_timeout_seconds)))
                                        * 1000)}


def _extra(k: Any, allowed: Iterable[str]) -> dict[str, Any]:
    allowed = set(allowed)
    return {key: value for key, value in dict(k.client).items() if key in allowed}


def managed_consumer_settings(k: Any, *, group: bool = True) -> dict[str, Any]:
    """The consumer settings streamembed chooses itself, in kafka-python's names, whatever the client library (the
    librdkafka clients translate them, ``kafka.librdkafka.settings``); the group's assignor by its name."""
    out = _common(k, "consumer")
    out.update(
        enable_auto_commit=False,
        auto_offset_reset=k.auto_offset_reset,
        fetch_max_bytes=k.fetch_max_bytes,
        max_partition_fetch_bytes=k.max_partition_fetch_bytes,
        max_poll_records=k.max_poll_records,
        max_poll_interval_ms=k.max_poll_interval_ms,
        session_timeout_ms=k.session_timeout_ms,
        heartbeat_interval_ms=k.heartbeat_interval_ms,
        fetch_max_wait_ms=CAUGHT_UP_FETCH[0] if k.fetch_max_wait_ms == "auto" else int(k.fetch_max_wait_ms),
    )
    if group:
        out["group_id"] = k.group_id
        out["partition_assignment_strategy"] = k.assignor
    return out


def consumer_settings(k: Any, *, group: bool = True) -> dict[str, Any]:
    """``KafkaConsumer`` keyword arguments: manual commits, fetch sizes for batch messages."""
    from kafka import KafkaConsumer

    out = managed_consumer_settings(k, group=group)
    if group:
        out["partition_assignment_strategy"] = assignors(k.assignor)
    out.update(_bootstrap_timeout(k, KafkaConsumer.DEFAULT_CONFIG))
    out.update(_extra(k, KafkaConsumer.DEFAULT_CONFIG))
    return out


#: ``kafka.fetch_max_wait_ms = "auto"``: (fetch_max_wait_ms, fetch_min_bytes) while the consumer is caught up, and
#: while it is behind by more than a batch (``kafka.source``): short waits for latency, full fetches for a backlog.
CAUGHT_UP_FETCH = (10, 1)
BEHIND_FETCH = (100, 1 << 20)


def assignors(name: str) -> tuple[type, ...]:
    """The kafka-python assignor class of ``kafka.assignor`` (ValueError when the installed client has none)."""
    import importlib

    paths = {"cooperative-sticky": ("kafka.coordinator.assignors.cooperative_sticky", "CooperativeStickyAssignor"),
             "sticky": ("kafka.coordinator.assignors.sticky.sticky_assignor", "StickyPartitionAssignor"),
             "range": ("kafka.coordinator.assignors.range", "RangePartitionAssignor"),
             "roundrobin": ("kafka.coordinator.assignors.roundrobin", "RoundRobinPartitionAssignor")}
    module, cls = paths[name]
    try:
        return (getattr(importlib.import_module(module), cls),)
    except (ImportError, AttributeError):
        raise ValueError(f"kafka.assignor = {name!r}: the installed kafka-python has no {cls} (kafka-python >= 3 "
                         f"has every assignor)") from None


def managed_producer_settings(k: Any) -> dict[str, Any]:
    """The producer settings streamembed chooses itself, in kafka-python's names, whatever the client library."""
    out = _common(k, "producer")
    out.update(
        acks=-1 if k.acks == "all" else int(k.acks),
        batch_size=k.batch_size,
        linger_ms=k.linger_ms,
        max_request_size=k.max_request_size,
    )
    return out


def producer_settings(k: Any) -> dict[str, Any]:
    """``KafkaProducer`` keyword arguments: acks, batching, a request size that fits a batch message."""
    from kafka import KafkaProducer

    out = managed_producer_settings(k)
    out.update(_bootstrap_timeout(k, KafkaProducer.DEFAULT_CONFIG))
    out.update(_extra(k, KafkaProducer.DEFAULT_CONFIG))
    return out
