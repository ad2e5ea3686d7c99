"""End-to-end Kafka latency and backlog throughput of the daemon, by consumer fetch wait and producer linger.

A Tansu broker on 127.0.0.1; a producer sends objects (JSON messages of ``--rows`` rows) to a 1-partition input
topic at each rate for ``--seconds``; the daemon embeds them to an output topic; a consumer of the output topic
(fetch wait 5 ms) notes when each id arrives: latency = arrival - send, p50 and p99 per rate. Then a backlog of
``--backlog`` objects is produced at once and the time until all are out gives the backlog throughput. The first
row is the transport floor: the same producer and consumer with no daemon between them (input topic -> the
consumer directly), so ``floor`` is what Kafka on this broker costs by itself.

    python -m benchmarks.bench_kafka_latency [--rates 200,2000,10000] [--seconds 8] [--configs auto,500,100,10]

Each config is ``fetch_max_wait_ms[/linger_ms]`` (``auto``: kafka.fetch_max_wait_ms = "auto"); linger defaults
to the daemon's. Prints a Markdown table (docs/kafka.md, latency, has one). Load (``uptime``) goes beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np


def _model(path: Path, n: int = 50, p: int = 8) -> np.ndarray:
    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS

    rng = np.random.default_rng(0)
    L = rng.normal(size=(n, p))
    LandmarkMDS(n_components=2).fit(cdist(L, L)).save(path)
    return L


class _Arrivals:
    """Consumes ``topic`` from its start in a thread; ``seen[id]`` = arrival time (Arrow or JSON messages)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5,
                               max_partition_fetch_bytes=64 << 20)
        tp = TopicPartition(topic, 0)
        self.c.assign([tp])
        self.c.seek_to_beginning(tp)
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        import pyarrow as pa

        while not self.stop.is_set():
            for recs in self.c.poll(timeout_ms=50).values():
                now = time.time()
                for r in recs:
                    if r.value[:1] in (b"[", b"{"):
                        ids = [o["id"] for o in json.loads(r.value)] if r.value[:1] == b"[" else [
                            json.loads(r.value)["id"]]
                    else:
                        ids = pa.ipc.open_stream(pa.py_buffer(r.value)).read_all().column("id").to_pylist()
                    for i in ids:
                        self.seen.setdefault(i, now)

    def close(self) -> None:
        self.stop.set()
        self.t.join(10)
        self.c.close()


def _rows(L: np.ndarray, ids: list[str], rng: np.random.Generator) -> bytes:
    from scipy.spatial.distance import cdist

    Z = L[rng.integers(0, len(L), len(ids))] + rng.normal(scale=0.1, size=(len(ids), L.shape[1]))
    A = cdist(Z, L)
    return json.dumps([{"id": i, "dissimilarities": [round(float(x), 5) for x in a]}
                       for i, a in zip(ids, A, strict=True)]).encode()


