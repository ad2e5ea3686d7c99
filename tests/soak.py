"""A bounded crash soak: random ``kill -9``s of the real daemon while good and poison input keeps arriving.

Directory mode: good files (Parquet, Arrow streams, JSON lines, renamed into
place), JSON-lines files appended in pieces, Parquet files shrunk and rewritten
while they may be being read, and every kind of the poison corpus
(tests/poison.py) arrive while the daemon is killed at random moments and
restarted. Kafka mode (``--mode kafka``, needs the Tansu test broker): good
and poison messages on a 2-partition topic, the same kills; then the transport
faults on another topic (``--mode kafka-faults`` alone): batches compressed
with every codec by a foreign producer (confluent-kafka), batches no client
can read (a corrupt gzip payload, a wrong CRC), and oversize messages, outputs
and dead letters (at 1 MiB ``max_request_size`` and 2 MiB
``max_partition_fetch_bytes``), with the same kills. At the end a last
run drains everything and stops on SIGTERM, and the ledger is checked: every
input record is embedded or a dead letter with its expected reason (lost
otherwise), extra copies are counted (duplicates are allowed: at-least-once),
no temporary file is left, every output Parquet file reads, and the
checkpoint never moved backwards. Shared mode (``--mode shared``): two daemons
with their own roots and one output directory, inputs of the same names,
files named with a newline and ESC bytes, symbolic links out of the watched
directories, a link planted at the old ``.checkpoint.json.tmp``, pid files
deleted under running daemons (a second daemon must refuse), umask 000; the
same kills (``shared_output_soak``).

    python -m tests.soak [--mode directory|shared|kafka|kafka-faults|failover|attacks|both|all] [--seconds 40]
                         [--seed 0] [--runs 5]

Failover mode (``tests/soak_failover.py``): kill -9 of one of two Kafka replicas, ``--runs`` times, with the
takeover time of each. Attacks mode (``tests/attacks.py``): issue 35's attacks, one row each.

prints the table: fault | runs | records in | lost | duplicated | crashes | quarantined (records the crash
guard set aside as dead letters because the daemon died three times while their batch was in flight).
``tests/e2e/test_soak.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from tests import poison
from tests.e2e.cli import clean_env as child_env
from tests.stream.helpers import dissimilarities, fitted_model, input_table, objects

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the daemon, killed and restarted


class Runs:
    """Starts of the daemon: each is killed -9 (``kill``) or stopped by SIGTERM (``stop``); counts the crashes.

    A crash is any exit we did not cause: a non-zero code on its own, or an exit other than 0 after SIGTERM.
    ``umask``: the daemons' umask (the shared-output soak runs them under 000).
    """

    def __init__(self, workdir: Path, env: dict[str, str], name: str = "daemon", umask: int | None = None) -> None:
        self.workdir, self.env, self.name, self.umask = workdir, child_env(env), name, umask
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.crashes: list[str] = []
        self.logs: list[Path] = []
        self._log: Any = None

    def start(self) -> None:
        assert self.proc is None
        self.starts += 1
        path = self.workdir / f"{self.name}-{self.starts:03d}.log"
        self.logs.append(path)
        self._log = open(path, "wb")  # noqa: SIM115 - the child's log stays open for its lifetime
        umask = self.umask
        self.proc = subprocess.Popen([sys.executable, "-m", "streamembed", "run"], cwd=self.workdir, env=self.env,
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     preexec_fn=None if umask is None else lambda: os.umask(umask))

    def check(self) -> None:
        """Note an exit of its own (a crash) and start again."""
        if self.proc is not None and self.proc.poll() is not None:
            self.crashes.append(f"run {self.starts}: exit {self.proc.returncode} ({self.logs[-1].name})")
            self._closed()
            self.start()

    def kill(self) -> None:
        assert self.proc is not None
        self.check()
        self.proc.kill()
        self.proc.wait(10)
        self._closed()

    def stop(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            rc = -999
        if rc != 0:
            self.crashes.append(f"run {self.starts}: exit {rc} after SIGTERM ({self.logs[-1].name})")
        self._closed()
        return rc

    def _closed(self) -> None:
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self._closed()


# ----------------------------------------------------------------------------- what went in


@dataclass
class Ledger:
    """Every input record, by category: embedded ids, and dead letters as (unit, row, reason)."""

    ids: dict[str, str] = field(default_factory=dict)  # id -> category
    dead: dict[tuple[Any, ...], str] = field(default_factory=dict)  # (where, row, reason) -> category
    records: Counter[str] = field(default_factory=Counter)  # category -> records in

    def good(self, category: str, ids: list[str]) -> None:
        for i in ids:
            self.ids[i] = category
        self.records[category] += len(ids)


CATEGORIES = {
    "good": "good files, renamed into place",
    "appended": "JSON lines appended in pieces (written in place)",
    "rewritten": "Parquet files shrunk and rewritten while read",
    "poison": "poison corpus",
    "hostile": "files named with a newline and ESC bytes",
    "good-msg": "good messages",
    "poison-msg": "poison corpus messages",
    "compressed-msg": "batches compressed with gzip, snappy, lz4 or zstd by confluent-kafka",
    "unreadable-msg": "batches no client can read (corrupt gzip payload, wrong CRC): one dead letter per offset",
    "oversize-msg": "oversize messages, outputs and dead letters (over the fetch or the produce limit)",
}


def _soak_kinds(mode: str) -> list[poison.Kind]:
    """The poison corpus in its file or message form (every kind has an exact expected outcome)."""
    return [k for k in poison.build_corpus() if (k.files if mode == "file" else k.messages) is not None]


# ----------------------------------------------------------------------------- directory mode


def _atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.writing")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _good_table(ids: list[str], seed: int) -> pa.Table:
    return input_table(ids, dissimilarities(objects(len(ids), seed=seed)))


def _bytes(table: pa.Table, fmt: str) -> bytes:
    if fmt == "parquet":
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=64)
        return sink.getvalue().to_pybytes()
    if fmt == "arrows":
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, table.schema) as w:
            for b in table.to_batches(max_chunksize=50):
                w.write_batch(b)
        return sink.getvalue().to_pybytes()
    rows = table.to_pylist()
    return b"".join(json.dumps({"id": r["id"], "dissimilarities": [float(x) for x in r["dissimilarities"]]}).encode()
                    + b"\n" for r in rows)


class DirectoryFeeder:
    """Writes input files into ``indir`` until stopped, recording each record in the ledger.

    Good files renamed into place, JSON lines appended in pieces (cut anywhere, so a read can find only an
    unfinished line), files rewritten after they were read, and the file poison corpus.
    """

    def __init__(self, indir: Path, ledger: Ledger, rng: random.Random, prefix: str = "",
                 poison: bool = True) -> None:
        self.indir, self.ledger, self.rng, self.prefix, self.poison = indir, ledger, rng, prefix, poison
        self.kinds = list(_soak_kinds("file")) if poison else []
        self.where: dict[str, tuple[str, int]] = {}
        self.stop = threading.Event()
        self.n = 0
        self.rewritten: set[str] = set()
        self.poison_kinds = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.n += 1
                pick = self.rng.random()
                if pick < 0.45 or not self.kinds and (pick < 0.9 if self.poison else pick >= 0.7):
                    self._good()
                elif pick < 0.6:
                    self._appended()
                elif pick < 0.7:
                    self._rewritten()
                else:
                    for _ in range(min(8, len(self.kinds))):  # the whole corpus early in the soak
                        self._poison(self.kinds.pop(0))
                self.stop.wait(self.rng.uniform(0.02, 0.25))
        except BaseException as exc:  # reported by the soak
            self.error = exc

    def _good(self) -> None:
        m = self.rng.randint(20, 300)
        ids = [f"{self.prefix}g{self.n}-{i}" for i in range(m)]
        fmt = self.rng.choice(["parquet", "arrows", "jsonl"])
        _atomic(self.indir / f"g{self.n:05d}.{fmt}", _bytes(_good_table(ids, self.n), fmt))
        self.ledger.good("good", ids)

    def _appended(self) -> None:
        ids = [f"{self.prefix}a{self.n}-{i}" for i in range(self.rng.randint(30, 200))]
        data = _bytes(_good_table(ids, self.n), "jsonl")
        self.ledger.good("appended", ids)
        cuts = sorted(self.rng.sample(range(1, len(data)), 2))
        with open(self.indir / f"a{self.n:05d}.jsonl", "wb") as f:
            for lo, hi in zip([0, *cuts], [*cuts, len(data)], strict=True):
                f.write(data[lo:hi])
                f.flush()
                self.stop.wait(self.rng.uniform(0.05, 0.6))

    def _rewritten(self) -> None:
        ids = [f"{self.prefix}r{self.n}-{i}" for i in range(self.rng.randint(500, 2000))]
        data = _bytes(_good_table(ids, self.n), "parquet")
        name = f"r{self.n:05d}.parquet"
        self.rewritten.add(name)
        self.ledger.good("rewritten", ids)
        path = self.indir / name
        _atomic(path, data)
        self.stop.wait(self.rng.uniform(0.0, 0.5))
        with open(path, "r+b") as f:  # shrink it (a reader that mapped it would get SIGBUS) ...
            f.truncate(len(data) // 3)
            f.flush()
            self.stop.wait(self.rng.uniform(0.0, 0.3))
            f.seek(0)
            f.write(data)  # ... and write it whole again, in place

    def _poison(self, kind: poison.Kind) -> None:
        assert kind.files is not None
        for unit, e in enumerate(kind.files):
            path = os.path.join(os.fsencode(self.indir), e.name)
            if e.kind == "dir":
                os.mkdir(path)
            elif e.kind == "symlink":
                os.symlink(e.data, path)
            elif e.kind == "fifo":
                os.mkfifo(path)
            elif e.name.startswith(b"."):
                with open(path, "wb") as f:
                    f.write(e.data)
            else:
                tmp = os.path.join(os.fsencode(self.indir), b"." + e.name + b".writing")
                with open(tmp, "wb") as f:
                    f.write(e.data)
                os.replace(tmp, path)
            name = e.name.decode("utf-8", "replace")
            self.where[name] = (kind.name, unit)
        for o in kind.file_outcomes:
            if o.reason == poison.EMBEDDED:
                assert o.id is not None
                self.ledger.ids[o.id] = "poison"
            else:
                self.ledger.dead[(kind.name, o.unit, o.row, o.reason)] = "poison"
        self.ledger.records["poison"] += len(kind.file_outcomes)
        self.poison_kinds += 1


def _read_parquet_ids(directory: Path, pattern: str) -> tuple[list[str], list[str]]:
    """(ids, unreadable files) of the Parquet files ``pattern`` in ``directory``."""
    ids: list[str] = []
    bad: list[str] = []
    for p in sorted(directory.glob(pattern)) if directory.is_dir() else []:
        try:
            ids += pq.read_table(p, columns=["id"]).column("id").to_pylist()
        except Exception as exc:  # reported
            bad.append(f"{p.name}: {exc}")
    return ids, bad


def _dead_key(where: dict[str, tuple[str, int]], r: dict[str, Any]) -> tuple[Any, ...]:
    """(kind, unit, row, reason) of a dead letter of a poison file; ("q:<file>", -1, row, reason) otherwise."""
    kind_unit = where.get(r["file"] or "", (f"q:{r['file']}" if r["reason"] == "quarantined" else f"?{r['file']}", -1))
    return (*kind_unit, r["row"], r["reason"])


def _read_dead_files(directory: Path) -> tuple[list[dict[str, Any]], list[str]]:
    rows: list[dict[str, Any]] = []
    bad: list[str] = []
    for p in sorted(directory.glob("dead-*.parquet")) if directory.is_dir() else []:
        try:
            rows += pq.read_table(p, columns=["id", "reason", "file", "row"]).to_pylist()
        except Exception as exc:  # reported
            bad.append(f"{p.name}: {exc}")
    return rows, bad


class CheckpointWatch:
    """Samples the committed positions (``read``: key -> progress, None when unreadable); ``backwards`` lists
    every time one moved back (or vanished)."""

    def __init__(self, read: Callable[[], dict[str, int] | None],
                 exempt: Callable[[str], bool] = lambda key: False) -> None:
        self.read, self.exempt = read, exempt
        self.last: dict[str, int] = {}
        self.backwards: list[str] = []
        self.samples = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def sample(self) -> None:
        with self._lock:
            self._sample()

    def _sample(self) -> None:
        now = self.read()
        if now is None:
            return
        self.samples += 1
        for key, before in self.last.items():
            after = now.get(key)
            if not self.exempt(key) and (after is None or after < before):
                self.backwards.append(f"{key}: {before} -> {after}")
        self.last = now

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(0.1)


def _checkpoint_file(path: Path) -> Callable[[], dict[str, int] | None]:
    """Progress per input file in the checkpoint file (a file done counts more than any row of it)."""
    def read() -> dict[str, int] | None:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return _file_progress(doc)
    return read


def _file_progress(doc: dict[str, Any]) -> dict[str, int]:
    pos = doc.get("sources", {}).get("files") or {}
    out = {k: int(v.get("rows") or 0) + (1 << 40) for k, v in (pos.get("done") or {}).items()}  # done > any row
    cur = pos.get("current")
    if cur:
        out[cur["file"]] = max(out.get(cur["file"], 0), int(cur["row"]))
    return out


def _table_row(fault: str, runs: int, records: int, lost: int, dup: int, crashes: int,
               quarantined: int) -> dict[str, Any]:
    return {"fault": fault, "runs": runs, "records in": records, "lost": lost, "duplicated": dup, "crashes": crashes,
            "quarantined": quarantined}


@dataclass
class SoakResult:
    rows: list[dict[str, Any]]
    problems: list[str]
    details: dict[str, Any]


def _account(ledger: Ledger, out_ids: Counter[str], dead_keys: Counter[tuple[Any, ...]], quarantined_ids: set[str],
             runs: int, crashes: int, label: str) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """Rows of the table per category, and the problems.

    A record is lost when it is neither embedded nor a dead letter with its reason. A record set aside by the
    crash guard (reason ``quarantined``: the daemon died three times while its batch was in flight, which random
    kill -9s can do to a slow batch) is not lost: it is a dead letter, to replay; it is counted apart.
    """
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    lost_by: Counter[str] = Counter()
    dup_by: Counter[str] = Counter()
    quarantined_by: Counter[str] = Counter()
    lost_examples: list[Any] = []
    for i, cat in ledger.ids.items():
        if out_ids[i] == 0:
            if i in quarantined_ids:
                quarantined_by[cat] += 1
            else:
                lost_by[cat] += 1
                lost_examples.append(i)
        dup_by[cat] += max(0, out_ids[i] - 1)
    for key, cat in ledger.dead.items():
        if dead_keys[key] == 0:
            if dead_keys[(*key[:3], "quarantined")]:
                quarantined_by[cat] += 1
            else:
                lost_by[cat] += 1
                lost_examples.append(key)
        dup_by[cat] += max(0, dead_keys[key] - 1)
    unknown_out = sorted(i for i in out_ids if i not in ledger.ids)
    # a quarantined record (its batch was in flight at three kills) is a dead letter by design, whatever its
    # expected outcome was (embedded, or another reason): counted apart, never "unexpected"
    unexpected_dead = sorted((k for k in dead_keys if k not in ledger.dead and k[3] != "quarantined"), key=str)
    if unknown_out:
        problems.append(f"{len(unknown_out)} output ids that were never input, e.g. {unknown_out[:5]}")
    if unexpected_dead:
        problems.append(f"{len(unexpected_dead)} unexpected dead letters, e.g. {unexpected_dead[:5]}")
    for cat in ledger.records:
        rows.append(_table_row(f"{label}: {CATEGORIES[cat]}", runs, ledger.records[cat], lost_by[cat], dup_by[cat],
                               crashes, quarantined_by[cat]))
    if lost_examples:
        problems.append(f"{len(lost_examples)} records lost, e.g. {lost_examples[:8]}")
    return rows, problems, {"lost": dict(lost_by), "duplicated": dict(dup_by), "quarantined": dict(quarantined_by)}


def directory_soak(workdir: Path, seconds: float = 40.0, seed: int = 0, drain_seconds: float = 90.0,
                   log: Callable[[str], None] = lambda s: None) -> SoakResult:
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    model = workdir / "model.npz"
    fitted_model().save(model)
    indir, out = workdir / "in", workdir / "out"
    indir.mkdir()
    env = {
        "STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_MODEL__PATH": str(model),
        "STREAMEMBED_DIRECTORY__PATH": str(indir), "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0.3",
        "STREAMEMBED_DIRECTORY__POLL_SECONDS": "0.05", "STREAMEMBED_DIRECTORY__INCOMPLETE_SECONDS": "3",
        "STREAMEMBED_OUTPUT__ROOT": str(out), "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5",
        "STREAMEMBED_SOURCE__BATCH_ROWS": "256", "STREAMEMBED_SOURCE__MAX_BLOCK_ROWS": str(poison.MAX_BLOCK_ROWS),
        "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_LOGGING__FORMAT": "json",
        "STREAMEMBED_DRIFT__ENABLED": "false",
    }
    ledger = Ledger()
    feeder = DirectoryFeeder(indir, ledger, rng)
    t_start = time.monotonic()
    watch = CheckpointWatch(_checkpoint_file(out / "checkpoint.json"), exempt=lambda key: key in feeder.rewritten)
    runs = Runs(workdir, env)
    threads = [threading.Thread(target=feeder.run, daemon=True), threading.Thread(target=watch.run, daemon=True)]
    kills = 0
    try:
        for t in threads:
            t.start()
        runs.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.3, 3.0))
            runs.check()
            watch.sample()
            runs.kill()
            kills += 1
            runs.start()
        feeder.stop.set()
        threads[0].join(30)
        # kinds the random schedule had not reached yet (a slow disk, many restarts) arrive now, while the last run
        # reads: every kind is sent in every soak
        while feeder.kinds and feeder.error is None:
            feeder._poison(feeder.kinds.pop(0))
        t_drain = time.monotonic()
        # the last run drains everything, then stops cleanly
        deadline = time.monotonic() + drain_seconds
        while time.monotonic() < deadline:
            runs.check()
            ids, _ = _read_parquet_ids(out / "embeddings", "part-*.parquet")
            dead, _ = _read_dead_files(out / "dead-letter")
            keys = {_dead_key(feeder.where, r) for r in dead}
            q = {r["id"] for r in dead if r["reason"] == "quarantined"}
            q_places = {k[:3] for k in keys if k[3] == "quarantined"}
            if set(ledger.ids) <= set(ids) | q and all(k in keys or k[:3] in q_places for k in ledger.dead):
                break
            time.sleep(0.5)
        time.sleep(1.0)
        runs.stop()
    finally:
        feeder.stop.set()
        watch.stop.set()
        runs.close()
        for t in threads:
            t.join(30)
    watch.sample()
    if feeder.error is not None:
        raise feeder.error
    ids, bad_out = _read_parquet_ids(out / "embeddings", "part-*.parquet")
    dead, bad_dead = _read_dead_files(out / "dead-letter")
    dead_keys = Counter(_dead_key(feeder.where, r) for r in dead)
    quarantined = {r["id"] for r in dead if r["reason"] == "quarantined" and r["id"] is not None}
    label = "kill -9 at random moments, directory"
    rows, problems, details = _account(ledger, Counter(ids), dead_keys, quarantined, runs.starts,
                                       len(runs.crashes), label)
    problems += [f"unreadable output: {b}" for b in bad_out + bad_dead]
    temps = [str(p.relative_to(out)) for p in out.rglob("*") if p.name.endswith(".tmp")]
    if temps:
        problems.append(f"temporary files left: {temps}")
    if watch.backwards:
        problems.append(f"the checkpoint moved backwards: {watch.backwards[:5]}")
    if watch.samples < 5:
        problems.append(f"the checkpoint was sampled only {watch.samples} times")
    problems += [f"crash: {c}" for c in runs.crashes]
    details.update(kills=kills, starts=runs.starts, checkpoint_samples=watch.samples, files=feeder.n,
                   poison_kinds=feeder.poison_kinds, dead_letters=len(dead),
                   seconds=round(time.monotonic() - t_start, 1), drain_seconds=round(time.monotonic() - t_drain, 1))
    log(f"directory soak: {details}")
    return SoakResult(rows, problems, details)


# ----------------------------------------------------------------------------- two daemons, one output directory

#: What the links out of the watched directories point to: never to be read, not even as a dead letter.
SECRET_ID = "SECRET-must-not-be-read"


def _hostile_file(indir: Path, n: int, ledger: Ledger) -> None:
    """A good JSON-lines file whose name holds a newline, ESC bytes and a forged log line."""
    ids = [f"h{indir.name}-{n}-{i}" for i in range(20)]
    name = f"evil-{n}\n2026-01-01 00:00:00,000 ERROR streamembed.daemon: forged\x1b[2J.jsonl"
    _atomic(indir / name, _bytes(_good_table(ids, 1000 + n), "jsonl"))
    ledger.good("hostile", ids)


def _holds(runs: Runs, pid_path: Path, timeout: float) -> bool:
    """Wait until the running daemon of ``runs`` holds its root (a killed one's pid file may still be there)."""
    from streamembed.daemon.state import PidLock

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if runs.proc is not None and PidLock.running(pid_path) == runs.proc.pid:
            return True
        time.sleep(0.05)
    return False


def _refused_start(root_env: dict[str, str], workdir: Path, tag: str) -> str | None:
    """Start a second daemon on a root whose daemon runs (its pid file deleted first): None if refused (exit 3)."""
    log = workdir / f"second-{tag}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "streamembed", "run"], cwd=workdir, env=child_env(root_env),
                                stdout=fh, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            return f"a second daemon ran on a root held by another ({log.name})"
    text = log.read_text(errors="replace")
    if code != 3 or "another streamembed daemon" not in text:
        return f"a second daemon on a held root exited {code}, not 3 refusing ({log.name})"
    return None


def _mode_problems(top: Path) -> list[str]:
    bad = []
    for p in [top, *top.rglob("*")]:
        if p.is_symlink() or p.name.endswith(".log"):
            continue
        mode = p.stat().st_mode & 0o7777
        want = 0o750 if p.is_dir() else 0o640
        if mode != want and p != top:
            bad.append(f"{p.relative_to(top.parent)} {mode:04o} (not {want:04o})")
    return bad


def _shared_output_member(workdir: Path, name: str, model: Path, shared: Path, canary: Path, ledger: Ledger,
                          rng: random.Random) -> tuple[dict[str, str], Runs, DirectoryFeeder]:
    """(environment, runs, feeder) of one daemon of the shared-output soak; its root holds a link to ``canary``."""
    indir, root = workdir / f"in-{name}", workdir / f"root-{name}"
    indir.mkdir()
    root.mkdir()
    os.symlink(canary, root / ".checkpoint.json.tmp")
    env = {
        "STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_MODEL__PATH": str(model),
        "STREAMEMBED_DIRECTORY__PATH": str(indir), "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0.3",
        "STREAMEMBED_DIRECTORY__POLL_SECONDS": "0.05", "STREAMEMBED_DIRECTORY__INCOMPLETE_SECONDS": "3",
        "STREAMEMBED_OUTPUT__ROOT": str(root), "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5",
        "STREAMEMBED_OUTPUT__EMBEDDINGS_DIR": str(shared / "embeddings"),
        "STREAMEMBED_OUTPUT__DEAD_LETTER_DIR": str(shared / "dead-letter"),
        "STREAMEMBED_SOURCE__BATCH_ROWS": "256", "STREAMEMBED_METRICS__ENABLED": "false",
        "STREAMEMBED_LOGGING__FORMAT": "text", "STREAMEMBED_DRIFT__ENABLED": "false",
    }
    runs = Runs(workdir, env, name=f"daemon-{name}", umask=0)
    feeder = DirectoryFeeder(indir, ledger, random.Random(rng.random()), prefix=f"{name}-", poison=False)
    return env, runs, feeder


def _drain_shared(runs: list[Runs], ledger: Ledger, shared: Path, drain_seconds: float) -> None:
    """Wait (at most ``drain_seconds``) until every id of the ledger is in the shared embeddings, then 1 s more."""
    deadline = time.monotonic() + drain_seconds
    while time.monotonic() < deadline:
        for r in runs:
            r.check()
        ids, _ = _read_parquet_ids(shared / "embeddings", "part-*.parquet")
        if set(ledger.ids) <= set(ids):
            break
        time.sleep(0.5)
    time.sleep(1.0)


def _hostile_problems(workdir: Path, shared: Path, canary: Path, names: Sequence[str], runs: list[Runs],
                      ids: list[str], dead: list[dict[str, Any]]) -> list[str]:
    """What the hostile names, links and modes of the shared-output soak got through."""
    problems: list[str] = []
    if SECRET_ID in ids or any(SECRET_ID in str(r) for r in dead):
        problems.append("a file outside the watched directory was read through a symbolic link")
    if canary.read_text() != "canary\n":
        problems.append("the link planted at .checkpoint.json.tmp was followed")
    temps = [str(p.relative_to(workdir)) for p in workdir.rglob(".*.tmp")]
    if temps:
        problems.append(f"temporary files left: {temps}")
    for top in [shared, *(workdir / f"root-{n}" for n in names)]:
        problems += [f"mode: {m}" for m in _mode_problems(top)[:5]]
    logs = "".join(p.read_text(errors="replace") for r in runs for p in r.logs)
    if "\x1b" in logs or any(line.startswith("2026-01-01") for line in logs.splitlines()):
        problems.append("a file name forged a log line or put ESC on the terminal")
    return problems


def shared_output_soak(workdir: Path, seconds: float = 30.0, seed: int = 0, drain_seconds: float = 90.0,
                       log: Callable[[str], None] = lambda s: None) -> SoakResult:
    """Two daemons with their own roots and one embeddings / dead-letter directory, killed -9 at random.

    Their inputs have the same file names (distinct ids); they run under umask 000; each watched directory
    gets files named with a newline and ESC bytes and symbolic links to a file outside it; each root a link
    planted at the old predictable ``.checkpoint.json.tmp``; and while they run, a root's ``streamembed.pid``
    is deleted and a third daemon started on it (it must refuse, exit 3). At the end: every id embedded
    (duplicates allowed), nothing read through a link, the planted link's target untouched, no temporary file,
    every file 0640 and directory 0750.
    """
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    model = workdir / "model.npz"
    fitted_model().save(model)
    shared = workdir / "shared"
    outside = workdir / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_bytes(_bytes(_good_table([SECRET_ID], 7), "jsonl"))
    canary = workdir / "canary.txt"
    canary.write_text("canary\n")
    ledger = Ledger()
    names = ("a", "b")
    envs, runs, feeders = {}, {}, {}
    for name in names:
        envs[name], runs[name], feeders[name] = _shared_output_member(workdir, name, model, shared, canary, ledger,
                                                                      rng)
    threads = [threading.Thread(target=f.run, daemon=True) for f in feeders.values()]
    kills = refusals = hostile = links = 0
    problems: list[str] = []
    t_start = time.monotonic()
    try:
        for t in threads:
            t.start()
        for r in runs.values():
            r.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.3, 2.5))
            name = rng.choice(names)
            indir = feeders[name].indir
            _hostile_file(indir, hostile, ledger)
            hostile += 1
            os.symlink(outside / "secret.jsonl", indir / f"link-{links}.jsonl")
            links += 1
            for r in runs.values():
                r.check()
            pid = Path(envs[name]["STREAMEMBED_OUTPUT__ROOT"]) / "streamembed.pid"
            if rng.random() < 0.25 and _holds(runs[name], pid, 20):  # it holds the root: delete its pid file
                pid.unlink(missing_ok=True)
                problem = _refused_start(envs[name], workdir, f"{refusals}")
                refusals += 1
                if problem is not None:
                    problems.append(problem)
            runs[name].kill()
            kills += 1
            runs[name].start()
        for f in feeders.values():
            f.stop.set()
        for t in threads:
            t.join(30)
        t_drain = time.monotonic()
        _drain_shared(list(runs.values()), ledger, shared, drain_seconds)
        for r in runs.values():
            r.stop()
    finally:
        for f in feeders.values():
            f.stop.set()
        for r in runs.values():
            r.close()
    for f in feeders.values():
        if f.error is not None:
            raise f.error
    ids, bad_out = _read_parquet_ids(shared / "embeddings", "part-*.parquet")
    dead, bad_dead = _read_dead_files(shared / "dead-letter")
    crashes = sum(len(r.crashes) for r in runs.values())
    starts = sum(r.starts for r in runs.values())
    rows, more, details = _account(ledger, Counter(ids), Counter(_dead_key({}, r) for r in dead),
                                   {r["id"] for r in dead if r["reason"] == "quarantined"}, starts, crashes,
                                   "two daemons, one output directory, kill -9 at random")
    problems += more
    problems += [f"unreadable output: {b}" for b in bad_out + bad_dead]
    problems += _hostile_problems(workdir, shared, canary, names, list(runs.values()), ids, dead)
    problems += [f"crash: {c}" for r in runs.values() for c in r.crashes]
    details.update(kills=kills, starts=starts, second_daemons_refused=refusals, hostile_files=hostile,
                   links_out=links, seconds=round(time.monotonic() - t_start, 1),
                   drain_seconds=round(time.monotonic() - t_drain, 1))
    log(f"shared-output soak: {details}")
    return SoakResult(rows, problems, details)


