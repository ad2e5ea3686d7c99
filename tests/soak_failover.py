"""The failover soak: kill -9 of one of two Kafka replicas, again and again, timing how long its partitions go unowned.

Two daemons of one consumer group (their own roots, one embeddings and dead-letter directory: Kafka output files
are named after the input position, so the partition's next owner rewrites the same files) read a 2-partition
topic that a producer keeps feeding. Each round: both own a partition; one (alternately) is killed -9; the
survivor's ``/metrics`` is read every 0.1 s until it owns both partitions: the **takeover** time. Meanwhile its
``streamembed_kafka_partition_owned`` must show the killed replica's partition owned by nobody and its
``streamembed_kafka_group_lag`` must report that partition (what the orphaned-partition alert reads). The killed
replica is started again and the group rebalances back. At the end every message's rows are in the output
(lost otherwise; copies are counted: at-least-once).

Run with the daemon's defaults (``kafka.session_timeout_ms``, ``heartbeat_interval_ms``, ``assignor``): the table
row says what an operator gets out of the box::

    python -m tests.soak --mode failover [--runs 5]
"""

from __future__ import annotations

import json
import re
import statistics
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from tests.stream.helpers import fitted_model

__all__ = ["failover_soak", "FailoverResult"]


@dataclass
class FailoverResult:
    rows: list[dict[str, Any]]
    problems: list[str]
    details: dict[str, Any]


