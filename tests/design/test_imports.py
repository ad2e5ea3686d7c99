"""Start-up cost by construction: what ``embed`` and ``run`` import before their first row.

A whole ``embed`` process of 300,000 rows spent about half its CPU importing
(docs/throughput.md, "Start-up"): scipy.linalg, scipy.stats, scipy.optimize and
scipy.spatial came with the estimator and the core's eigensolvers, 0.4-0.9
CPU-s that the one-shot path never uses. Each command runs here in a fresh
interpreter on a tiny input, and the modules it loaded are listed at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamembed

TREE = Path(streamembed.__file__).resolve().parents[1]

#: Never needed to embed rows with a fitted model, nor by the directory daemon without metrics (the drift
#: detector's calibration takes its t and χ² quantiles from core.monitor.quantiles:
#: tests/core/monitor/test_quantiles.py).
HEAVY = ("scipy.linalg", "scipy.stats", "scipy.optimize", "scipy.spatial", "scipy.sparse", "scipy.special", "sklearn",
         "kafka", "confluent_kafka", "matplotlib", "dask", "distributed")

#: Runs the CLI in this interpreter and writes the loaded module names to argv[1] at exit.
_PROBE = r"""
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["streamembed", *sys.argv[2:]]
runpy.run_module("streamembed", run_name="__main__")
"""


def _loaded(tmp_path: Path, *args: str, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> set[str]:
    out = tmp_path / "modules.json"
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    full["PYTHONPATH"] = os.pathsep.join([str(TREE), full.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    full.update(env or {})
    r = subprocess.run([sys.executable, "-c", _PROBE, str(out), *args], env=full, cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode in ok, r.stderr[-2000:]
    return set(json.loads(out.read_text()))


def _heavy(modules: set[str], names: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in names))


@pytest.fixture(scope="module")
def model_and_input(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from streamembed import LandmarkMDS

    base = tmp_path_factory.mktemp("imports")
    rng = np.random.default_rng(0)
    L = rng.standard_normal((12, 3))
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1))
    model = base / "model.npz"
    LandmarkMDS(n_components=2).fit(D).save(model)
    X = rng.standard_normal((50, 3))
    A = np.sqrt(((X[:, None] - L[None]) ** 2).sum(-1)).astype(np.float32)
    table = pa.table({"id": [f"o{i}" for i in range(50)],
                      "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A.ravel()), 12)})
    src = base / "in.arrows"
    with pa.OSFile(str(src), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return model, src


def test_import_streamembed_is_light(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "--version", ok=(0, 2))
    assert _heavy(loaded, HEAVY + ("pyarrow", "pandas", "scipy")) == []


def test_help_imports_neither_numpy_nor_pyarrow(tmp_path: Path) -> None:
    """``streamembed --help`` lists the subcommands by their ``HELP`` lines without building their parsers, whose
    option choices and defaults (``core.options``, ``config.schema``) import numpy: 0.38 CPU-s before, where
    ``import numpy, pyarrow.parquet`` alone costs 0.31. ``--version`` reads the installed metadata only then."""
    loaded = _loaded(tmp_path, "--help")
    assert _heavy(loaded, ("numpy", "pyarrow", "scipy", "pandas", "importlib.metadata", "streamembed.config",
                           "streamembed.core.options")) == []
    assert "importlib.metadata" in _loaded(tmp_path, "--version")


def test_embed_imports_no_scipy_solver_nor_transport(tmp_path: Path, model_and_input: tuple[Path, Path]) -> None:
    model, src = model_and_input
    loaded = _loaded(tmp_path, "embed", str(src), "-m", str(model), "-o", str(tmp_path / "out.parquet"),
                     "--progress", "never")
    assert (tmp_path / "out.parquet").exists()
    assert _heavy(loaded, HEAVY + ("scipy", "prometheus_client", "http.server", "pandas")) == []


@pytest.mark.parametrize(("layout", "version"), [("fixed_size_list", "1"), ("fixed_size_binary", "2")])
def test_embed_of_parquet_imports_no_pandas(tmp_path: Path, model_and_input: tuple[Path, Path], layout: str,
                                            version: str) -> None:
    """pyarrow imports pandas (0.25 CPU-s) on its first ``pa.array``, ``pa.scalar`` or ``to_numpy``: none on the
    path from a Parquet file to either output version (docs/throughput.md, "Start-up")."""
    model, src = model_and_input
    table = pa.ipc.open_stream(pa.memory_map(str(src))).read_all()
    if layout == "fixed_size_binary":
        A = np.asarray(table.column("dissimilarities").combine_chunks().flatten())
        fsb = pa.FixedSizeBinaryArray.from_buffers(pa.binary(A.itemsize * 12), table.num_rows,
                                                   [None, pa.py_buffer(A.tobytes())])
        table = table.set_column(1, "dissimilarities", fsb)
    parquet = tmp_path / "in.parquet"
    pq.write_table(table, parquet)
    out = tmp_path / "out.parquet"
    loaded = _loaded(tmp_path, "embed", str(parquet), "-m", str(model), "-o", str(out), "--progress", "never",
                     "--schema-version", version)
    assert pq.read_table(out).num_rows == table.num_rows
    assert _heavy(loaded, ("pandas",)) == []


def test_embed_with_dead_letters_imports_no_pandas(tmp_path: Path, model_and_input: tuple[Path, Path]) -> None:
    """A refused row is a dead letter, written to a file: building its table from Python values with ``pa.array``
    imported pandas at the first one (docs/throughput.md, "Without pandas")."""
    model, src = model_and_input
    table = pa.ipc.open_stream(pa.memory_map(str(src))).read_all()
    A = np.asarray(table.column("dissimilarities").combine_chunks().flatten()).reshape(-1, 12).copy()
    A[3, 0], A[7, 5] = np.nan, -1.0  # two rows refused: not finite, negative
    bad = tmp_path / "bad.arrows"
    with pa.OSFile(str(bad), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table.set_column(1, "dissimilarities", pa.FixedSizeListArray.from_arrays(
            pa.array(A.ravel()), 12)))
    out, dead = tmp_path / "out.parquet", tmp_path / "dead"
    loaded = _loaded(tmp_path, "embed", str(bad), "-m", str(model), "-o", str(out), "--progress", "never",
                     "--dead-letter", str(dead), ok=(0, 1))
    assert pq.read_table(out).num_rows == table.num_rows - 2
    assert sum(pq.read_table(f).num_rows for f in dead.rglob("*.parquet")) == 2
    assert _heavy(loaded, ("pandas",)) == []


def _directory_daemon(tmp_path: Path, model_and_input: tuple[Path, Path], **settings: str) -> dict[str, str]:
    """The environment of a batch-mode daemon on a directory holding the input (linked in), metrics off unless
    ``settings`` say otherwise (``METRICS__ENABLED="true"``: keys after ``STREAMEMBED_``)."""
    model, src = model_and_input
    (tmp_path / "in").mkdir()
    os.link(src, tmp_path / "in" / "in.arrows")
    env = {"STREAMEMBED_MODEL__PATH": str(model), "STREAMEMBED_SOURCE__KIND": "directory",
           "STREAMEMBED_DIRECTORY__PATH": str(tmp_path / "in"), "STREAMEMBED_OUTPUT__ROOT": str(tmp_path / "out"),
           "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0", "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true",
           "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_LOGGING__LEVEL": "WARNING"}
    return env | {f"STREAMEMBED_{k}": v for k, v in settings.items()}


def test_directory_daemon_imports_no_scipy_solver_nor_kafka(tmp_path: Path, model_and_input: tuple[Path, Path]) -> None:
    loaded = _loaded(tmp_path, "run", env=_directory_daemon(tmp_path, model_and_input))
    assert list((tmp_path / "out").rglob("*.parquet")), "the daemon wrote no output"
    assert _heavy(loaded, HEAVY + ("pandas",)) == []
    # nothing of streamembed's Kafka layer either: the source kinds' builders are imported when chosen
    # (config/sources.py), the Kafka clients only when the run uses Kafka (daemon/assembly.py)
    assert _heavy(loaded, ("streamembed.kafka",)) == []
    # metrics off: nothing is served, so neither the Prometheus client (with its http.server and exposition code,
    # 0.025-0.1 CPU-s of the start-up) nor the ops server and its map page are imported (ops/no_metrics.py)
    assert _heavy(loaded, ("prometheus_client", "http.server", "streamembed.ops.endpoints", "streamembed.ops.server",
                           "streamembed.ops.metrics", "streamembed.ops.map_view", "streamembed.ops.map_page")) == []


def test_directory_daemon_with_metrics_loads_the_ops_server(tmp_path: Path,
                                                            model_and_input: tuple[Path, Path]) -> None:
    """The other side of the lazy imports: with metrics on, the ops server, the metrics and the map are there."""
    env = _directory_daemon(tmp_path, model_and_input, METRICS__ENABLED="true", METRICS__PORT="0",
                            METRICS__PORT_FILE=str(tmp_path / "port"))
    loaded = _loaded(tmp_path, "run", env=env)
    assert int((tmp_path / "port").read_text()) > 0
    assert {"prometheus_client", "streamembed.ops.endpoints", "streamembed.ops.metrics",
            "streamembed.ops.map_view"} <= loaded


#: The Kafka daemon's data path in this interpreter, against in-memory fakes of kafka-python's consumer and
#: producer (a real broker adds nothing to what is imported): Arrow input messages (rows whose event time is the
#: message's, rows with their own, a landmark-version header, a block, a row refused by decoding, an unreadable
#: message) and a JSON one through the codec, the source, the loop and both topic sinks, to Arrow and JSON output
#: messages and dead letters. (A JSON message with a row the Arrow JSON reader refuses still imports pandas: the
#: row-by-row fallback of stream/readers/jsonl.py builds its table with ``pa.Table.from_pylist``.)
_KAFKA_PROBE = r"""
import json, sys
from collections import namedtuple
import numpy as np
import pyarrow as pa
from kafka import TopicPartition
from streamembed.config.schema import RunConfig
from streamembed.kafka.producer import ReliableProducer
from streamembed.kafka.codec import arrow_message, json_message
from streamembed.kafka.sink import KafkaDeadLetterSink, KafkaOutputSink
from streamembed.kafka.source import KafkaSource
from streamembed.model_io import load_model
from streamembed.stream.arrow_build import numeric, strings, timestamps
from streamembed.stream.checkpoint import Checkpointer
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.loop import EmbeddingLoop, RollPolicy
from streamembed.stream.records import TIMESTAMP_TYPE
from streamembed.stream.sinks import FanoutSink