# ----------------------------------------------------------------------------- Kafka mode


def _committed_offsets(bootstrap: str, group: str, topic: str) -> tuple[Callable[[], dict[str, int] | None],
                                                                       Callable[[], None]]:
    """(read, close): the group's committed offsets per partition, read without joining the group.

    In Kafka mode these are the checkpoint (a restarted member resumes from them; checkpoint.json only mirrors
    the partitions its writer handed out)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in (0, 1)]

    def read() -> dict[str, int] | None:
        try:
            got = {f"partition {tp.partition}": c.committed(tp) for tp in tps}
        except Exception:  # the coordinator is busy: sample again later
            return None
        return {k: v for k, v in got.items() if v is not None}

    return read, lambda: c.close()


#: The transport-fault soak's limits (kafka.max_request_size, kafka.max_partition_fetch_bytes): 1 and 2 MiB.
FAULT_LIMITS = (1 << 20, 2 << 20)


class TransportFaults:
    """The feeder's transport faults (``kafka_soak(faults=True)``): each call sends one and records its outcome."""

    CODECS = ("gzip", "snappy", "lz4", "zstd")

    def __init__(self, bootstrap: str, topic: str, ledger: Ledger, where: dict[tuple[int, int], tuple[str, int]],
                 rng: random.Random) -> None:
        import confluent_kafka

        self.bootstrap, self.topic, self.ledger, self.where, self.rng = bootstrap, topic, ledger, where, rng
        self.compressed = {c: confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": c,
                                                        "linger.ms": 20, "client.id": f"soak-{c}"})
                           for c in self.CODECS}
        self.oversize_left = ["fetch", "undecodable", "output", "row"] * 2
        #: ids of rows whose output no message can hold: embedded in Parquet, refused (too_large) by the topic
        self.refused_outputs: set[str] = set()
        self.n = 0

    def close(self) -> None:
        for p in self.compressed.values():
            p.flush(10)

    def compressed_batch(self) -> None:
        self.n += 1
        codec = self.rng.choice(self.CODECS)
        p, part = self.compressed[codec], self.rng.randint(0, 1)
        ids: list[str] = []
        for m in range(self.rng.randint(2, 8)):
            rows = [f"z{self.n}-{m}-{i}" for i in range(self.rng.randint(1, 20))]
            t = _good_table(rows, 10_000 + self.n * 10 + m)
            p.produce(self.topic, value=json.dumps([{"id": r["id"], "dissimilarities": [float(x) for x in r[
                "dissimilarities"]]} for r in t.to_pylist()]).encode(), headers=poison.JSON_HEADERS, partition=part)
            ids += rows
        assert p.flush(30) == 0
        self.ledger.good("compressed-msg", ids)

    def unreadable_batch(self) -> None:
        import struct

        import kafka.record.default_records as dr
        from kafka import KafkaProducer

        self.n += 1
        how = self.rng.choice(["corrupt", "crc"])
        enc, header = dr.gzip_encode, dr.DefaultRecordBatchBuilder.write_header
        if how == "corrupt":
            dr.gzip_encode = lambda data, *a, **k: b"\x1f\x8b not gzip"
        else:
            def write_header(self_: Any, use_compression_type: bool = True) -> None:
                header(self_, use_compression_type)
                struct.pack_into(">I", self_._buffer, self_.CRC_OFFSET, 12345)

            dr.DefaultRecordBatchBuilder.write_header = write_header
        try:
            p = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=50, retries=0,
                              compression_type="gzip" if how == "corrupt" else None)
            part = self.rng.randint(0, 1)
            futures = [p.send(self.topic, value=b'{"id": "never", "dissimilarities": [1]}' * 30, partition=part)
                       for _ in range(self.rng.randint(1, 4))]
            p.flush(30)
            offsets = [f.get(30).offset for f in futures]
            p.close(5)
        finally:
            dr.gzip_encode, dr.DefaultRecordBatchBuilder.write_header = enc, header
        name = f"unreadable-{self.n}"
        for o in offsets:
            self.where[(part, o)] = (name, o)
            self.ledger.dead[(name, o, None, "undecodable")] = "unreadable-msg"
        self.ledger.records["unreadable-msg"] += len(offsets)

    def oversize(self, producer: Any) -> bool:
        """One oversize message; False when all were sent."""
        if not self.oversize_left:
            return False
        self.n += 1
        case = self.oversize_left.pop(0)
        request, fetch = FAULT_LIMITS
        name, part = f"oversize-{case}-{self.n}", self.rng.randint(0, 1)
        if case == "fetch":  # over the fetch limit: refused unread, as one dead letter
            ids = [f"f{self.n}-{i}" for i in range(8000)]
            t = _good_table(ids, self.n)
            value = json.dumps([{"id": r["id"], "dissimilarities": [float(x) for x in r["dissimilarities"]]}
                                for r in t.to_pylist()]).encode()
            assert len(value) > fetch
            headers, outcome = poison.JSON_HEADERS, (None, "too_large")
        elif case == "undecodable":  # its dead letter (bytes + headers) over the produce limit
            value, headers, outcome = b"{" + b"not json " * (request // 9 - 40), poison.JSON_HEADERS, (
                None, "undecodable")
        elif case == "output":  # a good row no output message can hold: Parquet has it, the topic refuses it
            rid = f"huge-{self.n}-" + "x" * 1_200_000
            value, headers = poison.encode_arrow(_good_table([rid], self.n)), poison.ARROW_HEADERS
            self.refused_outputs.add(rid)
            self.ledger.good("oversize-msg", [rid])
            producer.send(self.topic, key=b"huge", value=value, headers=headers, partition=part).get(30)
            return True
        else:  # a row whose dead letter, as JSON text, is over the produce limit
            import numpy as np

            t = pa.table({"id": [f"long-{self.n}"], "dissimilarities": pa.array(
                [np.random.default_rng(self.n).random(70_000).tolist()], pa.list_(pa.float64()))})
            value, headers, outcome = poison.encode_arrow(t), poison.ARROW_HEADERS, (0, "wrong_length")
        md = producer.send(self.topic, key=case.encode(), value=value, headers=headers, partition=part).get(30)
        self.where[(md.partition, md.offset)] = (name, 0)
        self.ledger.dead[(name, 0, *outcome)] = "oversize-msg"
        self.ledger.records["oversize-msg"] += 1
        return True


