"""The configuration schema: every setting, its default, its allowed values and what it means — stated once.

Each section is a dataclass (the monitoring sections [drift], [consistency],
[refit] and [trust] in ``config.monitoring``, re-exported here); each field's metadata carries its documentation,
choices and range. The model and stream-sizing options (``[model]``'s choices
and defaults, ``source.batch_rows``, ``source.max_block_rows``) come from the
option table ``streamembed.core.options``, the drift statistics and the
detectors' defaults from ``core.monitor``, ``drift.detector``'s kinds from the
trigger registry ``core.monitor.triggers``, ``source.kind``'s from the source
registry ``config.sources``. Everything else is derived from here: the embedded default
(``Config()``), ``config/default.toml`` and ``streamembed config`` (rendered by
``config.render``), docs/configuration.md's reference (``streamembed config
--reference``), validation of files, environment variables and ``--set``
flags (``config.load``, by each field's type and metadata: no key is
special-cased by name). Components take their own section
(``DriftMonitor(DriftConfig)``, ``GaussianMixtureStream(GeneratorConfig)``,
``RefitManager(RefitConfig)``), never a copy of its fields.

This module is pure data: no I/O, importable from every layer.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamembed.config.fields import MAX_BYTES, MAX_DURATION_SECONDS, MAX_INT32, MAX_ROWS
from streamembed.core.refit.selections import LANDMARK_SELECTIONS
from streamembed.config.fields import milliseconds as _ms
from streamembed.config.fields import option as _option
from streamembed.config.fields import seconds as _s
from streamembed.config.fields import setting as _f
from streamembed.config.monitoring import (DRIFT_STATISTICS, ConsistencyConfig, DriftConfig, RefitConfig,
                                           TrustConfig)
from streamembed.config.metric import MetricConfig
from streamembed.config.kafka_clients import CLIENT_LIBRARIES
from streamembed.config.sources import SOURCES
from streamembed.core.inputs.metrics import DEFAULT_METRIC

__all__ = ["Config", "ModelConfig", "SourceConfig", "DirectoryConfig", "GeneratorConfig", "OutputConfig",
           "RunConfig", "DriftConfig", "ConsistencyConfig", "RefitConfig", "KafkaConfig", "MetricsConfig",
           "TrustConfig", "MetricConfig", "LoggingConfig", "DRIFT_STATISTICS", "K0_STATISTICS", "EVENT_TIME_MODES",
           "MAX_DURATION_SECONDS", "sections", "section_keys", "default", "choices"]

#: Where a Kafka row's event time comes from (``kafka.event_time``; streamembed.kafka.event_time).
EVENT_TIME_MODES = ("auto", "record", "create_time", "log_append_time", "none")
#: Those that need exact k0 rows (model.k0_rows not "none").
K0_STATISTICS = ("relative_k0_mean", "kernel_distance_bound", "gap_ratio")
@dataclass
class ModelConfig:
    """[model]: the landmark map and how objects are placed on it."""

    path: str = _f("", "Landmark model (.npz written by `streamembed fit` or LandmarkMDS.save). Empty: fit a model "
                   "at startup from objects of the built-in generator.")
    method: str = _option("method", "Method for single objects: projection (fast, linear), restricted (restricted "
                          "reconstruction: also matches the object's norm), stress (raw stress to the landmarks), "
                          "l1 (absolute error in squared distances; snaps objects onto vertices), docs/math.md §3, or "
                          "kernel (the Nadaraya-Watson average of the landmarks' coordinates, a convex combination, "
                          "on any map; docs/math.md §8.6). A block (rows carrying `cross`) is placed by block "
                          "restricted reconstruction, except under kernel, which dead-letters it as bad_block.")
    kernel_bandwidth: float = _f(0.0, "Bandwidth sigma of method = kernel, in the units of the dissimilarities; it "
                                 "replaces the model's own (0: the model's, Roy's rule from its landmarks at fit, "
                                 "docs/math.md §8.6).", min=0.0, max=1e300, off=0.0)
    k0_rows: str | int = _f(32, "Rows per batch with the exact out-of-span residual k0 (docs/math.md §4): none, all, "
                            "or a count (a deterministic, evenly spaced sample). They are written to the output's k0 "
                            "column and are what drift monitoring sees; each costs O(n·r).", min=1, max=10_000_000,
                            words=("none", "all"), off="none")
    max_batch_seconds: float = _s(60.0, "Wall time the iterative methods (stress, l1, block restricted "
                                  "reconstruction) may spend on one batch; rows still iterating then keep their best "
                                  "placement so far, flagged not_converged (0: no limit).", min=0.0)
    n_landmarks: int = _f(100, "Number of landmarks n of a generator-fitted model (this and the keys below apply "
                          "only when model.path is empty).", min=2, max=100_000)
    n_components: int = _option("n_components", "Map dimensions d of a generator-fitted model.", min=1, max=1000)
    landmark_selection: str = _option("landmark_selection", "Landmark choice among the generator sample "
                                      "(docs/landmarks.md): max-variance (the best of 8 random sets by the population "
                                      "variance their map captures), random, rpcholesky, kmeans++, kmedoids or maxmin "
                                      "(LSDR's skeleton is for `streamembed fit --selection skeleton`).",
                                      choices=LANDMARK_SELECTIONS)
    fit_sample: int = _f(2000, "Generator objects drawn to choose the landmarks from.", min=2, max=10_000_000)
    metric: str = _f(DEFAULT_METRIC, "Metric between generator feature vectors: any scipy.spatial.distance.cdist "
                     "name (the metrics of docs/extending.md), or package.module:function.")
    save_path: str = _f("", "Save the generator-fitted model here (.npz); empty: <root>/model.npz (where `streamembed "
                        "model info` and `streamembed plot map` take it from); none: do not save.")
    input: str = _option("input", "What a generator-fitted model embeds: dissimilarities (model.metric between "
                         "features) or similarities (model.kernel between features; docs/math.md §2).")
    kernel: str = _option("kernel", "Kernel for input = similarity: linear, cosine or rbf (gamma = 1/n_features).")
    geodesic_neighbors: int = _f(0, "Landmark Isomap: geodesic distances through this many nearest landmarks "
                                 "(0: off).", min=0, max=100_000, off=0)
    correction: str = _option("correction", "Non-Euclidean correction: none (drop negative eigenvalues) or "
                              "cailliez (the additive constant that makes the landmark kernel PSD).")
    landmark_map: str = _option("landmark_map", "Landmark map: cmds, or refined by smacof (stress) or sammon, or "
                                "nonmetric (ordinal MDS: only the order of the dissimilarities counts); a refined map "
                                "needs method = stress or l1.")


@dataclass
class SourceConfig:
    """[source]: where objects come from."""

    kind: str = _f(SOURCES.names()[0], "Where objects come from: generator (built-in), directory (files) or kafka "
                   "(a consumer group on kafka.input_topic).", choices=SOURCES.names())
    batch_rows: int = _option("batch_rows", "Most rows per batch. Larger batches amortise the per-batch work "
                              "(decoding, drift statistics, encoding, one output message per batch); the projection "
                              "kernel does its own cache blocking. A Kafka batch concatenates consecutive messages of "
                              "one poll up to this many rows (never splitting a message).", min=1, max=10_000_000)
    max_block_rows: int = _option("max_block_rows", "Largest block (rows carrying `cross`) accepted; a larger one is "
                                  "dead-lettered as bad_block.", min=1, max=1_000_000)


@dataclass
class DirectoryConfig:
    """[directory]: the watched directory of input files (source.kind = directory)."""

    path: str = _f("input", "Directory watched for Parquet (.parquet/.pq), Arrow IPC (.arrow/.arrows/.ipc/.feather) "
                   "and JSON-lines (.jsonl/.ndjson/.json) files.")
    pattern: str = _f("*", "Glob of the files to read, on the path relative to directory.path: * and ? match within "
                      "a name, **/ matches zero or more directories (**/*.parquet: every Parquet file, top-level "
                      "ones included); without / or ** only top-level files. Hidden names and directories "
                      "(.x, _x) are skipped; symbolic links out of the directory are not followed.")
    poll_seconds: float = _s(0.5, "Seconds between directory scans while there is nothing to read.", min=0.001,
                             max=3600.0)
    settle_seconds: float = _s(1.0, "A file is read once its size and modification time have not changed for this "
                               "long (it is complete). Better still: write to a hidden or .tmp name, then rename.",
                               min=0.0, max=3600.0)
    mmap: str = _f("auto", "Memory-map Arrow IPC and Parquet files instead of copying them (zero-copy; a file "
                   "truncated while mapped kills the process): auto, files whose inode changed after their last "
                   "write (renamed or linked into place, times restored), never those being written in place; "
                   "always, for producers that publish by renaming finished files into place and never rewrite "
                   "them; or never (copy every file: read whole or not at all).",
                   choices=("auto", "always", "never"))
    exit_when_idle: bool = _f(False, "Batch mode: stop (exit 0) once every file has been read and no file is still "
                              "settling, instead of waiting for more. A path that is not a directory then refuses to "
                              "start (exit 2).")
    incomplete_seconds: float = _s(60.0, "A file whose last part is unfinished (a JSON line without its newline, an "
                                   "Arrow stream cut inside a message, a Parquet or Arrow file without its footer) "
                                   "is read up to there and resumed when it grows; if it does not change for this "
                                   "long, the unfinished part becomes a dead letter.", min=0.0)


@dataclass
class GeneratorConfig:
    """[generator]: the built-in Gaussian-mixture stream (source.kind = generator)."""

    seed: int = _f(0, "The same seed gives the same objects (batch i is drawn from seed and i only).", min=0,
                   max=2**32 - 1)
    n_features: int = _f(10, "Feature dimension p.", min=2, max=100_000)
    clusters: int = _f(4, "Gaussian mixture components.", min=1, max=10_000)
    intrinsic_dims: int = _f(3, "The components live in a random subspace of this dimension (< n_features).", min=1,
                            max=100_000)
    cluster_spread: float = _f(5.0, "Scale of the component means.", min=0.0, max=1e12)
    cluster_std: float = _f(0.5, "Standard deviation within a component.", min=0.0, max=1e12)
    noise_std: float = _f(0.01, "Isotropic noise added in all n_features directions.", min=0.0,
                        max=1e12)
    drift_speed: float = _f(0.0, "Drift: component means move this far (feature units) per 100,000 objects.",
                            min=0.0, max=1e12)
    new_cluster_after: int = _f(0, "From this object index on, a new component appears outside the landmarks' span "
                                "(0: never).", min=0, max=MAX_ROWS)
    new_cluster_offset: float = _f(5.0, "Distance of that new component from the span.", min=0.0,
                                  max=1e12)
    rate: float = _f(5000.0, "Objects per second (0: as fast as the engine goes).", min=0.0, max=1e9)
    emit: str = _f("features", "features (the engine computes dissimilarities) or dissimilarities.",
                   choices=("features", "dissimilarities"))
    id_prefix: str = _f("gen", "Object ids are <id_prefix>-<seed>-<index>.")


@dataclass
class OutputConfig:
    """[output]: where results, dead letters and state go."""

    root: str = _f("streamembed-out", "Root of the default locations below, and of the run's state (checkpoint, "
                   "refitted models, histories). One root holds one map's run.")
    embeddings_dir: str = _f("", "Parquet output files part-<first input position>.parquet; empty: <root>/embeddings.")
    dead_letter_dir: str = _f("", "Dead letters dead-<first input position>.<format>; empty: <root>/dead-letter.")
    dead_letter_format: str = _f("parquet", "Dead-letter file format: parquet or jsonl.", choices=("parquet", "jsonl"))
    checkpoint_path: str = _f("", "Checkpoint (JSON); empty: <root>/checkpoint.json.")
    roll_rows: int = _f(100_000, "Publish the output files and commit the checkpoint after this many rows ...", min=1,
                       max=1_000_000_000)
    roll_seconds: float = _s(5.0, "... or this many seconds after the first unpublished row (and whenever the source "
                             "has nothing new, and on shutdown).", min=0.01)
    schema_version: int = _f(2, "Output record format (files and Kafka output messages): 2, the lean format "
                             "(coordinates as columns y0..y{d-1} and numbers in the input's precision, flags as the "
                             "flag_bits bitmask, constants in the schema metadata), or 1 (y list of float64, flags "
                             "list of names; written on request for one more release): docs/formats.md "
                             "(migration).", choices=(1, 2), min=1, max=2)
    row_group_rows: int = _f(65536, "Rows per Parquet row group.", min=1, max=100_000_000)
    compression: str = _f("zstd", "Parquet compression.", choices=("zstd", "snappy", "gzip", "lz4", "none"))
    parquet: bool = _f(True, "Write the Parquet output files (false: only the Kafka output topic).")
    kafka_topic: str = _f("", "Kafka topic the embedded rows are also (or, with parquet = false, only) produced to, "
                          "with the [kafka] settings; empty: none. Works with any source.")
    file_mode: str = _f("0640", "Mode (octal) of every file the daemon creates: outputs, dead letters, checkpoint, "
                        "models, histories, whatever the process umask (which is narrowed to match). The owner must "
                        "be able to read and write.")
    dir_mode: str = _f("0750", "Mode (octal) of every directory the daemon creates (existing ones are left as they "
                       "are). The owner must have rwx; setgid (02750) is allowed.")


@dataclass
class RunConfig:
    """[run]: how long to run and what state to start from."""

    max_batches: int = _f(0, "Stop after this many batches (0: unbounded).", min=0, max=MAX_ROWS)
    max_records: int = _f(0, "Stop after this many input records (0: unbounded).", min=0, max=MAX_ROWS)
    fresh: bool = _f(False, "Start over: move the previous run's state in output.root (checkpoint, refitted "
                     "models, histories, and the output and dead letters under the root) aside to "
                     "<root>/previous-<time>/ instead of resuming from it.")
    progress_seconds: float = _s(60.0, "Log a progress line (records in/out/dead per second, lag, model version) "
                                 "this often; 0: never.", min=0.0)
    max_batch_attempts: int = _f(3, "A batch whose processing crashed the daemon this many times in a row is "
                                 "quarantined: its records become dead letters (reason quarantined).", min=1,
                                 max=100)
    stop_seconds: float = _s(20.0, "After SIGTERM, SIGINT or SIGHUP: finish the batch and flush its output for at "
                             "most this long, then exit 0 anyway (unacknowledged output is produced again after the "
                             "restart). Keep it below the supervisor's stop timeout (Kubernetes: 30 s).", min=0.0,
                             max=3600.0)


@dataclass
class KafkaConfig:
    """[kafka]: used when source.kind = kafka or output.kafka_topic is set; nothing connects otherwise."""

    client_library: str = _f(CLIENT_LIBRARIES.names()[0], "The client library: kafka-python (pure Python, a "
                             "dependency) or confluent (confluent-kafka's librdkafka, which fetches and produces in C "
                             "threads: pip install 'streamembed[confluent]'); the same semantics either way "
                             "(docs/kafka.md). A library that is not installed refuses to start (exit 2).",
                             choices=CLIENT_LIBRARIES.names())
    bootstrap_servers: str = _f("127.0.0.1:9092", "Comma-separated host:port of the brokers.")
    input_topic: str = _f("", "Input topic (source.kind = kafka). Messages: an Arrow IPC stream or JSON per message "
                          "(header content-type, else sniffed); see docs/kafka.md.")
    group_id: str = _f("streamembed", "Consumer group: replicas with the same group id share the input partitions.")
    client_id: str = _f("streamembed", "Client id prefix (-consumer / -producer is appended).")
    auto_offset_reset: str = _f("earliest", "Where a group without committed offsets starts.",
                                choices=("earliest", "latest"))
    event_time: str = _f("auto", "Event time of each row (latency = processed_at - event_time): auto (the row's "
                         "event_time field, else its message's timestamp), record (the field only), create_time or "
                         "log_append_time (the message timestamp when it is of that type, replacing the field; rows "
                         "of messages of the other type have none), none (no event time: latency not observed).",
                         choices=EVENT_TIME_MODES)
    dead_letter_topic: str = _f("", "Refused messages and rows, with headers naming the reason and the source "
                                "topic/partition/offset; empty: <input_topic>.dlq.")
    output_format: str = _f("arrow", "Messages of output.kafka_topic: arrow (one Arrow IPC stream per batch, keyed by "
                            "its first id) or json (one object per row, keyed by its id).", choices=("arrow", "json"))
    model_topic: str = _f("", "Compacted topic that distributes the landmark model to every replica of the group (key "
                          "model_name, value the .npz); empty: off. A replica with model.path publishes its model when "
                          "it is newer than the topic's; one without model.path takes the topic's map of the lineage "
                          "it can trace (adopt_lineage); all follow newer versions of their own map's lineage only.")
    model_name: str = _f("streamembed", "Key of this deployment's model in model_topic.")
    adopt_lineage: str = _f("", "Without model.path: the lineage (as logged, e.g. 3f2a...) of the map this replica may "
                            "take from model_topic; \"*\": the newest map whatever its lineage. Empty: only the map "
                            "this root already ran (its checkpoint or models/); with none, refuse to start (exit 2) "
                            "naming the lineages on the topic.")
    model_poll_seconds: float = _s(2.0, "Seconds between looks for a newer model (between batches).", min=0.0)
    model_wait_seconds: float = _s(60.0, "Without model.path: wait this long for a model on model_topic at start.",
                                   min=0.0)
    poll_timeout_ms: int = _ms(200, "Longest wait for new messages in one poll (milliseconds).", min=0, max=60_000)
    max_poll_records: int = _f(500, "Messages decoded per consumer poll; a poll's messages are processed before the "
                               "next poll: keep their processing time far below max_poll_interval_ms.", min=1,
                               max=1_000_000)
    max_poll_interval_ms: int = _ms(300_000, "The group drops a member that has not polled for this long (ms); "
                                    "more than a batch may take (model.max_batch_seconds).", min=1000)
    session_timeout_ms: int = _ms(8000, "The group drops a member without heartbeats for this long (ms): a killed "
                                  "replica's partitions move this long after its last heartbeat, plus the rejoin; "
                                  "shorter also drops replicas whose heartbeats stall (docs/kafka.md).", min=1000,
                                  max=1_800_000)
    heartbeat_interval_ms: int = _ms(2000, "Heartbeat period (ms; at most a third of session_timeout_ms).", min=100,
                                     max=600_000)
    assignor: str = _f("range", "Partition assignor: range (a failover in one rebalance), cooperative-sticky "
                       "(survivors keep their partitions during a rebalance, but two rounds), sticky or roundrobin; "
                       "one protocol per group (docs/kafka.md, failover).",
                       choices=("range", "roundrobin", "sticky", "cooperative-sticky"))
    fetch_max_wait_ms: str | int = _f(10, "Longest the broker holds a fetch waiting for data (ms; Tansu holds "
                                      "every fetch this long), chosen from docs/failover-and-latency.md; auto: "
                                      "10 ms caught up, 100 ms and 1 MiB fetches while behind.", min=1,
                                      max=60_000, words=("auto",))
    fetch_max_bytes: int = _f(52_428_800, "Most bytes one fetch returns.", min=1024, max=MAX_INT32)
    max_partition_fetch_bytes: int = _f(16_777_216, "Most bytes per partition per fetch; must hold one batch message "
                                        "(1,000 objects x 256 float32 dissimilarities in Arrow IPC = 1.03 MB).",
                                        min=1024, max=MAX_INT32)
    max_request_size: int = _f(16_777_216, "Largest produce request (bytes; output and dead letters of large input "
                               "messages).", min=1024, max=MAX_INT32)
    batch_size: int = _f(1_048_576, "Producer batch bytes per partition.", min=0, max=MAX_INT32)
    linger_ms: int = _ms(5, "Producer wait for more messages to batch (ms).", min=0, max=60_000)
    acks: str = _f("all", "Acknowledgements a produce waits for.", choices=("all", "1", "0"))
    max_unacked_bytes: int = _f(67_108_864, "Backpressure: pause the input partitions while this many produced bytes "
                                "are not yet acknowledged; resume below half of it.", min=1,
                                max=MAX_BYTES)
    startup_timeout_seconds: float = _s(60.0, "Give up (exit 3, to be retried) when the brokers cannot be reached "
                                        "for this long at start.", min=0.0)
    retry_backoff_max_seconds: float = _s(10.0, "Transient errors (timeouts, lost leaders, no broker) are retried "
                                          "with exponential backoff up to this many seconds between tries; never "
                                          "dead-lettered.", min=0.001, max=3600.0)
    security_protocol: str = _f("PLAINTEXT", "Transport security.",
                                choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    sasl_mechanism: str = _f("", "SASL mechanism (with SASL_*); empty: none.",
                             choices=("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    sasl_plain_username: str = _f("", "SASL user name.")
    sasl_plain_password: str = _f("", "SASL password (better from the environment: "
                                  "STREAMEMBED_KAFKA__SASL_PLAIN_PASSWORD).", secret=True)
    ssl_cafile: str = _f("", "PEM file of the CA that verifies the brokers.")
    ssl_certfile: str = _f("", "PEM client certificate (mutual TLS).")
    ssl_keyfile: str = _f("", "PEM client private key.")
    ssl_check_hostname: bool = _f(True, "Verify that the broker certificate matches its host name.")
    client: dict[str, Any] = _f({}, "[kafka.client]: more settings of the client library, given to the consumer "
                                "and/or producer that knows each key: kafka-python's (compression_type = \"lz4\") "
                                "or, with client_library = confluent, librdkafka's (\"compression.type\" = \"lz4\"); "
                                "a key the library does not know refuses to start. In the environment: "
                                "STREAMEMBED_KAFKA__CLIENT='{\"linger_ms\": 10}'.")


@dataclass
class MetricsConfig:
    """[metrics]: the ops server (/metrics, /healthz, /readyz, /map)."""

    enabled: bool = _f(True, "Serve /metrics (Prometheus), /healthz, /readyz and /map over HTTP.")
    host: str = _f("127.0.0.1", "Address to bind (127.0.0.1: this machine only; another address logs a WARNING).")
    allowed_hosts: str = _f("", "Host header names (comma-separated) answered besides localhost and IP addresses "
                            "(others get 421: DNS rebinding cannot read /metrics); *: any.")
    port: int = _f(9108, "TCP port; 0 picks a free port, which is logged and written to port_file.", min=0,
                   max=65535)
    port_file: str = _f("", "Write the bound port to this file; empty: do not.")
    wedged_after_seconds: float = _s(120.0, "/healthz answers 503 when the loop has not made progress for this long.",
                                     min=1.0)
    max_connections: int = _f(512, "Open connections at most (fewer if the process may open fewer files). Beyond "
                              "this a new connection closes the one that has waited longest for its request; a "
                              "waiting connection costs no thread, and /healthz and /readyz are answered as soon as "
                              "their request has arrived, so slow or idle sockets cannot lock the probes out.",
                              min=1, max=100_000)
    max_connections_per_client: int = _f(128, "Open connections at most from one client address; beyond this a new "
                                         "one closes that client's longest-waiting connection (not another "
                                         "client's).", min=1, max=100_000)
    request_timeout_seconds: float = _s(5.0, "A client must send its whole request (request line and headers) within "
                                        "this many seconds of connecting, and take the response within as many, or "
                                        "it is disconnected.", min=0.1, max=3600.0)
    map_points: int = _f(2000, "/map shows the newest this many placements (a bounded sample, whatever the stream "
                         "rate) over the landmarks; 0: no /map.", min=0, max=100_000)


@dataclass
class LoggingConfig:
    """[logging]: log lines on stderr."""

    level: str = _f("INFO", "Log level.", choices=("DEBUG", "INFO", "WARNING", "ERROR"), fold_case=True)
    format: str = _f("text", "text, or json for one JSON object per line.", choices=("text", "json"))


@dataclass
class Config:
    """The whole configuration: one instance of every section."""

    model: ModelConfig = field(default_factory=ModelConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    directory: DirectoryConfig = field(default_factory=DirectoryConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    run: RunConfig = field(default_factory=RunConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    consistency: ConsistencyConfig = field(default_factory=ConsistencyConfig)
    refit: RefitConfig = field(default_factory=RefitConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    trust: TrustConfig = field(default_factory=TrustConfig)
    metric: MetricConfig = field(default_factory=MetricConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    # derived locations
    @property
    def root(self) -> Path:
        return Path(self.output.root)

    @property
    def embeddings_dir(self) -> Path:
        return Path(self.output.embeddings_dir or self.root / "embeddings")

    @property
    def dead_letter_dir(self) -> Path:
        return Path(self.output.dead_letter_dir or self.root / "dead-letter")

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.output.checkpoint_path or self.root / "checkpoint.json")

    @property
    def model_dir(self) -> Path:
        return Path(self.refit.model_dir or self.root / "models")

    @property
    def history_path(self) -> Path:
        return Path(self.refit.history_path or self.root / "model-history.jsonl")

    @property
    def drift_history_path(self) -> Path:
        return self.root / "drift-history.jsonl"

    @property
    def pid_path(self) -> Path:
        return self.root / "streamembed.pid"


def sections() -> dict[str, type]:
    """Section name -> its dataclass, in ``Config`` order."""
    hints = typing.get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config)}


def section_keys(section_cls: type) -> dict[str, tuple[Any, dataclasses.Field[Any]]]:
    """Key name -> (its type, its field with the metadata of ``_f``), in declaration order."""
    hints = typing.get_type_hints(section_cls)
    return {f.name: (hints[f.name], f) for f in dataclasses.fields(section_cls)}


def _field(key: str) -> dataclasses.Field[Any]:
    section, _, name = key.partition(".")
    return section_keys(sections()[section])[name][1]


def default(key: str) -> Any:
    """The default of ``section.key`` (what a command-line flag for the same setting defaults to)."""
    f = _field(key)
    if f.default is dataclasses.MISSING:
        return f.default_factory()  # type: ignore[operator]
    return f.default


def choices(key: str) -> tuple[Any, ...]:
    """The allowed values of ``section.key`` (a setting with choices)."""
    ch = _field(key).metadata.get("choices")
    if ch is None:
        raise KeyError(f"{key} has no choices")
    return tuple(ch)