model = load_model(sys.argv[1])
n = model.n_landmarks
Record = namedtuple("Record", "topic partition offset key value headers timestamp timestamp_type")

def table(prefix, m, *, event_time=False, cross=False, width=n):
    A = np.random.default_rng(m).random((m, width)) * 3 + 1
    cols = {"id": strings([f"{prefix}{i}" for i in range(m)]),
            "dissimilarities": pa.FixedSizeListArray.from_arrays(numeric(A.ravel()), width)}
    if event_time:  # the second row has none: it takes the message's
        valid = pa.py_buffer(np.packbits(np.arange(m) != 1, bitorder="little"))
        us = pa.py_buffer(np.full(m, 1_600_000_000_000_000, np.int64))
        cols["event_time"] = pa.Array.from_buffers(TIMESTAMP_TYPE, m, [valid, us])
    if cross:
        C = np.abs(np.subtract.outer(np.arange(m), np.arange(m))).astype(float)
        cols["cross"] = pa.FixedSizeListArray.from_arrays(numeric(C.ravel()), m)
    return pa.table(cols)

messages = [arrow_message(table("a", 5)), arrow_message(table("b", 4, event_time=True)),
            arrow_message(table("c", 3), landmark_version=model.version), arrow_message(table("k", 3, cross=True)),
            arrow_message(table("w", 2, width=n + 1)),
            (b"garbage", [("content-type", b"application/vnd.apache.arrow.stream")]),
            json_message([{"id": f"j{i}", "dissimilarities": (np.arange(n) + i + 1.0).tolist()} for i in range(3)])]