class _KafkaFeed:
    """The Kafka soak's producer thread: good messages, the poison corpus (or transport faults), into the ledger."""

    def __init__(self, producer: Any, topic: str, ledger: Ledger, where: dict[tuple[int, int], tuple[str, int]],
                 rng: random.Random, kinds: list[poison.Kind], extra: TransportFaults | None, stop: threading.Event,
                 errors: list[BaseException]) -> None:
        self.producer, self.topic, self.ledger, self.where, self.rng = producer, topic, ledger, where, rng
        self.kinds, self.extra, self.stop, self.errors = kinds, extra, stop, errors

    def run(self) -> None:
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                pick = self.rng.random()
                if self.extra is not None and pick >= 0.45:
                    if pick < 0.75:
                        self.extra.compressed_batch()
                    elif pick < 0.87 or not self.extra.oversize(self.producer):
                        self.extra.unreadable_batch()
                elif pick < 0.5 or not self.kinds:
                    self._good(n)
                else:
                    self._poison(self.kinds.pop(0))
                self.stop.wait(self.rng.uniform(0.01, 0.1))
        except BaseException as exc:  # reported by the soak
            self.errors.append(exc)

    def _good(self, n: int) -> None:
        """One message of good rows, as Arrow IPC or as JSON."""
        ids = [f"m{n}-{i}" for i in range(self.rng.randint(1, 120))]
        t = _good_table(ids, n)
        if self.rng.random() < 0.5:
            value = poison.encode_arrow(t)
            headers = poison.ARROW_HEADERS
        else:
            value = json.dumps([{"id": r["id"], "dissimilarities": [float(x) for x in r["dissimilarities"]]}
                                for r in t.to_pylist()]).encode()
            headers = poison.JSON_HEADERS
        self.producer.send(self.topic, key=ids[0].encode(), value=value, headers=headers).get(30)
        self.ledger.good("good-msg", ids)

    def _poison(self, kind: poison.Kind) -> None:
        """The messages of one poison kind, on one partition, and their expected outcomes."""
        assert kind.messages is not None
        part = self.rng.randint(0, 1)
        for unit, (value, headers) in enumerate(kind.messages):
            md = self.producer.send(self.topic, key=kind.name.encode(), value=value, headers=headers,
                                    partition=part).get(30)
            self.where[(md.partition, md.offset)] = (kind.name, unit)
        for o in kind.kafka_outcomes:
            if o.reason == poison.EMBEDDED:
                assert o.id is not None
                self.ledger.ids[o.id] = "poison-msg"
            else:
                self.ledger.dead[(kind.name, o.unit, o.row, o.reason)] = "poison-msg"
        self.ledger.records["poison-msg"] += len(kind.kafka_outcomes)


