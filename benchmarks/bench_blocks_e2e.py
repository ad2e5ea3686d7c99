"""The daemon end to end on blocks, before and after, in one run: files and Kafka.

    python benchmarks/bench_blocks_e2e.py [--before /path/to/an/older/checkout] [--landmarks 500] [--dims 10]
                                          [--k 8] [--objects 16384] [--before-objects 2048]

Each tree (this checkout, and the older one given with ``--before``) runs
its own CLI as a subprocess (``PYTHONPATH`` set to the tree): ``streamembed
fit`` on the same landmark dissimilarities (n x n, Euclidean, points in
R^(2d)), then ``streamembed run`` on

* **files, one block per file**: a directory of Parquet files of k rows with
  ``cross`` (the only block layout the older tree reads);
* **files, many blocks per file** (this checkout only): the same blocks in
  Parquet files of 4096 rows with a ``block`` column;
* **Kafka**: the same blocks as Arrow IPC block messages (one block each) on
  a topic of the Tansu test broker, consumed from the beginning.

Both trees run with ``source.batch_rows = 512`` (a Kafka batch of this
checkout holds up to 64 blocks of 8). The rate is (rows - first batch) /
(last - first ``processed_at``) of the output Parquet files: start-up, the group join and the first batch are left
out, so the two trees are compared on their steady state. Compare only the
ratios (the machine is shared and noisy, docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parents[1]
#: source.batch_rows for both trees: enough batches for a steady-state rate from processed_at
BATCH_ROWS = 512


def _euclidean(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    sq = (P * P).sum(1)[:, None] + (Q * Q).sum(1)[None, :] - 2.0 * P @ Q.T
    return np.sqrt(np.maximum(sq, 0.0))


def _problem(n: int, d: int, m: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Landmark matrix (n, n), rows (m, n) float32 and the m/k blocks' cross matrices."""
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((n, 2 * d))
    Z = rng.standard_normal((m, 2 * d))
    D = _euclidean(L, L)
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    C = []
    for s in range(0, m, k):
        c = _euclidean(Z[s:s + k], Z[s:s + k])
        c = 0.5 * (c + c.T)
        np.fill_diagonal(c, 0.0)
        C.append(c.astype(np.float32))
    return D, _euclidean(Z, L).astype(np.float32), C


def _fixed(A: np.ndarray) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(A).reshape(-1)), A.shape[1])