n_rows = 5 + 4 + 3 + 3 + 2 + 3
log = [Record("in", 0, i, None, v, h, 1_700_000_000_000 + i, 0) for i, (v, h) in enumerate(messages)]

class Consumer:
    def __init__(self, **settings):
        self.pos, self.commits = 0, []
    def subscribe(self, topics, listener):
        self.listener = listener
    def poll(self, timeout_ms=0, max_records=500):
        if self.listener is not None:
            self.listener.on_partitions_assigned({TopicPartition("in", 0)})
            self.listener = None
        recs, self.pos = log[self.pos:], len(log)
        return {TopicPartition("in", 0): recs} if recs else {}
    def commit(self, offsets, timeout_ms=None):
        self.commits.append({tp.partition: om.offset for tp, om in offsets.items()})
    def highwater(self, tp):
        return len(log)
    def position(self, tp, timeout_ms=None):
        return self.pos
    def close(self, autocommit=False):
        pass

class Future:
    is_done = True
    exception = None
    def succeeded(self):
        return True

class Producer:
    def __init__(self, **settings):
        self.sent = []
    def send(self, topic, value=None, key=None, headers=None):
        self.sent.append((topic, key, value, headers))
        return Future()
    def flush(self, timeout=None):
        pass
    def close(self, timeout=None):
        pass

