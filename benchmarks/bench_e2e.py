"""End-to-end rows of ``python -m benchmarks bench``: files, the directory daemon, Kafka and a Dask backfill.

Each row is measured against the core in the same process: the in-memory
``est.embed`` (projection) of the same objects is timed just before the
end-to-end run, and the row reports both rates and their ratio
(``over_in_memory``); the Kafka row reports the daemon over raw kafka-python
consumption of the same messages instead, and a peer (a plain consumer with
scikit-learn's ``KernelPCA(kernel="precomputed").transform``, the program a
user would write). Timings are the best of a few runs; the machine is shared,
so only ratios taken in one run mean anything.

* ``embed arrow-ipc`` / ``embed parquet (list)`` / ``embed parquet
  (fixed_size_binary)``: ``streamembed embed IN -o OUT`` in process (the CLI's
  own entry point, imports warmed up), from an Arrow IPC stream, a Parquet
  file with a ``fixed_size_list<float32>`` column, and the fast Parquet
  layout (``stream.packed.packed_column``). Input in the page cache.
* ``daemon directory (batch)``: the daemon as ``streamembed run`` assembles it
  (``daemon.app``), source.kind = directory with ``exit_when_idle``, on the
  same Arrow file; timed from the loop's start to its final commit (start-up -
  model load, assembly - excluded).
* ``daemon kafka``: 1,000-object Arrow messages on the test broker (Tansu,
  started here): raw consume vs the daemon's KafkaSource -> loop -> output
  topic (acks=all) -> offset commits; the peer consumes the same messages and
  embeds them with KernelPCA (it produces nothing, which favours it).
* ``dask backfill``: ``streamembed.jobs.backfill`` on a LocalCluster of 2 workers
  over the same objects in 8 files, vs ``streamembed embed`` of those files
  (one process) in the same run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["ROWS", "EndToEndUnavailable", "file_rows", "make_messages", "produce", "raw_consume", "daemon_consume",
           "kpca_consume"]


class EndToEndUnavailable(RuntimeError):
    """Raised by an end-to-end row that cannot run here (no broker, missing extra, ...): the row is skipped."""

N, D, P = 500, 10, 20
FULL_OBJECTS, QUICK_OBJECTS = 300_000, 100_000


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _problem(m: int, seed: int = 0) -> tuple[Any, np.ndarray, np.ndarray]:
    """(fitted estimator, landmarks (N, P), A (m, N) float32 dissimilarities)."""
    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS

    rng = np.random.default_rng(seed)
    L = rng.standard_normal((N, P)) * 3.0
    est = LandmarkMDS(n_components=D).fit(cdist(L, L))
    A = np.empty((m, N), dtype=np.float32)
    for s in range(0, m, 65536):
        e = min(m, s + 65536)
        A[s:e] = cdist(rng.standard_normal((e - s, P)) * 3.0, L)
    return est, L, A


def _table(A: np.ndarray, start: int = 0, packed: bool = False) -> pa.Table:
    from streamembed.stream.packed import packed_column

    ids = pa.array([f"o{i}" for i in range(start, start + len(A))], pa.string())
    if packed:
        col, field = packed_column(A)
        return pa.Table.from_arrays([ids, col], schema=pa.schema([pa.field("id", pa.string()), field]))
    return pa.table({"id": ids, "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A.reshape(-1)), N)})


def _write_arrow(path: Path, table: pa.Table) -> Path:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=8192):
            w.write_batch(b)
    return path


def _write_parquet(path: Path, table: pa.Table) -> Path:
    import pyarrow.parquet as pq

    pq.write_table(table, path, compression="none", row_group_size=65536, use_dictionary=["id"])
    return path


class _Files:
    """The shared input of the file rows (made once per bench run)."""

    def __init__(self, quick: bool) -> None:
        self.m = QUICK_OBJECTS if quick else FULL_OBJECTS
        self.tmp = tempfile.TemporaryDirectory(prefix="streamembed-bench-")
        self.dir = Path(self.tmp.name)
        self.est, self.L, self.A = _problem(self.m)
        self.est.save(self.dir / "model.npz")
        self.arrow = _write_arrow(self.dir / "in.arrows", _table(self.A))
        self._parquet: dict[bool, Path] = {}

    def parquet(self, packed: bool) -> Path:
        if packed not in self._parquet:
            self._parquet[packed] = _write_parquet(self.dir / ("in-fsb.parquet" if packed else "in-list.parquet"),
                                                   _table(self.A, packed=packed))
        return self._parquet[packed]

    def in_memory(self, repeat: int = 3) -> float:
        """Objects/s of the core on the same objects (``est.embed``, projection), now."""
        self.est.embed(self.A[:4096])
        return self.m / _best(lambda: self.est.embed(self.A), repeat)


_FILES: dict[bool, _Files] = {}


def file_rows(quick: bool) -> _Files:
    if quick not in _FILES:
        _FILES.clear()
        _FILES[quick] = _Files(quick)
    return _FILES[quick]


def _embed_cli(files: _Files, src: Path, repeat: int, extra: tuple[str, ...] = ()) -> float:
    from streamembed.cli import main as cli

    out = files.dir / "out.parquet"
    argv = ["embed", str(src), "-m", str(files.dir / "model.npz"), "-o", str(out), "--progress", "never", *extra]
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        t = _best(lambda: _check(cli(argv)), repeat)
    return files.m / t


def _check(rc: int) -> None:
    if rc != 0:
        raise RuntimeError(f"streamembed embed exited {rc}")


def _file_row(quick: bool, which: str) -> dict:
    files = file_rows(quick)
    src = {"arrow": files.arrow, "list": None, "fsb": None}[which] or files.parquet(which == "fsb")
    _embed_cli(files, src, 1)  # warm-up: imports, the page cache, the slab pool
    mem = files.in_memory()
    rate = _embed_cli(files, src, 2 if quick else 3)
    return {"objects_per_s": rate, "in_memory_objects_per_s": mem, "over_in_memory": rate / mem, "n": N,
            "dtype": "float32", "objects": files.m, "note": f"{files.m:,} x {N} float32, projection, d={D}"}


def io_ceiling(src: Path, out: Path, schema: pa.Schema, batch_rows: int = 65536) -> None:
    """The I/O-only ceiling of ``embed``: read the Arrow IPC stream ``src`` (memory-mapped) and write ``out``, a
    zstd Parquet file of the same rows in ``schema`` (``embed``'s output schema), with no computation.

    Float columns are copies of input columns (they compress like real values; zeros would compress to
    nothing), strings the ids, dictionaries and the rest constants; row groups and dictionary choices as
    ``stream.sinks.ParquetSink`` makes them.
    """
    import pyarrow.ipc as ipc

    from streamembed.stream.sinks.parquet import _dictionary_columns

    reader = ipc.open_stream(pa.memory_map(str(src)))
    writer = pq.ParquetWriter(out, schema, compression="zstd", use_dictionary=_dictionary_columns(schema))
    pending: list[pa.RecordBatch] = []
    for b in reader:
        m = b.num_rows
        A = b.column(1).flatten().to_numpy().reshape(m, -1)
        cols, k = [], 0
        for f in schema:
            t = f.type
            if pa.types.is_string(t):
                cols.append(b.column(0))
            elif pa.types.is_fixed_size_list(t):
                cols.append(pa.FixedSizeListArray.from_arrays(
                    pa.array(A[:, :t.list_size].astype(t.value_type.to_pandas_dtype()).ravel()), t.list_size))
            elif pa.types.is_floating(t):
                cols.append(pa.array(A[:, k % A.shape[1]].astype(t.to_pandas_dtype())))
                k += 1
            elif pa.types.is_dictionary(t):
                cols.append(pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, t.index_type.to_pandas_dtype())),
                                                           pa.array(["projection"])).cast(t))
            elif pa.types.is_list(t):
                cols.append(pa.array([[]] * m, t))
            else:
                cols.append(pa.array(np.zeros(m, np.int64)).cast(t))
        pending.append(pa.RecordBatch.from_arrays(cols, schema=schema))
        if sum(p.num_rows for p in pending) >= batch_rows:
            writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=batch_rows)
            pending = []
    if pending:
        writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=batch_rows)
    writer.close()


def _ceiling_row(quick: bool) -> dict:
    """``embed`` (output version 2, memory-mapped Arrow IPC) over the I/O-only ceiling, in this process."""
    files = file_rows(quick)
    extra = ("--schema-version", "2", "--mmap", "always")
    _embed_cli(files, files.arrow, 1, extra)  # warm-up, and the output whose schema the ceiling writes
    schema = pq.read_schema(files.dir / "out.parquet")
    ceiling_out = files.dir / "ceiling.parquet"
    io_ceiling(files.arrow, ceiling_out, schema)
    ceiling = files.m / _best(lambda: io_ceiling(files.arrow, ceiling_out, schema), 2 if quick else 3)
    rate = _embed_cli(files, files.arrow, 2 if quick else 3, extra)
    return {"objects_per_s": rate, "peer_objects_per_s": ceiling, "over_peer": rate / ceiling, "n": N,
            "dtype": "float32", "objects": files.m,
            "note": "peer: the I/O-only ceiling (read the same file, write the same rows and schema, no computation; "
                    "target ours/peer >= 0.8); whole processes: benchmarks/bench_file_ceiling.py"}


# ----------------------------------------------------------------------------- the directory daemon


def _daemon_directory(quick: bool) -> dict:
    from streamembed.daemon import app
    from streamembed.daemon.signals import DaemonSignals
    from streamembed.config import load_config
    from streamembed.ops.health import HealthState
    from streamembed.ops.metrics import Metrics

    files = file_rows(quick)
    rates = []
    mem = files.in_memory()
    for k in range(2 if quick else 3):
        root = files.dir / f"daemon-{k}"
        indir = root / "input"
        indir.mkdir(parents=True)
        os.link(files.arrow, indir / "in.arrows")
        cfg = load_config(overrides={
            "model.path": str(files.dir / "model.npz"), "source.kind": "directory", "directory.path": str(indir),
            "directory.exit_when_idle": True, "directory.settle_seconds": 0, "output.root": str(root),
            "metrics.enabled": False, "logging.level": "WARNING"})
        stop = threading.Event()
        closers: list[Any] = []
        with DaemonSignals(stop) as signals:
            loop, _, _ = app._assemble(cfg, Metrics(), HealthState(60.0), stop, signals, closers)
            t0 = time.perf_counter()
            stats = loop.run()
            seconds = time.perf_counter() - t0
        app._close(closers, None, 0)
        if stats.embedded != files.m:
            raise RuntimeError(f"the daemon embedded {stats.embedded} of {files.m}")
        rates.append(files.m / seconds)
    rate = max(rates)
    return {"objects_per_s": rate, "in_memory_objects_per_s": mem, "over_in_memory": rate / mem, "n": N,
            "dtype": "float32", "note": "same Arrow file, batch mode, drift monitor on, start-up excluded"}


# ----------------------------------------------------------------------------- Kafka


def make_messages(n_msgs: int, m: int, landmarks: np.ndarray, rng: np.random.Generator) -> list[bytes]:
    """Arrow IPC input messages of m float32 rows each (ids ``m<k>-<i>``)."""
    from scipy.spatial.distance import cdist

    from streamembed.kafka.codec import encode_arrow

    n = landmarks.shape[0]
    out = []
    for k in range(n_msgs):
        A = cdist(rng.standard_normal((m, landmarks.shape[1])) * 3.0, landmarks).astype(np.float32)
        ids = pa.array([f"m{k}-{i}" for i in range(m)], pa.string())
        out.append(encode_arrow(pa.table({"id": ids, "dissimilarities": pa.FixedSizeListArray.from_arrays(
            pa.array(A.reshape(-1)), n)})))
    return out


def produce(bootstrap: str, topic: str, messages: list[bytes], partitions: int = 1) -> float:
    """Seconds to produce ``messages`` with kafka-python."""
    from kafka import KafkaProducer

    from streamembed.kafka.codec import ARROW_CONTENT_TYPE, CONTENT_TYPE_HEADER

    prod = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 << 20, batch_size=1 << 20, linger_ms=5)
    headers = [(CONTENT_TYPE_HEADER, ARROW_CONTENT_TYPE.encode())]
    t0 = time.perf_counter()
    for i, v in enumerate(messages):
        prod.send(topic, value=v, headers=headers, partition=i % partitions)
    prod.flush()
    dt = time.perf_counter() - t0
    prod.close()
    return dt


def _timed_consume(bootstrap: str, topic: str, partitions: int, n_msgs: int, settings: dict,
                   each: Any = None) -> tuple[float, int, int]:
    """(seconds, messages, bytes) from the first poll with records (not counted) to the last message."""
    from kafka import KafkaConsumer, TopicPartition

    s = {k: v for k, v in settings.items() if k not in ("group_id", "bootstrap_servers")}
    c = KafkaConsumer(bootstrap_servers=bootstrap, **s)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = nbytes = first = 0
    t0 = None
    deadline = time.monotonic() + 300
    while got < n_msgs and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=500).values():
            if t0 is None:
                t0, first = time.perf_counter(), len(recs)
            elif each is not None:
                for r in recs:
                    each(r)
            got += len(recs)
            nbytes += sum(len(r.value) for r in recs)
    dt = time.perf_counter() - (t0 or time.perf_counter())
    c.close()
    if got < n_msgs:
        raise RuntimeError(f"the consumer got {got} of {n_msgs} messages")
    return dt, got - first, nbytes * (got - first) // max(got, 1)


def raw_consume(bootstrap: str, topic: str, partitions: int, n_msgs: int, settings: dict) -> tuple[float, int, int]:
    """Raw kafka-python consumption with the daemon's fetch settings (values not even looked at)."""
    return _timed_consume(bootstrap, topic, partitions, n_msgs, settings)


def kpca_consume(bootstrap: str, topic: str, partitions: int, n_msgs: int, settings: dict, D_landmarks: np.ndarray,
                 d: int) -> tuple[float, int]:
    """(seconds, objects): the program a user would write: consume, decode, ``KernelPCA.transform`` each message."""
    from sklearn.decomposition import KernelPCA

    kpca = KernelPCA(n_components=d, kernel="precomputed", eigen_solver="dense")
    kpca.fit(-0.5 * np.square(D_landmarks))
    count = [0]

    def each(rec: Any) -> None:
        t = pa.ipc.open_stream(pa.py_buffer(rec.value)).read_all()
        col = t.column("dissimilarities").combine_chunks()
        A = col.flatten().to_numpy().reshape(len(col), -1).astype(np.float64)
        kpca.transform(-0.5 * np.square(A))
        count[0] += len(col)

    dt, _, _ = _timed_consume(bootstrap, topic, partitions, n_msgs, settings, each)
    return dt, count[0]


def daemon_consume(bootstrap: str, topic: str, out_topic: str, group: str, est: Any, n_objects: int, m: int,
                   workdir: Path, overrides: dict | None = None) -> tuple[float, int, dict]:
    """(seconds, objects, stats) of the daemon's Kafka loop from its first batch to its final commit.

    The daemon's own pieces in process: KafkaSource (a consumer group, manual
    commits) behind the read-ahead, the loop with the default drift monitor,
    KafkaOutputSink (Arrow messages, acks=all), offsets committed after the
    outputs are acknowledged. The clock starts when the consumer's first poll
    returns records (those are not counted), as for raw consumption.
    """
    from streamembed.daemon.model_setup import build_drift
    from streamembed.config import load_config
    from streamembed.ops.metrics import Metrics
    from streamembed.kafka.libraries import clients_for
    from streamembed.kafka.producer import ReliableProducer
    from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
    from streamembed.kafka.source import KafkaSource
    from streamembed.config.schema import RunConfig
    from streamembed.stream.checkpoint import Checkpointer
    from streamembed.stream.embedder import BatchEmbedder
    from streamembed.stream.loop import EmbeddingLoop, RollPolicy
    from streamembed.stream.registry import ModelRegistry
    from streamembed.stream.read_ahead import ReadAhead

    cfg = load_config(overrides={"kafka.bootstrap_servers": bootstrap, "kafka.group_id": group,
                                 "kafka.session_timeout_ms": 10000, "kafka.input_topic": topic, **(overrides or {})})
    k = cfg.kafka
    clients = clients_for(k)  # kafka.client_library (an override)
    metrics = Metrics()
    stop = threading.Event()
    producer = ReliableProducer(clients.producer_settings(k), metrics=metrics, stop=stop, factory=clients.producer)
    source = KafkaSource(clients.consumer_settings(k), topic, batch_rows=cfg.source.batch_rows, metrics=metrics,
                         stop=stop, backpressure=lambda: producer.unacked_bytes > k.max_unacked_bytes,
                         clients=clients)
    first: dict[str, float] = {}
    consumer_poll = source._consumer.poll

    def timed_poll(*a: Any, **kw: Any) -> Any:
        recs = consumer_poll(*a, **kw)
        if recs and "t" not in first:
            first["t"], first["rows"] = time.perf_counter(), m * sum(len(v) for v in recs.values())
        return recs

    source._consumer.poll = timed_poll
    output = KafkaOutputSink(producer, out_topic, fmt="arrow", max_message_bytes=k.max_request_size)
    dead = KafkaDeadLetterSink(producer, f"{topic}.dlq", locate=source.locate)
    registry = ModelRegistry(est.model_, retain=cfg.refit.retain_versions)
    cfg.refit.model_dir = str(workdir / "models")
    monitor, _ = build_drift(cfg, registry, metrics)
    embedder = BatchEmbedder(est.model_, method=cfg.model.method, k0_rows=cfg.model.k0_rows, registry=registry,
                             monitor=monitor)
    ahead = ReadAhead(source)
    loop = EmbeddingLoop(embedder, ahead, output, dead, Checkpointer([output, dead], ahead, None),
                         run=RunConfig(max_records=n_objects), roll=RollPolicy(100_000, 5.0),
                         metrics=metrics, stop=stop)
    stats = loop.run()
    t1 = time.perf_counter()
    ahead.close()
    producer.close()
    info = {"batches": stats.batches, "embedded": stats.embedded, "dead": stats.dead, "commits": source.commits,
            "out_messages": producer.delivered}
    return t1 - first["t"], stats.embedded - int(first["rows"]), info


@contextlib.contextmanager
def _broker() -> Iterator[Any]:
    from tools.broker import TansuBroker, TansuNotFoundError, find_tansu

    try:
        find_tansu()
    except TansuNotFoundError as exc:
        raise EndToEndUnavailable(f"no test broker: {exc}") from None
    with TansuBroker() as broker:
        yield broker


def _daemon_kafka(quick: bool) -> dict:
    from scipy.spatial.distance import cdist

    from streamembed import LandmarkMDS
    from streamembed.config import load_config
    from streamembed.kafka.client import consumer_settings

    n, m = 256, 1000
    n_msgs = 60 if quick else 200
    rng = np.random.default_rng(0)
    L = rng.standard_normal((n, 10)) * 3.0
    DL = cdist(L, L)
    est = LandmarkMDS(n_components=2).fit(DL)
    messages = make_messages(n_msgs, m, L, rng)
    mb = sum(map(len, messages)) / 1e6
    with _broker() as broker, tempfile.TemporaryDirectory() as tmp:
        broker.create_topic("bench-in", partitions=1)
        broker.create_topic("bench-out", partitions=1)
        produce(broker.bootstrap, "bench-in", messages)
        del messages
        settings = consumer_settings(load_config().kafka)
        raw, ours, ratios = [], [], []
        for r in range(2 if quick else 3):
            dt, k, _ = raw_consume(broker.bootstrap, "bench-in", 1, n_msgs, settings)
            raw.append(k * m / dt)
            dt, objs, _ = daemon_consume(broker.bootstrap, "bench-in", "bench-out", f"bench-{r}-{os.getpid()}", est,
                                         n_msgs * m, m, Path(tmp))
            ours.append(objs / dt)
            ratios.append(ours[-1] / raw[-1])
        dt, objs = kpca_consume(broker.bootstrap, "bench-in", 1, n_msgs, settings, DL, 2)
        peer = objs / dt
    rate = max(ours)
    return {"objects_per_s": rate, "in_memory_objects_per_s": max(raw), "over_in_memory": float(np.median(ratios)),
            "peer_objects_per_s": peer, "over_peer": rate / peer, "n": n, "dtype": "float32",
            "raw_consume_objects_per_s": raw, "daemon_objects_per_s": ours, "ratios": ratios,
            "note": f"{n_msgs} x {mb / n_msgs:.2f} MB Arrow messages, n={n}, d=2; share = daemon / raw kafka-python "
                    f"consume (median of {len(ratios)} runs; raw best {max(raw):,.0f} obj/s); peer = consumer + "
                    f"KernelPCA.transform"}


# ----------------------------------------------------------------------------- Dask


def _dask_backfill(quick: bool) -> dict:
    try:
        import distributed
    except ImportError:
        raise EndToEndUnavailable("the dask extra is not installed (pip install 'streamembed[dask]')") from None
    from streamembed.jobs.backfill import backfill
    from streamembed.cli import main as cli

    files = file_rows(quick)
    parts = files.dir / "parts"
    if not parts.exists():
        parts.mkdir()
        step = -(-files.m // 8)
        for k in range(8):
            _write_arrow(parts / f"in{k}.arrows", _table(files.A[k * step:(k + 1) * step], start=k * step))
    root = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, old]))
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                                      host="127.0.0.1") as cluster, distributed.Client(cluster) as client:
            backfill([parts], files.dir / "model.npz", files.dir / "dask-warm", client)  # workers warm up
            best = float("inf")
            for k in range(2):
                report = backfill([parts], files.dir / "model.npz", files.dir / f"dask-{k}", client)
                if report.embedded != files.m:
                    raise RuntimeError(f"the backfill embedded {report.embedded} of {files.m}")
                best = min(best, report.seconds)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    argv = ["embed", str(parts), "-m", str(files.dir / "model.npz"), "-o", str(files.dir / "one.parquet"),
            "--progress", "never"]
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        one = files.m / _best(lambda: _check(cli(argv)), 2)
    rate = files.m / best
    return {"objects_per_s": rate, "in_memory_objects_per_s": one, "over_in_memory": rate / one, "n": N,
            "dtype": "float32", "note": "2 local workers, 8 files; share = over one-shot `embed` of the same files "
                                        "in one process (same 2 cores: Dask adds machines, not speed, here)"}


#: The end-to-end rows of ``python -m benchmarks bench``, in order: name -> fn(quick) -> measurements.
ROWS: dict[str, Callable[[bool], dict]] = {
    "embed arrow-ipc": lambda q: _file_row(q, "arrow"),
    "embed parquet (list)": lambda q: _file_row(q, "list"),
    "embed parquet (fixed_size_binary)": lambda q: _file_row(q, "fsb"),
    "embed arrow-ipc (output v2, mmap) vs I/O ceiling": _ceiling_row,
    "daemon directory (batch)": _daemon_directory,
    "daemon kafka vs raw consume": _daemon_kafka,
    "dask backfill (2 local workers)": _dask_backfill,
}