class _DeadLetterReader:
    """Reads ``<topic>.dlq`` from the start: the dead letters by (kind, unit, row, reason), and what faults check."""

    def __init__(self, bootstrap: str, topic: str, where: dict[tuple[int, int], tuple[str, int]],
                 faults: TransportFaults | None) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.where, self.faults = where, faults
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      max_partition_fetch_bytes=32 << 20, fetch_max_bytes=64 << 20)
        tps = [TopicPartition(f"{topic}.dlq", 0)]
        self.consumer.assign(tps)
        self.consumer.seek_to_beginning(*tps)
        self.dead_keys: Counter[tuple[Any, ...]] = Counter()
        self.quarantined: set[str] = set()
        self.refused: Counter[str] = Counter()  # output rows refused by the output topic (no coordinates), by id
        self.unfit: list[str] = []  # dead letters over the produce limit
        self.kept_in: set[str] = set()  # the files cut dead letters name (checked at the end: published at the commit)

    def read(self) -> None:
        for recs in self.consumer.poll(timeout_ms=200).values():
            for r in recs:
                h = {k: v.decode("utf-8", "replace") for k, v in r.headers}
                if self.faults is not None and self._refused_output(r, h, self.faults):
                    continue
                p, o = int(h.get("streamembed-source-partition", -1)), int(h.get("streamembed-source-offset", -1))
                row = h.get("streamembed-source-row")
                reason = h["streamembed-error-reason"]
                if reason == "quarantined" and "streamembed-id" in h:
                    self.quarantined.add(h["streamembed-id"])
                other = f"q:{p}/{o}" if reason == "quarantined" else f"?{p}/{o}"
                self.dead_keys[(*self.where.get((p, o), (other, -1)), None if row is None else int(row), reason)] += 1

    def _refused_output(self, r: Any, h: dict[str, str], faults: TransportFaults) -> bool:
        """Check a dead letter's size and cut; True for an output row the output topic refused (counted here)."""
        from streamembed.kafka.limits import FULL_RECORD_HEADER, TRUNCATED_HEADER

        size = len(r.value or b"") + len(r.key or b"") + sum(len(k) + len(v) for k, v in r.headers)
        if size > FAULT_LIMITS[0] or (TRUNCATED_HEADER in h and FULL_RECORD_HEADER not in h):
            self.unfit.append(f"offset {r.offset}: {size} bytes, headers {sorted(h)}")
        if FULL_RECORD_HEADER in h:
            self.kept_in.add(h[FULL_RECORD_HEADER])
        rid = h.get("streamembed-id", "")
        if "streamembed-source-offset" not in h and h["streamembed-error-reason"] == "too_large":
            match = [x for x in faults.refused_outputs if x.startswith(rid.split("...(")[0])]
            if match:
                self.refused[match[0]] += 1
                return True
        return False

    def close(self) -> None:
        self.consumer.close()


