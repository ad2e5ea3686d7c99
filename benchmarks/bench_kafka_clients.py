"""The Kafka daemon on each client library (``kafka.client_library``) against that library's raw consumption.

    python -m benchmarks.bench_kafka_clients [--messages 150] [--objects-per-message 1000] [--landmarks 256]
                                             [--dims 2] [--rounds 5] [--libraries kafka-python,confluent]

Starts its own Tansu broker (127.0.0.1, memory storage) and produces
``--messages`` Arrow IPC messages once (1000 float32 rows x 256 landmarks:
1.03 MB each). Then, in ``--rounds`` rounds, each round running every
contender once in a rotating order (the machine is shared: only ratios within
a round mean anything), per library:

* raw: the library's own consumer, group-less, with the daemon's fetch
  settings, consuming every message and nothing else (kafka-python's
  ``KafkaConsumer.poll``; confluent-kafka's ``Consumer.consume``, the
  librdkafka client itself, not streamembed's wrapper around it);
* daemon: the daemon's Kafka loop in process on that library
  (``benchmarks.bench_e2e.daemon_consume``: the consumer-group source behind
  the read-ahead, decode, embed by projection, the drift monitor, Arrow
  output messages with acks=all, offsets committed after the outputs are
  acknowledged), from its first batch to its final commit.

Both rates exclude start-up (the group join, the first fetch). The table
gives each contender's objects/s (median), the daemon's ratio to its own
library's raw consumption (min, median over the rounds; target >= 0.8) and
each rate over kafka-python's in the same round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_e2e import daemon_consume, make_messages, produce, raw_consume


def confluent_raw(bootstrap: str, topic: str, partitions: int, n_msgs: int, settings: dict[str, Any]
                  ) -> tuple[float, int, int]:
    """(seconds, messages, bytes) of a bare confluent-kafka consumer with the daemon's configuration, from its
    first non-empty ``consume`` (not counted) to the last message."""
    import confluent_kafka as ck

    from streamembed.kafka.librdkafka.settings import consumer_conf

    conf = consumer_conf({**{k: v for k, v in settings.items() if k != "group_id"}, "bootstrap_servers": bootstrap})
    c = ck.Consumer(conf)
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got = nbytes = first = 0
    t0 = None
    deadline = time.monotonic() + 300
    batch = int(settings.get("max_poll_records", 500))
    while got < n_msgs and time.monotonic() < deadline:
        # consume(n, timeout) waits until it has n messages or the timeout passed: the first call takes one message
        # (the clock starts at the first fetch, not after a batch filled up behind it), the last no more than are left
        want = 1 if t0 is None else min(batch, n_msgs - got)
        msgs = [m for m in c.consume(want, 0.5) if m.error() is None]
        if msgs and t0 is None:
            t0, first = time.perf_counter(), len(msgs)
        got += len(msgs)
        nbytes += sum(len(m.value()) for m in msgs)
    dt = time.perf_counter() - (t0 or time.perf_counter())
    c.close()
    if got < n_msgs:
        raise RuntimeError(f"the consumer got {got} of {n_msgs} messages")
    return dt, got - first, nbytes * (got - first) // max(got, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=150)
    ap.add_argument("--objects-per-message", type=int, default=1000)
    ap.add_argument("--landmarks", type=int, default=256)
    ap.add_argument("--dims", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--libraries", default="kafka-python,confluent")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    libraries = args.libraries.split(",")

    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS
    from streamembed.config import load_config
    from streamembed.core import _native
    from streamembed.kafka.libraries import clients_for
    from tools.broker import TansuBroker

    rng = np.random.default_rng(args.seed)
    L = rng.standard_normal((args.landmarks, 10)) * 3.0
    est = LandmarkMDS(n_components=args.dims).fit(cdist(L, L))
    m, n_msgs = args.objects_per_message, args.messages
    messages = make_messages(n_msgs, m, L, rng)
    mb = sum(map(len, messages)) / 1e6
    print(f"{n_msgs} Arrow messages of {m} objects x {args.landmarks} float32 ({mb:.1f} MB); kernels "
          f"{_native.isa()}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    contenders = [(lib, kind) for lib in libraries for kind in ("raw", "daemon")]
    rates: dict[tuple[str, str], list[float]] = {c: [] for c in contenders}
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        broker.create_topic("bench-in", partitions=1)
        broker.create_topic("bench-out", partitions=1)
        produce(broker.bootstrap, "bench-in", messages)
        del messages
        for r in range(args.rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for lib, kind in order:
                overrides = {"kafka.client_library": lib}
                k = load_config(overrides=overrides).kafka
                settings = clients_for(k).consumer_settings(k)
                if kind == "raw":
                    raw = confluent_raw if lib == "confluent" else raw_consume
                    dt, got, _ = raw(broker.bootstrap, "bench-in", 1, n_msgs, settings)
                    rate = got * m / dt
                else:
                    dt, objs, _ = daemon_consume(broker.bootstrap, "bench-in", "bench-out",
                                                 f"bench-{lib}-{r}-{os.getpid()}", est, n_msgs * m, m, Path(tmp),
                                                 overrides)
                    rate = objs / dt
                rates[(lib, kind)].append(rate)
                print(f"round {r}: {lib:12s} {kind:6s} {rate:12,.0f} objects/s", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} after; {args.rounds} rounds\n")
    print("| library | raw objects/s (median) | daemon objects/s (median) | daemon / raw (min, median) | "
          "raw / kafka-python raw (median) | daemon / kafka-python daemon (median) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    base = libraries[0]
    for lib in libraries:
        raw, dm = rates[(lib, "raw")], rates[(lib, "daemon")]
        ratio = [d / w for d, w in zip(dm, raw, strict=True)]
        over_raw = [a / b for a, b in zip(raw, rates[(base, "raw")], strict=True)]
        over_dm = [a / b for a, b in zip(dm, rates[(base, "daemon")], strict=True)]
        print(f"| {lib} | {statistics.median(raw):,.0f} | {statistics.median(dm):,.0f} | {min(ratio):.2f}, "
              f"{statistics.median(ratio):.2f} | {statistics.median(over_raw):.2f} | "
              f"{statistics.median(over_dm):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
