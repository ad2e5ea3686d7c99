"""kafka-python clients from the ``[kafka]`` config, retries, and a producer that tracks durability.

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
* :class:`ReliableProducer` keeps every message until the broker acknowledged
  it; :meth:`ReliableProducer.flush` returns only when all are durable
  (re-sending those that failed transiently) - the loop commits input offsets
  after that. A message the client or the broker refuses as too large is
  handed back to its sender (``on_too_large``), which splits or shrinks it: a
  size error must not stop the daemon, or it fails again after every restart.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
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
    "validate_client_table",
    "known_client_keys",
    "assignors",
    "CAUGHT_UP_FETCH",
    "BEHIND_FETCH",
    "ReliableProducer",
]

log = logging.getLogger("streamembed.kafka")

#: ReliableProducer.flush waits for acknowledgements in rounds of this many seconds (each a sign of life).
FLUSH_WAIT_SECONDS = 10.0

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
    """Raise ValueError naming the first unusable ``[kafka.client]`` key."""
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
            except Exception as exc:  # noqa: BLE001 - classified below
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


def _bootstrap_timeout(k: Any, defaults: Iterable[str]) -> dict[str, Any]:
    """kafka-python 3's client blocks its constructor up to ``bootstrap_timeout_ms`` (30 s) for the first
    broker: never longer than ``kafka.startup_timeout_seconds``, so that an unreachable cluster exits 3 in time."""
    if "bootstrap_timeout_ms" not in set(defaults):
        return {}
    return {"bootstrap_timeout_ms": int(max(1.0, min(30.0, float(k.startup_timeout_seconds))) * 1000)}


def _extra(k: Any, allowed: Iterable[str]) -> dict[str, Any]:
    allowed = set(allowed)
    return {key: value for key, value in dict(k.client).items() if key in allowed}


def consumer_settings(k: Any, *, group: bool = True) -> dict[str, Any]:
    """``KafkaConsumer`` keyword arguments: manual commits, fetch sizes for batch messages."""
    from kafka import KafkaConsumer

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
        out["partition_assignment_strategy"] = assignors(k.assignor)
    out.update(_bootstrap_timeout(k, KafkaConsumer.DEFAULT_CONFIG))
    out.update(_extra(k, KafkaConsumer.DEFAULT_CONFIG))
    return out


#: ``kafka.fetch_max_wait_ms = "auto"``: (fetch_max_wait_ms, fetch_min_bytes) while the consumer is caught up, and
#: while it is behind by more than a batch (``kafka.source``): short waits for latency, full fetches for a backlog.
CAUGHT_UP_FETCH = (10, 1)
BEHIND_FETCH = (100, 1 << 20)


def assignors(name: str) -> tuple[type, ...]:
    """The kafka-python assignor classes of ``kafka.assignor`` (auto: cooperative-sticky where the client has it)."""
    import importlib

    paths = {"cooperative-sticky": ("kafka.coordinator.assignors.cooperative_sticky", "CooperativeStickyAssignor"),
             "sticky": ("kafka.coordinator.assignors.sticky.sticky_assignor", "StickyPartitionAssignor"),
             "range": ("kafka.coordinator.assignors.range", "RangePartitionAssignor"),
             "roundrobin": ("kafka.coordinator.assignors.roundrobin", "RoundRobinPartitionAssignor")}
    wanted = ["cooperative-sticky", "range"] if name == "auto" else [name]
    for choice in wanted:
        module, cls = paths[choice]
        try:
            return (getattr(importlib.import_module(module), cls),)
        except (ImportError, AttributeError):
            if name != "auto":
                raise ValueError(f"kafka.assignor = {name!r}: the installed kafka-python has no {cls}") from None
    raise ValueError("kafka-python has no range assignor")


def producer_settings(k: Any) -> dict[str, Any]:
    """``KafkaProducer`` keyword arguments: acks, batching, a request size that fits a batch message."""
    from kafka import KafkaProducer

    out = _common(k, "producer")
    out.update(
        acks=-1 if k.acks == "all" else int(k.acks),
        batch_size=k.batch_size,
        linger_ms=k.linger_ms,
        max_request_size=k.max_request_size,
    )
    out.update(_bootstrap_timeout(k, KafkaProducer.DEFAULT_CONFIG))
    out.update(_extra(k, KafkaProducer.DEFAULT_CONFIG))
    return out


# ----------------------------------------------------------------------------- producer


@dataclass
class _Pending:
    future: Any
    topic: str
    value: bytes | None
    key: bytes | None
    headers: list[tuple[str, bytes]]
    size: int
    on_too_large: Callable[[int], None] | None = None


class ReliableProducer:
    """A ``KafkaProducer`` whose :meth:`flush` returns only when every message sent is acknowledged.

    Messages stay in memory until acknowledged; those that failed with a
    transient error are sent again (exponential backoff) during
    :meth:`flush`; a permanent error raises :class:`KafkaDeliveryError`, and
    so does a ``stop`` request while retrying: the caller then does not
    commit its input offsets, so nothing is lost. :attr:`unacked_bytes` is the
    backpressure signal (bytes sent but not yet acknowledged).
    """

    def __init__(self, settings: Mapping[str, Any], *, metrics: Any = None, stop: threading.Event | None = None,
                 max_backoff: float = 10.0, factory: Callable[..., Any] | None = None) -> None:
        from kafka import KafkaProducer

        self.metrics = metrics
        self.stop = stop or threading.Event()
        self.max_backoff = max_backoff
        make = factory or KafkaProducer
        self._producer = retry(lambda: make(**settings), "connecting the producer", stop=self.stop, metrics=metrics,
                               max_backoff=max_backoff)
        self._pending: deque[_Pending] = deque()
        self._unacked = 0
        self.delivered = 0

    def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None,
             on_too_large: Callable[[int], None] | None = None) -> None:
        """Hand one message to the client (non-blocking unless its buffer is full).

        ``on_too_large(size)`` is called (instead of raising) when the client
        or, during :meth:`flush`, the broker refuses the message for its size;
        it sends what replaces it. Without it such a refusal raises
        :class:`KafkaDeliveryError`.
        """
        headers = headers or []
        size = (len(value) if value is not None else 0) + (len(key) if key else 0)
        try:
            fut = retry(lambda: self._producer.send(topic, value=value, key=key, headers=headers),
                        f"producing to {topic}", stop=self.stop, metrics=self.metrics, max_backoff=self.max_backoff)
        except Exception as exc:  # noqa: BLE001 - a size refusal goes back to the sender
            if not is_too_large(exc):
                raise
            if on_too_large is None:
                raise KafkaDeliveryError(f"producing to {topic}: {type(exc).__name__}: {exc}") from exc
            on_too_large(size)
            return
        self._pending.append(_Pending(fut, topic, value, key, headers, size, on_too_large))
        self._unacked += size

    @property
    def pending_messages(self) -> int:
        return len(self._pending)

    @property
    def unacked_bytes(self) -> int:
        """Bytes sent and not yet acknowledged (acknowledged ones at the front are counted out)."""
        # futures complete roughly in order; a failed one stays until flush re-sends it
        while self._pending and self._pending[0].future.is_done and self._pending[0].future.succeeded():
            p = self._pending.popleft()
            self._unacked -= p.size
            self._delivered(p.topic, 1)
        return self._unacked

    def _delivered(self, topic: str, n: int) -> None:
        self.delivered += n
        if self.metrics is not None:
            self.metrics.kafka_messages_out.labels(topic=topic).inc(n)

    def flush(self) -> int:
        """Block until every message sent so far is acknowledged; returns how many were pending.

        Waits in rounds of ``FLUSH_WAIT_SECONDS`` (each a sign of life for the probes, ``liveness.py``), so
        a broker outage keeps the daemon alive but unready instead of wedged.
        """
        with WAITS.waiting("waiting for the brokers to acknowledge produced messages") as attempt_failed:
            return self._flush(attempt_failed)

    def _wait_acknowledged(self, attempt_failed: Callable[[str], None]) -> None:
        """``KafkaProducer.flush()`` in rounds of FLUSH_WAIT_SECONDS until every send has an outcome."""
        from kafka.errors import KafkaTimeoutError

        while True:
            try:
                self._producer.flush(timeout=FLUSH_WAIT_SECONDS)
                return
            except KafkaTimeoutError as exc:
                attempt_failed(f"not acknowledged within {FLUSH_WAIT_SECONDS:g} s: {exc}")
                if self.stop.is_set():
                    return  # the undone sends count as failed below: stopping raises KafkaDeliveryError

    def _flush(self, attempt_failed: Callable[[str], None]) -> int:
        total = 0
        backoff = Backoff(maximum=self.max_backoff)
        while self._pending:
            self._wait_acknowledged(attempt_failed)
            failed: list[_Pending] = []
            too_large: list[_Pending] = []
            counts: dict[str, int] = {}
            while self._pending:
                p = self._pending.popleft()
                self._unacked -= p.size
                fut = p.future
                if not fut.is_done:  # flush returned early (client closing): treat as transient
                    failed.append(p)
                    continue
                if fut.succeeded():
                    counts[p.topic] = counts.get(p.topic, 0) + 1
                    continue
                exc = fut.exception
                if self.metrics is not None:
                    self.metrics.kafka_produce_errors.inc()
                if is_too_large(exc) and p.on_too_large is not None:
                    too_large.append(p)
                    continue
                if not is_transient(exc):
                    raise KafkaDeliveryError(f"producing to {p.topic} failed permanently: "
                                             f"{type(exc).__name__}: {exc}") from exc
                failed.append(p)
            for topic, n in counts.items():
                self._delivered(topic, n)
                total += n
            for p in too_large:  # after the pass: what they send is flushed by the next one
                log.warning("the broker refused a %d-byte message to %s as too large; splitting or shrinking it",
                            p.size, p.topic)
                assert p.on_too_large is not None
                p.on_too_large(p.size)
            if not failed:
                continue
            if self.stop.is_set():
                raise KafkaDeliveryError(f"stopping with {len(failed)} messages not acknowledged (they will be "
                                         "produced again from the uncommitted input)")
            delay = backoff.next_delay()
            attempt_failed(f"{len(failed)} messages failed transiently")
            log.warning("%d messages failed transiently; producing them again in %.2f s", len(failed), delay)
            self.stop.wait(delay)
            for p in failed:
                if self.metrics is not None:
                    self.metrics.kafka_retries.inc()
                self.send(p.topic, p.value, key=p.key, headers=p.headers, on_too_large=p.on_too_large)
        return total

    def close(self, timeout: float = 10.0) -> None:
        """Close the client; unacknowledged messages are dropped (their input was not committed)."""
        try:
            self._producer.close(timeout=timeout)
        except Exception:  # noqa: BLE001 - closing is best effort
            log.warning("closing the Kafka producer failed", exc_info=True)
