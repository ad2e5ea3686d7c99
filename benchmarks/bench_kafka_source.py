"""The Kafka source's CPU in a fresh process: start-up (imports, pandas or not) and per message, no broker.

    python -m benchmarks.bench_kafka_source [--messages 2000] [--rows 100] [--landmarks 64] [--partitions 4]
                                            [--repeat 5] [--tree PATH ...]

Each round starts a fresh interpreter per ``--tree`` (a source checkout, default this one; give an older
checkout too to compare, rounds interleaved) that imports the Kafka source and drains ``--messages`` Arrow
messages of ``--rows`` float32 rows from an in-memory consumer of ``--partitions`` partitions: decode, event
time from the message timestamp (``kafka.event_time = auto``), batches, hand-out and offset commit, as the
daemon's read-ahead does (no embedding, no broker). Printed per tree: the process CPU (user + system, imports
included) and whether pandas was imported (0.25 CPU-s, docs/throughput.md "Start-up"), then the drain's CPU per
message with pandas imported beforehand in both (the steady state). Medians and ranges over ``--repeat``
rounds; the machine is shared, compare trees within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

#: Run in the child: argv = messages rows landmarks partitions preimport_pandas.
_CHILD = r"""
import json, sys, time
from collections import namedtuple
N, M, W, P, pre = (int(a) for a in sys.argv[1:6])
if pre:
    import pandas  # noqa: F401
import numpy as np
import pyarrow as pa
from kafka import TopicPartition
from streamembed.kafka.codec import arrow_message
from streamembed.kafka.source import KafkaSource
from streamembed.stream.arrow_build import numeric, strings

Record = namedtuple("Record", "topic partition offset key value headers timestamp timestamp_type")
A = np.random.default_rng(0).random((M, W)).astype(np.float32)
value, headers = arrow_message(pa.table({"id": strings([f"x{i}" for i in range(M)]),
                                         "dissimilarities": pa.FixedSizeListArray.from_arrays(numeric(A.ravel()), W)}))
log = {p: [Record("in", p, i, None, value, headers, 1_700_000_000_000 + i, 0) for i in range(N // P)]
       for p in range(P)}

class Consumer:
    def __init__(self, **settings):
        self.pos, self.listener = dict.fromkeys(log, 0), None
    def subscribe(self, topics, listener):
        self.listener = listener
    def poll(self, timeout_ms=0, max_records=500):
        if self.listener is not None:
            self.listener.on_partitions_assigned({TopicPartition("in", p) for p in log})
            self.listener = None
        out = {}
        for p, recs in log.items():
            got = recs[self.pos[p]:self.pos[p] + max_records // P]
            if got:
                out[TopicPartition("in", p)] = got
                self.pos[p] += len(got)
        return out
    def commit(self, offsets, timeout_ms=None):
        pass
    def highwater(self, tp):
        return len(log[tp.partition])
    def position(self, tp, timeout_ms=None):
        return self.pos[tp.partition]
    def close(self, autocommit=False):
        pass

source = KafkaSource({}, "in", consumer_factory=lambda **s: Consumer(), batch_rows=1000)
t0, rows, idle = time.process_time(), 0, 0
while idle < 3:
    batch = source.poll()
    if batch is None:
        idle += 1
        continue
    rows += batch.table.num_rows
    source.commit(batch.position)
drain = time.process_time() - t0
assert rows == (N // P) * P * M, rows
print(json.dumps({"pandas": "pandas" in sys.modules, "drain_us_per_message": drain * 1e6 / ((N // P) * P)}))
"""


def _run(tree: Path, args: argparse.Namespace, pre: bool) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(args.messages), str(args.rows), str(args.landmarks),
                        str(args.partitions), str(int(pre))], env=env, cwd=tree, capture_output=True, text=True,
                       timeout=600, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def _summary(values: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--landmarks", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tree", action="append", type=Path, default=None,
                    help="a source checkout to measure (repeatable; default: this one)")
    args = ap.parse_args(argv)
    trees = [t.resolve() for t in (args.tree or [Path(__file__).resolve().parents[1]])]
    cold: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    warm: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(args.repeat):
        for t in trees:
            cold[t].append(_run(t, args, pre=False))
            warm[t].append(_run(t, args, pre=True))
    print(f"{args.messages} Arrow messages of {args.rows} rows x {args.landmarks} float32, {args.partitions} "
          f"partitions; median (range) of {args.repeat} rounds")
    print(f"{'tree':<40} {'process CPU-s':>22} {'pandas':>7} {'drain us/message (warm)':>26}")
    for t in trees:
        pandas = "yes" if any(r["pandas"] for r in cold[t]) else "no"
        print(f"{str(t)[-40:]:<40} {_summary([r['cpu'] for r in cold[t]], '{:.2f}'):>22} {pandas:>7} "
              f"{_summary([r['drain_us_per_message'] for r in warm[t]], '{:.0f}'):>26}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