def _metrics(port_file: Path) -> dict[str, float]:
    """name{labels} -> value of the daemon's /metrics (empty when it does not answer)."""
    try:
        port = int(port_file.read_text())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except (OSError, ValueError):
        return {}
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(streamembed_kafka_[a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+|NaN)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def _owned(m: dict[str, float], topic: str) -> dict[int, float]:
    out = {}
    for k, v in m.items():
        g = re.match(r'streamembed_kafka_partition_owned\{partition="(\d+)",topic="' + re.escape(topic) + '"}', k)
        if g:
            out[int(g.group(1))] = v
    return out


class _Feed:
    """Produces JSON messages of a few rows to both partitions until stopped; every id into ``ids``."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 100.0) -> None:
        from kafka import KafkaProducer

        from tests.soak import _good_table

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        self.topic, self.rate, self.table = topic, rate, _good_table
        self.ids: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                ids = [f"f{n}-{i}" for i in range(5)]
                rows = [{"id": r["id"], "dissimilarities": [float(x) for x in r["dissimilarities"]]}
                        for r in self.table(ids, n).to_pylist()]
                self.producer.send(self.topic, json.dumps(rows).encode(), partition=n % 2,
                                   headers=[("content-type", b"application/json")]).get(30)
                self.ids += ids
                self.stop.wait(1.0 / self.rate)
        except BaseException as exc:
            self.error = exc

    def close(self) -> None:
        self.producer.close(10)


def failover_soak(workdir: Path, bootstrap: str, topic: str, runs: int = 5, drain_seconds: float = 90.0,
                  log: Callable[[str], None] = lambda s: None, env_extra: dict[str, str] | None = None
                  ) -> FailoverResult:
    """``runs`` kill -9 rounds on one of two replicas reading ``topic`` (2 partitions, created by the caller)."""
    from tests.soak import Runs, _read_parquet_ids

    workdir.mkdir(parents=True, exist_ok=True)
    model = workdir / "model.npz"
    fitted_model().save(model)
    shared = workdir / "shared"
    members: dict[str, tuple[Runs, Path]] = {}
    for name in ("a", "b"):
        port_file = workdir / f"port-{name}"
        env = {"STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_MODEL__PATH": str(model),
               "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "STREAMEMBED_KAFKA__INPUT_TOPIC": topic,
               "STREAMEMBED_KAFKA__GROUP_ID": f"failover-{topic}", "STREAMEMBED_OUTPUT__ROOT": str(workdir / name),
               "STREAMEMBED_OUTPUT__EMBEDDINGS_DIR": str(shared / "embeddings"),
               "STREAMEMBED_OUTPUT__DEAD_LETTER_DIR": str(shared / "dead-letter"),
               "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5", "STREAMEMBED_METRICS__PORT": "0",
               "STREAMEMBED_METRICS__PORT_FILE": str(port_file), "STREAMEMBED_LOGGING__FORMAT": "json",
               "STREAMEMBED_DRIFT__ENABLED": "false", **(env_extra or {})}
        members[name] = (Runs(workdir, env, name=f"replica-{name}"), port_file)
    feed = _Feed(bootstrap, topic)
    feeder = threading.Thread(target=feed.run, daemon=True)
    takeovers: list[float] = []
    problems: list[str] = []
    orphan_seen = lag_seen = 0
    t_start = time.monotonic()
    try:
        feeder.start()
        for r, _ in members.values():
            r.start()
        for k in range(runs):
            if not _split(members, topic, timeout=90):
                problems.append(f"round {k}: the two replicas never held one partition each")
                break
            victim, survivor = ("a", "b") if k % 2 == 0 else ("b", "a")
            victim_runs, _ = members[victim]
            survivor_runs, survivor_port = members[survivor]
            victim_parts = [p for p, v in _owned(_metrics(members[victim][1]), topic).items() if v == 1]
            members[victim][1].unlink(missing_ok=True)
            victim_runs.kill()
            took, orphaned, lag_reported = _takeover(survivor_port, topic, victim_parts, timeout=120)
            if took is None:
                problems.append(f"round {k}: the survivor did not take the partitions over within 120 s")
            else:
                takeovers.append(took)
                log(f"round {k}: killed {victim}; {survivor} owned both partitions after {took:.1f} s")
            orphan_seen += orphaned
            lag_seen += lag_reported
            survivor_runs.check()
            victim_runs.start()
        feed.stop.set()
        feeder.join(30)
        t_drain = time.monotonic()
        _drain(members, shared, feed.ids, drain_seconds)
    finally:
        feed.stop.set()
        for r, _ in members.values():
            r.close()
        feed.close()
    if feed.error is not None:
        raise feed.error
    got = Counter(_read_parquet_ids(shared / "embeddings", "part-*.parquet")[0])
    lost = [i for i in feed.ids if got[i] == 0]
    dup = sum(max(0, got[i] - 1) for i in feed.ids)
    crashes = sum(len(r.crashes) for r, _ in members.values())
    problems += [f"crash: {c}" for r, _ in members.values() for c in r.crashes]
    if lost:
        problems.append(f"{len(lost)} records lost, e.g. {lost[:5]}")
    if takeovers and orphan_seen < len(takeovers):
        problems.append(f"the orphaned partition showed owned by nobody in {orphan_seen} of {len(takeovers)} rounds")
    if takeovers and lag_seen < len(takeovers):
        problems.append(f"the survivor reported the orphaned partition's group lag in {lag_seen} of {len(takeovers)}")
    fault = "kill -9 of one of two Kafka replicas"
    if takeovers:
        fault += (f" (takeover {statistics.median(takeovers):.1f} s median, {max(takeovers):.1f} s max over "
                  f"{len(takeovers)} runs)")
    rows = [{"fault": fault, "runs": sum(r.starts for r, _ in members.values()), "records in": len(feed.ids),
             "lost": len(lost), "duplicated": dup, "crashes": crashes, "quarantined": 0}]
    details = {"takeovers": [round(t, 2) for t in takeovers], "seconds": round(time.monotonic() - t_start, 1),
               "drain_seconds": round(time.monotonic() - t_drain, 1) if takeovers else None}
    log(f"failover soak: {details}")
    return FailoverResult(rows, problems, details)


#: The group counts as settled when no member has rebalanced for this long (seconds): a kill then meets a stable
#: group, as it would in production, not the second round of a cooperative rebalance.
SETTLED_SECONDS = 10.0


def _drain(members: dict[str, Any], shared: Path, ids: list[str], drain_seconds: float) -> None:
    """Wait until every id is in the output (at most ``drain_seconds``), then stop the members one at a time
    (Tansu can wedge a group two members leave together)."""
    from tests.soak import _read_parquet_ids

    deadline = time.monotonic() + drain_seconds
    while time.monotonic() < deadline:
        for r, _ in members.values():
            r.check()
        got, _ = _read_parquet_ids(shared / "embeddings", "part-*.parquet")
        if set(ids) <= set(got):
            break
        time.sleep(0.5)
    time.sleep(1.0)
    for r, _ in members.values():
        r.stop()
        time.sleep(1.0)


def _split(members: dict[str, Any], topic: str, timeout: float) -> bool:
    """Wait until each replica owns one partition and the group has settled (no rebalance for SETTLED_SECONDS)."""
    end = time.monotonic() + timeout
    last: tuple[float, ...] = ()
    since = time.monotonic()
    while time.monotonic() < end:
        for r, _ in members.values():
            r.check()
        ms = [_metrics(port) for _, port in members.values()]
        owned = [sum(_owned(m, topic).values()) for m in ms]
        counts = tuple(m.get("streamembed_kafka_rebalances_total", -1.0) for m in ms)
        if counts != last or owned != [1, 1]:
            last, since = counts, time.monotonic()
        elif time.monotonic() - since >= SETTLED_SECONDS:
            return True
        time.sleep(0.2)
    return False


def _takeover(port_file: Path, topic: str, victim_parts: list[int],
              timeout: float) -> tuple[float | None, bool, bool]:
    """(seconds until the survivor owns every partition, whether a victim partition showed owned by nobody, whether
    the survivor reported its group lag) after the kill."""
    t0 = time.monotonic()
    orphaned = lag_reported = False
    while time.monotonic() - t0 < timeout:
        m = _metrics(port_file)
        owned = _owned(m, topic)
        if victim_parts and all(owned.get(p) == 0 for p in victim_parts):
            orphaned = True
        if any(k.startswith("streamembed_kafka_group_lag{") and f'partition="{p}"' in k for k in m
               for p in victim_parts):
            lag_reported = True
        if owned and all(v == 1 for v in owned.values()) and len(owned) >= 2:
            return time.monotonic() - t0, orphaned, lag_reported
        time.sleep(0.1)
    return None, orphaned, lag_reported