consumer = Consumer()
source = KafkaSource({}, "in", consumer_factory=lambda **s: consumer)
producer = ReliableProducer({}, factory=Producer)
output = FanoutSink([KafkaOutputSink(producer, "out-arrow", fmt="arrow"),
                     KafkaOutputSink(producer, "out-json", fmt="json")])
dead = KafkaDeadLetterSink(producer, "in.dlq", locate=source.locate)
loop = EmbeddingLoop(BatchEmbedder(model), source, output, dead, Checkpointer([output, dead], source, None),
                     run=RunConfig(max_records=n_rows), roll=RollPolicy(10_000, 3600))
loop.run()
sent = producer._producer.sent
arrow_rows = sum(pa.ipc.open_stream(v).read_all().num_rows for t, _, v, _ in sent if t == "out-arrow")
json_docs = [json.loads(v) for t, _, v, _ in sent if t == "out-json"]
print(json.dumps({"pandas": "pandas" in sys.modules, "arrow_rows": arrow_rows, "json_rows": len(json_docs),
                  "event_times": sorted({d["event_time"] for d in json_docs}),
                  "dead": sorted(dict(h)["streamembed-error-reason"].decode() for t, _, _, h in sent if t == "in.dlq"),
                  "commits": consumer.commits}))
"""


def test_kafka_daemon_path_imports_no_pandas(tmp_path: Path, model_and_input: tuple[Path, Path]) -> None:
    """pyarrow imports pandas (0.25 CPU-s) on its first ``pa.array``/``pa.scalar`` of Python values and on every
    time-zone-aware timestamp turned into Python (``to_pylist``, ``as_py``): none of them on the Kafka daemon's path
    from Arrow and JSON messages to Arrow and JSON output messages and dead letters."""
    model, _ = model_and_input
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    full["PYTHONPATH"] = os.pathsep.join([str(TREE), full.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    r = subprocess.run([sys.executable, "-c", _KAFKA_PROBE, str(model)], env=full, cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    embedded = 5 + 4 + 3 + 3 + 3  # the 2 rows of the wrong width and the garbage message are dead letters
    assert (got["arrow_rows"], got["json_rows"]) == (embedded, embedded)
    assert sorted(got["dead"]) == ["undecodable", "wrong_length", "wrong_length"]
    assert "2020-09-13T12:26:40+00:00" in got["event_times"]  # a record's own event time, as datetime.isoformat
    assert got["commits"] and got["commits"][-1] == {"0": 7}
    assert not got["pandas"], "the Kafka daemon's path imported pandas"