def _block_table(A: np.ndarray, C: list[np.ndarray], first: int, k: int, with_key: bool) -> pa.Table:
    m = A.shape[0]
    ids = pa.array([f"o{first + i}" for i in range(m)], pa.string())
    cols = {"id": ids, "dissimilarities": _fixed(A)}
    if with_key:
        cols["cross"] = pa.array([c[i].tolist() for c in C for i in range(c.shape[0])], pa.list_(pa.float32()))
        cols["block"] = pa.array(np.repeat(np.arange(len(C)) + first // k, k), pa.int64())
    else:
        cols["cross"] = _fixed(np.vstack(C))
    return pa.table(cols)


def _cli(tree: Path, args: list[str], env: dict[str, str] | None = None, timeout: float = 1800) -> None:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    full.update({"PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"})
    full.update(env or {})
    # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH
    r = subprocess.run([sys.executable, "-m", "streamembed", *args], env=full, capture_output=True, text=True,
                       timeout=timeout, cwd=tempfile.gettempdir())
    if r.returncode != 0:
        raise RuntimeError(f"{tree}: streamembed {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")


def _embedded(port: int) -> float | None:
    """streamembed_records_embedded_total (summed over its labels) from the daemon's /metrics (None if unreachable)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
            text = r.read().decode()
    except OSError:
        return None
    total = None
    for line in text.splitlines():  # unlabelled, or one sample per method
        if line.startswith("streamembed_records_embedded_total"):
            total = (total or 0.0) + float(line.split()[-1])
    return total


def _run_measured(tree: Path, env: dict[str, str], expect: int, work: Path, timeout: float = 1800) -> float:
    """Run the daemon until it exits (``expect`` records); objects/s from its embedded-records counter,
    polled every 10 ms, from the first poll that saw records to the last (or to the exit)."""
    port_file = work / f"port-{time.monotonic_ns()}"
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    full.update({"PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1", "STREAMEMBED_METRICS__PORT": "0",
                 "STREAMEMBED_METRICS__PORT_FILE": str(port_file)})
    full.update(env)
    log = open(work / "daemon.log", "ab")  # noqa: SIM115 - the daemon's output for as long as it runs
    proc = subprocess.Popen([sys.executable, "-m", "streamembed", "run"], env=full, stdout=log, stderr=log, cwd=work)
    deadline = time.monotonic() + timeout
    first: tuple[float, float] | None = None
    last: tuple[float, float] | None = None
    port = None
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if port is None and port_file.exists() and port_file.read_text().strip():
                port = int(port_file.read_text())
            n = _embedded(port) if port is not None else None
            now = time.monotonic()
            if n:
                if first is None:
                    first = (now, n)
                last = (now, n)
                if n >= expect:
                    break
            time.sleep(0.01)
        end = time.monotonic()
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: streamembed run exited {proc.returncode}; see {work / 'daemon.log'}")
    if first is None or last is None:
        raise RuntimeError(f"{tree}: no records seen embedded")
    t2, n2 = (last if last[1] >= expect else (end, float(expect)))
    return (n2 - first[1]) / (t2 - first[0]) if t2 > first[0] else float("nan")


def _env(model: Path, root: Path, **more: str) -> dict[str, str]:
    env = {"STREAMEMBED_MODEL__PATH": str(model), "STREAMEMBED_OUTPUT__ROOT": str(root),
           "STREAMEMBED_DRIFT__ENABLED": "false",
           "STREAMEMBED_OUTPUT__ROLL_ROWS": "1000000", "STREAMEMBED_OUTPUT__ROLL_SECONDS": "600",
           "STREAMEMBED_SOURCE__BATCH_ROWS": str(BATCH_ROWS)}
    env.update({f"STREAMEMBED_{k}": v for k, v in more.items()})
    return env


def run_files(tree: Path, model: Path, work: Path, A: np.ndarray, C: list[np.ndarray], k: int,
              many: bool) -> float:
    src = work / ("many" if many else "one")
    src.mkdir()
    per = 4096 if many else k
    for s in range(0, A.shape[0], per):
        b0, b1 = s // k, (s + per) // k
        pq.write_table(_block_table(A[s:s + per], C[b0:b1], s, k, with_key=many), src / f"b{s:08d}.parquet")
    root = work / f"out-{'many' if many else 'one'}"
    return _run_measured(tree, _env(model, root, SOURCE__KIND="directory", DIRECTORY__PATH=str(src),
                                    DIRECTORY__SETTLE_SECONDS="0", DIRECTORY__EXIT_WHEN_IDLE="true"),
                         A.shape[0], work)


def run_kafka(tree: Path, model: Path, work: Path, bootstrap: str, topic: str, m: int) -> float:
    root = work / "out-kafka"
    return _run_measured(tree, _env(model, root, SOURCE__KIND="kafka", KAFKA__BOOTSTRAP_SERVERS=bootstrap,
                                    KAFKA__INPUT_TOPIC=topic, KAFKA__GROUP_ID=f"bench-{time.monotonic_ns()}",
                                    KAFKA__SESSION_TIMEOUT_MS="10000", KAFKA__HEARTBEAT_INTERVAL_MS="3000",
                                    RUN__MAX_RECORDS=str(m)), m, work)


def produce_blocks(bootstrap: str, topic: str, A: np.ndarray, C: list[np.ndarray], k: int) -> None:
    from kafka import KafkaProducer

    from streamembed.kafka.codec import ARROW_CONTENT_TYPE, CONTENT_TYPE_HEADER, encode_arrow

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_request_size=8 << 20)
    for b, c in enumerate(C):
        s = b * k
        p.send(topic, encode_arrow(_block_table(A[s:s + k], [c], s, k, with_key=False)),
               headers=[(CONTENT_TYPE_HEADER, ARROW_CONTENT_TYPE.encode())])
    p.flush(60)
    p.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="an older checkout to compare with (its streamembed/ on PYTHONPATH)")
    ap.add_argument("--landmarks", type=int, default=500)
    ap.add_argument("--dims", type=int, default=10)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--objects", type=int, default=16384, help="objects for this checkout")
    ap.add_argument("--before-objects", type=int, default=2048, help="objects for the older tree (it is slow)")
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    k = args.k
    m_after = args.objects // k * k
    m_before = args.before_objects // k * k
    D, A, C = _problem(args.landmarks, args.dims, max(m_after, m_before), k)
    trees = [("after", HERE, m_after)] + ([("before", args.before.resolve(), m_before)] if args.before else [])
    broker = None
    if not args.no_kafka:
        from tools.broker import TansuBroker

        broker = TansuBroker().start()
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-blocks-") as tmp:
            base = Path(tmp)
            np.save(base / "D.npy", D)
            for name, tree, m in trees:
                work = base / name
                work.mkdir()
                model = work / "model.npz"
                _cli(tree, ["fit", "--dissimilarities", str(base / "D.npy"), "--n-components", str(args.dims),
                            "-o", str(model)])
                row = {"tree": name, "path": str(tree), "objects": m, "k": k}
                row["files_one_block_per_file"] = run_files(tree, model, work, A[:m], C[:m // k], k, many=False)
                if name == "after":
                    row["files_many_blocks_per_file"] = run_files(tree, model, work, A[:m], C[:m // k], k, many=True)
                if broker is not None:
                    topic = f"blocks-{name}-{time.monotonic_ns()}"
                    broker.create_topic(topic)
                    produce_blocks(broker.bootstrap, topic, A[:m], C[:m // k], k)
                    row["kafka"] = run_kafka(tree, model, work, broker.bootstrap, topic, m)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        if broker is not None:
            broker.stop()
    print(f"\nblock RR end to end, n = {args.landmarks}, d = {args.dims}, blocks of {k} (objects/s, steady state)")
    print(f"{'tree':8} {'objects':>8} {'files, 1 block/file':>20} {'files, blocks/file':>19} {'kafka':>10}")
    for r in rows:
        many = r.get("files_many_blocks_per_file")
        print(f"{r['tree']:8} {r['objects']:8d} {r['files_one_block_per_file']:20,.0f} "
              f"{(f'{many:,.0f}' if many else '-'):>19} {r.get('kafka', float('nan')):10,.0f}")
    if len(rows) == 2:
        a, b = rows
        print(f"after/before: files (1 block/file) {a['files_one_block_per_file'] / b['files_one_block_per_file']:.1f}x"
              + (f", kafka {a['kafka'] / b['kafka']:.1f}x" if "kafka" in a else "")
              + f"; files with many blocks per file vs before's only layout "
                f"{a['files_many_blocks_per_file'] / b['files_one_block_per_file']:.1f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