def _send(producer: Any, topic: str, L: np.ndarray, rate: float, seconds: float, rows: int, tag: str,
          sent: dict[str, float]) -> None:
    """``rate`` objects/s in messages of ``rows`` for ``seconds``; each id's send time into ``sent``."""
    rng = np.random.default_rng(1)
    per = max(1, min(rows, int(rate // 50) or 1))
    interval = per / rate
    n, t0 = 0, time.time()
    while time.time() - t0 < seconds:
        ids = [f"{tag}-{n}-{k}" for k in range(per)]
        value = _rows(L, ids, rng)
        now = time.time()
        for i in ids:
            sent[i] = now
        producer.send(topic, value, headers=[("content-type", b"application/json")])
        n += 1
        wait = t0 + n * interval - time.time()
        if wait > 0:
            time.sleep(wait)
    producer.flush(30)


def _latencies(sent: dict[str, float], seen: dict[str, float], prefix: str) -> np.ndarray:
    return np.asarray([seen[i] - t for i, t in sent.items() if i.startswith(prefix) and i in seen])


def _wait_for(seen: dict[str, float], ids: list[str], timeout: float) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if all(i in seen for i in ids):
            return True
        time.sleep(0.05)
    return False


def run_config(broker: Any, workdir: Path, L: np.ndarray, model: Path, name: str, rates: list[float],
               seconds: float, rows: int, backlog: int) -> dict[str, Any]:
    from kafka import KafkaProducer

    topic, out = f"in-{name.replace('/', '-')}", f"out-{name.replace('/', '-')}"
    broker.create_topic(topic)
    broker.create_topic(out)
    broker.create_topic(f"{topic}.dlq")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, max_request_size=32 << 20)
    arrivals = _Arrivals(broker.bootstrap, topic if name == "floor" else out)
    proc = None
    sent: dict[str, float] = {}
    result: dict[str, Any] = {"config": name}
    try:
        if name != "floor":
            wait, _, linger = name.partition("/")
            env = {**os.environ, "STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_MODEL__PATH": str(model),
                   "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap, "STREAMEMBED_KAFKA__INPUT_TOPIC": topic,
                   "STREAMEMBED_KAFKA__GROUP_ID": f"g-{topic}", "STREAMEMBED_OUTPUT__KAFKA_TOPIC": out,
                   "STREAMEMBED_OUTPUT__PARQUET": "false", "STREAMEMBED_OUTPUT__ROOT": str(workdir / topic),
                   "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_DRIFT__ENABLED": "false",
                   "STREAMEMBED_CONSISTENCY__ENABLED": "false", "STREAMEMBED_KAFKA__SESSION_TIMEOUT_MS": "6000",
                   "STREAMEMBED_KAFKA__HEARTBEAT_INTERVAL_MS": "2000", "STREAMEMBED_KAFKA__FETCH_MAX_WAIT_MS": wait,
                   "OPENBLAS_NUM_THREADS": "1"}
            if linger:
                env["STREAMEMBED_KAFKA__LINGER_MS"] = linger
            proc = subprocess.Popen([sys.executable, "-m", "streamembed", "run"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probe = [f"probe-{k}" for k in range(3)]
        producer.send(topic, _rows(L, probe, np.random.default_rng(2)), headers=[("content-type",
                                                                                   b"application/json")])
        producer.flush(30)
        if not _wait_for(arrivals.seen, probe, 90):
            result["error"] = "no output within 90 s"
            return result
        for rate in rates:
            tag = f"r{int(rate)}"
            _send(producer, topic, L, rate, seconds, rows, tag, sent)
            _wait_for(arrivals.seen, [i for i in sent if i.startswith(tag)], 30)
            lat = _latencies(sent, arrivals.seen, tag)
            result[rate] = (float(np.percentile(lat, 50)) * 1000, float(np.percentile(lat, 99)) * 1000) \
                if lat.size else (float("nan"), float("nan"))
        ids = [f"b-{k}" for k in range(backlog)]
        t0 = time.time()
        for start in range(0, backlog, 500):
            producer.send(topic, _rows(L, ids[start:start + 500], np.random.default_rng(3)),
                          headers=[("content-type", b"application/json")])
        producer.flush(60)
        done = _wait_for(arrivals.seen, ids, 120)
        result["backlog"] = backlog / (max(arrivals.seen[i] for i in ids) - t0) if done else float("nan")
        return result
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        arrivals.close()
        producer.close(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="200,2000,10000")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rows", type=int, default=20, help="most rows per input message")
    ap.add_argument("--backlog", type=int, default=50_000)
    ap.add_argument("--configs", default="floor,500,100,10,auto,auto/0,auto/20")
    args = ap.parse_args(argv)
    from tools.broker import TansuBroker

    rates = [float(r) for r in args.rates.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-latency-"))
    L = _model(work / "model.npz")
    rows = []
    with TansuBroker() as broker:
        for name in args.configs.split(","):
            rows.append(run_config(broker, work, L, work / "model.npz", name, rates, args.seconds, args.rows,
                                   args.backlog))
            print(f"done {name}: {rows[-1]}", file=sys.stderr, flush=True)
    head = "| fetch wait / linger (ms) | " + " | ".join(f"p50 / p99 at {int(r):,}/s (ms)" for r in rates)
    print(head + " | backlog objects/s |")
    print("| --- " * (len(rates) + 2) + "|")
    for r in rows:
        cells = [f"{r[rate][0]:.0f} / {r[rate][1]:.0f}" if rate in r else r.get("error", "-") for rate in rates]
        print(f"| {r['config']} | " + " | ".join(cells) + f" | {r.get('backlog', float('nan')):,.0f} |")
    print(f"\nload: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