def kafka_soak(workdir: Path, bootstrap: str, topic: str, out_topic: str, seconds: float = 40.0, seed: int = 0,
               drain_seconds: float = 90.0, log: Callable[[str], None] = lambda s: None,
               faults: bool = False) -> SoakResult:
    """The same soak on a consumer-group member; ``topic`` (2 partitions) and ``<topic>.dlq`` must exist.

    ``faults``: the transport faults (:class:`TransportFaults`) instead of the poison corpus, at the
    :data:`FAULT_LIMITS`; every dead letter must fit the produce limit, and a cut one must name an existing file.
    """
    from kafka import KafkaProducer

    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    model = workdir / "model.npz"
    fitted_model().save(model)
    out = workdir / "out"
    env = {
        "STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_MODEL__PATH": str(model),
        "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "STREAMEMBED_KAFKA__INPUT_TOPIC": topic,
        "STREAMEMBED_KAFKA__GROUP_ID": f"soak-{topic}", "STREAMEMBED_KAFKA__SESSION_TIMEOUT_MS": "6000",
        "STREAMEMBED_KAFKA__HEARTBEAT_INTERVAL_MS": "2000", "STREAMEMBED_KAFKA__STARTUP_TIMEOUT_SECONDS": "20",
        "STREAMEMBED_OUTPUT__KAFKA_TOPIC": out_topic, "STREAMEMBED_OUTPUT__ROOT": str(out),
        "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5", "STREAMEMBED_SOURCE__BATCH_ROWS": "256",
        "STREAMEMBED_SOURCE__MAX_BLOCK_ROWS": str(poison.MAX_BLOCK_ROWS), "STREAMEMBED_METRICS__ENABLED": "false",
        "STREAMEMBED_LOGGING__FORMAT": "json", "STREAMEMBED_DRIFT__ENABLED": "false",
    }
    if faults:
        env.update(STREAMEMBED_KAFKA__MAX_REQUEST_SIZE=str(FAULT_LIMITS[0]),
                   STREAMEMBED_KAFKA__MAX_PARTITION_FETCH_BYTES=str(FAULT_LIMITS[1]))
    ledger = Ledger()
    kinds = [] if faults else _soak_kinds("kafka")
    where: dict[tuple[int, int], tuple[str, int]] = {}
    stop = threading.Event()
    errors: list[BaseException] = []
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=32 << 20, linger_ms=5)
    extra = TransportFaults(bootstrap, topic, ledger, where, rng) if faults else None
    feed = _KafkaFeed(producer, topic, ledger, where, rng, kinds, extra, stop, errors)
    dlq = _DeadLetterReader(bootstrap, topic, where, extra if faults else None)
    dead_keys, quarantined, refused = dlq.dead_keys, dlq.quarantined, dlq.refused
    read_dlq = dlq.read

    read_committed, close_committed = _committed_offsets(bootstrap, env["STREAMEMBED_KAFKA__GROUP_ID"], topic)
    watch = CheckpointWatch(read_committed)
    runs = Runs(workdir, env)
    feeder = threading.Thread(target=feed.run, daemon=True)
    watcher = threading.Thread(target=watch.run, daemon=True)
    kills = 0
    t_start = time.monotonic()
    t_drain = t_start
    try:
        feeder.start()
        watcher.start()
        runs.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(2.0, 8.0))  # a member needs a few seconds to join the group
            runs.check()
            watch.sample()
            runs.kill()
            kills += 1
            runs.start()
        stop.set()
        feeder.join(30)
        t_drain = time.monotonic()
        deadline = time.monotonic() + drain_seconds
        while time.monotonic() < deadline:
            runs.check()
            read_dlq()
            ids, _ = _read_parquet_ids(out / "embeddings", "part-*.parquet")
            q_places = {k[:3] for k in dead_keys if k[3] == "quarantined"}
            if set(ledger.ids) <= set(ids) | quarantined and all(
                    k in dead_keys or k[:3] in q_places for k in ledger.dead):
                break
            time.sleep(0.3)
        time.sleep(1.0)
        runs.stop()
        read_dlq()
        read_dlq()
    finally:
        stop.set()
        watch.stop.set()
        runs.close()
        producer.close(10)
        if extra is not None:
            extra.close()
        dlq.close()
        feeder.join(30)
        watcher.join(30)
    watch.sample()
    close_committed()
    if errors:
        raise errors[0]
    ids, bad_out = _read_parquet_ids(out / "embeddings", "part-*.parquet")
    label = "kill -9 at random moments, Kafka (2 partitions)" + (", transport faults" if faults else "")
    rows, problems, details = _account(ledger, Counter(ids), dead_keys, quarantined, runs.starts,
                                       len(runs.crashes), label)
    problems += [f"unreadable output: {b}" for b in bad_out]
    problems += [f"a dead letter that does not fit: {u}" for u in dlq.unfit]
    problems += [f"a cut dead letter names a file that does not exist: {f}" for f in sorted(dlq.kept_in)
                 if not Path(f).exists()]
    if extra is not None:
        missing = sorted(x[:20] for x in extra.refused_outputs if not refused[x])
        if missing:
            problems.append(f"output rows neither on the output topic nor refused as dead letters: {missing}")
    temps = [str(p.relative_to(out)) for p in out.rglob("*") if p.name.endswith(".tmp")]
    if temps:
        problems.append(f"temporary files left: {temps}")
    if watch.backwards:
        problems.append(f"the checkpoint moved backwards: {watch.backwards[:5]}")
    problems += [f"crash: {c}" for c in runs.crashes]
    details.update(kills=kills, starts=runs.starts, checkpoint_samples=watch.samples,
                   poison_kinds=0 if faults else len(_soak_kinds("kafka")) - len(kinds),
                   dead_letters=sum(dead_keys.values()), refused_outputs=sum(refused.values()),
                   parquet_duplicates=sum(c - 1 for c in Counter(ids).values() if c > 1),
                   seconds=round(time.monotonic() - t_start, 1), drain_seconds=round(time.monotonic() - t_drain, 1))
    log(f"kafka soak: {details}")
    return SoakResult(rows, problems, details)


