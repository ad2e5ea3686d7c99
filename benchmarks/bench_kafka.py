"""Kafka throughput: raw kafka-python consume vs the daemon's consume -> embed -> produce, same messages.

    python -m benchmarks.bench_kafka [--messages 150] [--objects-per-message 1000] [--landmarks 256]
                                     [--dims 2] [--partitions 1] [--repeat 2]

Starts its own Tansu broker (127.0.0.1, memory storage), produces
``--messages`` Arrow IPC stream messages of ``--objects-per-message`` float32
rows x ``--landmarks`` dissimilarities (1000 x 256: 1.03 MB each, so 150
messages = ~155 MB), then measures, on the same messages:

* raw: a group-less ``KafkaConsumer`` with the daemon's fetch settings,
  ``poll`` and nothing else (the values are not even looked at);
* daemon: the daemon's own pieces in process - ``KafkaSource`` (a consumer
  group, manual commits), ``EmbeddingLoop`` (decode, validate, embed with
  the projection method, encode), ``KafkaOutputSink`` (Arrow messages to an
  output topic, acks=all), offsets committed after the outputs are
  acknowledged; the run ends with the final flush and commit.

Both rates exclude start-up (the group join, the first fetch): they are
counted from the first consumer poll that returned records (those records
not counted) to the last message (raw) or to the final commit (daemon). Each measurement is repeated
``--repeat`` times (fresh group) and the best is reported; compare only the ratio (the machine is shared,
docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.spatial.distance import cdist



# the measurements are shared with `python -m benchmarks bench` (its "daemon kafka" row)
from benchmarks.bench_e2e import daemon_consume as daemon_run
from benchmarks.bench_e2e import make_messages, produce, raw_consume


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=150)
    ap.add_argument("--objects-per-message", type=int, default=1000)
    ap.add_argument("--landmarks", type=int, default=256)
    ap.add_argument("--dims", type=int, default=2)
    ap.add_argument("--features", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval for this run (default: the daemon's setting)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="kafka.KEY=VALUE",
                    help="config override for both the raw consumer and the daemon (repeatable)")
    args = ap.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.set)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)

    from streamembed import LandmarkMDS
    from streamembed.config import load_config
    from streamembed.kafka.client import consumer_settings
    from tools.broker import TansuBroker

    rng = np.random.default_rng(args.seed)
    L = rng.standard_normal((args.landmarks, args.features)) * 3.0
    est = LandmarkMDS(n_components=args.dims).fit(cdist(L, L))
    m, n_msgs = args.objects_per_message, args.messages
    t0 = time.perf_counter()
    messages = make_messages(n_msgs, m, L, rng)
    total_bytes = sum(map(len, messages))
    print(f"{n_msgs} Arrow messages of {m} objects x {args.landmarks} float32 = {total_bytes / 1e6:.1f} MB "
          f"({len(messages[0]) / 1e6:.3f} MB each; made in {time.perf_counter() - t0:.1f} s)")
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        topic, out = "bench-in", "bench-out"
        broker.create_topic(topic, partitions=args.partitions)
        broker.create_topic(out, partitions=args.partitions)
        dt = produce(broker.bootstrap, topic, messages, args.partitions)
        print(f"produce (kafka-python): {total_bytes / 1e6 / dt:7.1f} MB/s")
        del messages
        settings = consumer_settings(load_config(overrides=overrides).kafka)
        raw_best = dm_best = None
        ratios = []
        for r in range(args.repeat):
            dt_raw, n, nbytes = raw_consume(broker.bootstrap, topic, args.partitions, n_msgs, settings)
            rate = (n * m / dt_raw, nbytes / 1e6 / dt_raw)
            raw_best = rate if raw_best is None or rate[0] > raw_best[0] else raw_best
            print(f"raw consume   run {r}: {rate[0]:12,.0f} objects/s  {rate[1]:7.1f} MB/s")
            dt, n_obj, info = daemon_run(broker.bootstrap, topic, out, f"bench-{r}-{os.getpid()}", est,
                                         n_msgs * m, m, Path(tmp), overrides)
            rate = (n_obj / dt, n_obj / m * (total_bytes / n_msgs) / 1e6 / dt)
            dm_best = rate if dm_best is None or rate[0] > dm_best[0] else dm_best
            ratios.append(rate[0] / (n * m / dt_raw))
            print(f"daemon        run {r}: {rate[0]:12,.0f} objects/s  {rate[1]:7.1f} MB/s   ratio {ratios[-1]:.2f}  "
                  f"{info}")
        print(f"best raw consume    : {raw_best[0]:12,.0f} objects/s  {raw_best[1]:7.1f} MB/s")
        print(f"best daemon end2end : {dm_best[0]:12,.0f} objects/s  {dm_best[1]:7.1f} MB/s")
        print(f"ratio daemon / raw  : best/best {dm_best[0] / raw_best[0]:.2f}, median of runs "
              f"{float(np.median(ratios)):.2f}  (target >= 0.8)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