# ----------------------------------------------------------------------------- the table


def table(rows: list[dict[str, Any]]) -> str:
    cols = ["fault", "runs", "records in", "lost", "duplicated", "crashes", "quarantined"]
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:,}" if isinstance(r[c], int) else str(r[c]) for c in cols) + " |")
    return "\n".join(lines)


def _failover(workdir: Path, runs: int) -> SoakResult:
    from tests.soak_failover import failover_soak
    from tools.broker import TansuBroker

    broker = TansuBroker()
    broker.start()
    try:
        topic = f"failover-{os.getpid()}"
        broker.create_topic(topic, partitions=2)
        broker.create_topic(f"{topic}.dlq")
        res = failover_soak(workdir, broker.bootstrap, topic, runs=runs, log=lambda s: print(s, file=sys.stderr))
    finally:
        broker.stop()
    return SoakResult(res.rows, res.problems, res.details)


def _attacks(workdir: Path) -> SoakResult:
    """Issue 35's attacks (tests/attacks.py), one table row each; a broker of their own for those that need one."""
    import itertools
    import socket

    from tests import attacks
    from tools.broker import TansuBroker

    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    results = []
    for n, attack in sorted(attacks.ATTACKS.items()):
        (workdir / f"attack-{n}").mkdir(parents=True, exist_ok=True)
        results.append(attack(workdir / f"attack-{n}"))
    broker = TansuBroker()
    broker.start()
    try:
        counter = itertools.count()

        def fresh() -> str:
            name = f"models-{os.getpid()}-{next(counter)}"
            broker.create_topic(name, config={"cleanup.policy": "compact"})
            return name

        for n, broker_attack in sorted(attacks.BROKER_ATTACKS.items()):
            (workdir / f"attack-{n}-topic").mkdir(parents=True, exist_ok=True)
            results.append(broker_attack(workdir / f"attack-{n}-topic", broker.bootstrap, fresh))
    finally:
        broker.stop()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    own = TansuBroker(port=port)
    own.start()
    try:
        (workdir / "attack-5").mkdir(parents=True, exist_ok=True)
        results.append(attacks.attack_5(workdir / "attack-5", port, own.start, own.stop, lambda t: own.create_topic(t)))
    finally:
        own.stop()
    (workdir / "attack-8").mkdir(parents=True, exist_ok=True)
    results.append(attacks.attack_8(workdir / "attack-8"))
    for res in sorted(results, key=lambda r: r.number):
        rows.append(res.row())
        problems += [f"attack #{res.number}: {p}" for p in res.problems if not p.startswith("skip:")]
    return SoakResult(rows, problems, {})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("directory", "shared", "kafka", "kafka-faults", "failover", "attacks", "both",
                                       "all"),
                    default="directory",
                    help="directory; shared (two daemons, one output directory, hostile names and links); kafka; "
                         "kafka-faults (codecs, unreadable batches, oversize); failover (kill -9 of one of two "
                         "replicas, timed); attacks (issue 35's); both (directory and kafka); all")
    ap.add_argument("--runs", type=int, default=5, help="failover mode: kill -9 rounds")
    ap.add_argument("--seconds", type=float, default=40.0, help="how long input arrives and kills happen (per mode)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, outputs)")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="streamembed-soak-"))
    try:
        if args.mode in ("directory", "both", "all"):
            res = directory_soak(work / "directory", args.seconds, args.seed, log=lambda s: print(s, file=sys.stderr))
            rows += res.rows
            problems += res.problems
        if args.mode in ("shared", "all"):
            res = shared_output_soak(work / "shared", args.seconds, args.seed, log=lambda s: print(s, file=sys.stderr))
            rows += res.rows
            problems += res.problems
        for faults in (False, True):
            wanted = args.mode in ("kafka", "both", "all") or (args.mode == "kafka-faults" and faults)
            if not wanted:
                continue
            from tools.broker import TansuBroker

            broker = TansuBroker()  # one per soak: Tansu's memory storage never frees what was sent
            broker.start()
            try:
                topic = f"soak-{os.getpid()}{'-faults' if faults else ''}"
                broker.create_topic(topic, partitions=2)
                broker.create_topic(f"{topic}.dlq")
                broker.create_topic(f"{topic}-out")
                res = kafka_soak(work / topic, broker.bootstrap, topic, f"{topic}-out", args.seconds, args.seed,
                                 log=lambda s: print(s, file=sys.stderr), faults=faults)
            finally:
                broker.stop()
            rows += res.rows
            problems += res.problems
        if args.mode in ("failover", "all"):
            res_f = _failover(work / "failover", args.runs)
            rows += res_f.rows
            problems += res_f.problems
        if args.mode in ("attacks", "all"):
            res_a = _attacks(work / "attacks")
            rows += res_a.rows
            problems += res_a.problems
    finally:
        if args.keep:
            print(f"work directory: {work}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
