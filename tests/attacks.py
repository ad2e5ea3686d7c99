"""Issue 35's attacks on the daemon as bounded scenarios: each starts what it needs on 127.0.0.1, says what came out.

Every attack is a function ``attack_<n>(workdir, ...) -> AttackResult``: the fault, how many daemon starts it took,
the input records, how many were lost (neither embedded nor a dead letter) or duplicated, the crashes (exits the
attack did not ask for) and the problems found (empty: the attack fails to do harm). The tests
(``tests/e2e/test_attacks.py``, ``tests/kafka/test_attacks_broker.py``) assert that ``problems`` is empty; the soak
(``python -m tests.soak --mode attacks``) prints them as rows of its table.

The attacks need no network but loopback; the Kafka ones a Tansu broker (``tools/broker.py``); each is bounded to
about a minute.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from tests.e2e.cli import clean_env
from tests.stream.helpers import dissimilarities, fitted_model, input_table, objects

__all__ = ["AttackResult", "Proc", "ATTACKS", "BROKER_ATTACKS"]


@dataclass
class AttackResult:
    """What one attack did: a soak table row (``row()``) and the problems (none: the daemon withstood it)."""

    number: int
    fault: str
    runs: int = 0
    records_in: int = 0
    lost: int = 0
    duplicated: int = 0
    crashes: int = 0
    problems: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {"fault": f"attack #{self.number}: {self.fault}", "runs": self.runs, "records in": self.records_in,
                "lost": self.lost, "duplicated": self.duplicated, "crashes": self.crashes, "quarantined": 0}

    def check(self, ok: bool, problem: str) -> bool:
        if not ok:
            self.problems.append(problem)
        return ok


class Proc:
    """``python -m streamembed ARGS`` with ``env`` (STREAMEMBED_* variables), its output in a log file."""

    def __init__(self, workdir: Path, env: dict[str, str], args: Iterable[str] = ("run",), name: str = "daemon",
                 prefix: list[str] | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - the child's log stays open for its lifetime
        self.started = time.monotonic()
        self.proc = subprocess.Popen([*(prefix or []), sys.executable, "-m", "streamembed", *args], cwd=workdir,
                                     env=clean_env(env), stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def records(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if it did not exit within ``timeout`` (it is then killed)."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            rc = None
        self._log.close()
        return rc

    def wait_for(self, pred: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            if not self.alive():
                return pred()
            time.sleep(0.05)
        return False

    def running(self) -> bool:
        """Whether the loop runs (its "running" log line)."""
        return any(r.get("msg") == "running" for r in self.records())


# ----------------------------------------------------------------------------- inputs and outputs


def model_file(workdir: Path, name: str = "model.npz") -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / name
    fitted_model().save(path)
    return path


def write_inputs(indir: Path, files: int, rows: int, tag: str = "r") -> list[str]:
    """``files`` Parquet files of ``rows`` good rows each; returns their ids."""
    indir.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    for f in range(files):
        fid = [f"{tag}{f}-{i}" for i in range(rows)]
        tmp = indir / f".{tag}{f}.parquet.writing"
        pq.write_table(input_table(fid, dissimilarities(objects(rows, seed=100 + f))), tmp)
        os.replace(tmp, indir / f"{tag}{f}.parquet")
        ids += fid
    return ids


def output_ids(directory: Path) -> Counter[str]:
    ids: Counter[str] = Counter()
    for p in sorted(directory.glob("part-*.parquet")) if directory.is_dir() else []:
        ids.update(pq.read_table(p, columns=["id"]).column("id").to_pylist())
    return ids


def directory_env(indir: Path, root: Path, model: Path | str, **more: str) -> dict[str, str]:
    env = {"STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_MODEL__PATH": str(model),
           "STREAMEMBED_DIRECTORY__PATH": str(indir), "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0",
           "STREAMEMBED_DIRECTORY__POLL_SECONDS": "0.05", "STREAMEMBED_OUTPUT__ROOT": str(root),
           "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5", "STREAMEMBED_METRICS__ENABLED": "false",
           "STREAMEMBED_LOGGING__FORMAT": "json", "STREAMEMBED_DRIFT__ENABLED": "false"}
    env.update(more)
    return env


def batch_env(indir: Path, root: Path, model: Path | str, **more: str) -> dict[str, str]:
    return directory_env(indir, root, model, STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE="true", **more)


def account(res: AttackResult, ids: list[str], got: Counter[str]) -> None:
    """Count the attack's records: lost (not in the output) and duplicated."""
    res.records_in += len(ids)
    missing = [i for i in ids if got[i] == 0]
    res.lost += len(missing)
    res.duplicated += sum(max(0, got[i] - 1) for i in ids)
    res.check(not missing, f"{len(missing)} records lost, e.g. {missing[:3]}")


def _exit(res: AttackResult, p: Proc, timeout: float, want: int | tuple[int, ...], what: str) -> int | None:
    rc = p.wait(timeout)
    res.runs += 1
    wanted = (want,) if isinstance(want, int) else want
    if rc not in wanted:
        res.crashes += 1
        res.problems.append(f"{what}: exit {rc}, not {wanted} ({p.log_path.name}): {p.log()[-600:]}")
    return rc


def _refusal(p: Proc) -> str:
    return " ".join(str(r.get("msg", "")) for r in p.records() if r.get("level") == "ERROR") or p.log()[-2000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----------------------------------------------------------------------------- the file-side attacks


def attack_2_file(workdir: Path) -> AttackResult:
    """#2: a checksummed model with ``shift = NaN`` as ``model.path``: refused (exit 2) naming the array."""
    res = AttackResult(2, "a model with a NaN alignment shift (checksum correct) as model.path")
    bad = nan_shift_model(workdir / "nan.npz")
    ids = write_inputs(workdir / "in", 2, 50)
    p = Proc(workdir, batch_env(workdir / "in", workdir / "root", bad))
    if _exit(res, p, 60, 2, "the NaN model") == 2:
        res.check("alignment_shift" in _refusal(p) and "non-finite" in _refusal(p),
                  f"the refusal does not name the NaN array: {_refusal(p)}")
    res.records_in = len(ids)
    res.check(not output_ids(workdir / "root" / "embeddings"), "rows were embedded with the NaN model")
    return res


def nan_shift_model(path: Path) -> Path:
    """A model file whose alignment shift is NaN, with a checksum that verifies (attack #2)."""
    from streamembed.model_io import save_model

    model = fitted_model().model_
    d = int(model.n_components)
    save_model(model.aligned(np.eye(d), np.full(d, np.nan)), path)
    return path


def attack_4(workdir: Path) -> AttackResult:
    """#4: ``cp -a root1 root2`` (the writer id with it), one shared embeddings directory: the copy is refused."""
    res = AttackResult(4, "a root copied with its writer id (cp -a), one shared output directory")
    model = model_file(workdir)
    shared = workdir / "shared"
    ids1 = write_inputs(workdir / "in1", 3, 100)
    write_inputs(workdir / "in2", 3, 100, tag="r")  # the same file names (and ids) in the other input
    env1 = batch_env(workdir / "in1", workdir / "root1", model, STREAMEMBED_OUTPUT__EMBEDDINGS_DIR=str(shared))
    _exit(res, Proc(workdir, env1), 60, 0, "the first root")
    before = {p.name: p.stat().st_mtime_ns for p in shared.glob("part-*")}
    subprocess.run(["cp", "-a", str(workdir / "root1"), str(workdir / "root2")], check=True)
    env2 = batch_env(workdir / "in2", workdir / "root2", model, STREAMEMBED_OUTPUT__EMBEDDINGS_DIR=str(shared))
    p = Proc(workdir, env2)
    if _exit(res, p, 60, 2, "the copied root") == 2:
        res.check("was copied from another root" in _refusal(p), f"the refusal does not say why: {_refusal(p)}")
    after = {p.name: p.stat().st_mtime_ns for p in shared.glob("part-*")}
    res.check(after == before, "the copy overwrote the first root's output files")
    account(res, ids1, output_ids(shared))
    return res


def attack_6(workdir: Path) -> AttackResult:
    """#6: ``Host: evil.example`` on the ops server (DNS rebinding): 421 on every route, 200 for localhost."""
    res = AttackResult(6, "Host: evil.example on /map.json and /metrics (DNS rebinding)")
    model = model_file(workdir)
    ids = write_inputs(workdir / "in", 2, 50)
    port_file = workdir / "port"
    env = directory_env(workdir / "in", workdir / "root", model, STREAMEMBED_METRICS__ENABLED="true",
                        STREAMEMBED_METRICS__PORT="0", STREAMEMBED_METRICS__PORT_FILE=str(port_file))
    p = Proc(workdir, env)
    try:
        if not res.check(p.wait_for(lambda: port_file.exists() and port_file.read_text().strip() != "", 30),
                         "the ops server did not start"):
            return res
        port = int(port_file.read_text())
        p.wait_for(lambda: sum(output_ids(workdir / "root" / "embeddings").values()) >= len(ids), 30)
        for path in ("/map.json", "/metrics", "/healthz", "/map"):
            for _ in range(2):
                status = _http_status(port, path, "evil.example")
                res.check(status == 421, f"{path} with Host: evil.example answered {status}, not 421")
        res.check(_http_status(port, "/metrics", f"localhost:{port}") == 200, "/metrics refused localhost")
    finally:
        p.signal(signal.SIGTERM)
        _exit(res, p, 30, 0, "SIGTERM")
    account(res, ids, output_ids(workdir / "root" / "embeddings"))
    return res


def _http_status(port: int, path: str, host: str) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


#: Attack #7's settings, each refused at start with its range.
SETTINGS_7 = {"STREAMEMBED_OUTPUT__ROW_GROUP_ROWS": "99999999999999999999",
              "STREAMEMBED_METRICS__REQUEST_TIMEOUT_SECONDS": "1e-320",
              "STREAMEMBED_METRICS__WEDGED_AFTER_SECONDS": "1e-320"}


def attack_7(workdir: Path) -> AttackResult:
    """#7: out-of-range settings: each refused at start (exit 2) with its range; a correct start embeds it all."""
    res = AttackResult(7, "row_group_rows = 1e20, request_timeout_seconds and wedged_after_seconds = 1e-320")
    model = model_file(workdir)
    ids = write_inputs(workdir / "in", 3, 100)
    for var, value in SETTINGS_7.items():
        p = Proc(workdir, batch_env(workdir / "in", workdir / "root", model, **{var: value}))
        if _exit(res, p, 30, 2, var) == 2:
            res.check("out of range (must be" in _refusal(p), f"{var}: the refusal states no range: {_refusal(p)}")
    _exit(res, Proc(workdir, batch_env(workdir / "in", workdir / "root", model)), 60, 0, "the corrected start")
    account(res, ids, output_ids(workdir / "root" / "embeddings"))
    return res


def attack_9(workdir: Path) -> AttackResult:
    """#9: binary and deeply nested config files, a deeply nested checkpoint, a non-UTF-8 writer-id, /dev/zero and a
    FIFO as --config and model.path, ``kafka.client = {"linger_ms": "soon"}``: each refused (exit 2), naming the file
    or key, within seconds."""
    res = AttackResult(9, "binary/deep TOML, deep checkpoint.json, non-UTF-8 writer-id, /dev/zero and FIFOs, "
                          "kafka.client linger_ms = 'soon'")
    model = model_file(workdir)
    ids = write_inputs(workdir / "in", 2, 50)
    root = workdir / "root"
    fifo = workdir / "fifo"
    os.mkfifo(fifo)
    (workdir / "binary.toml").write_bytes(bytes(range(256)) * 8)
    (workdir / "deep.toml").write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    base = batch_env(workdir / "in", root, model)
    cases: list[tuple[str, dict[str, str], list[str], str]] = [
        ("binary config", base, ["--config", str(workdir / "binary.toml")], "binary.toml"),
        ("deeply nested config", base, ["--config", str(workdir / "deep.toml")], "deep.toml"),
        ("/dev/zero as --config", base, ["--config", "/dev/zero"], "/dev/zero"),
        ("a FIFO as --config", base, ["--config", str(fifo)], "fifo"),
        ("/dev/zero as model.path", {**base, "STREAMEMBED_MODEL__PATH": "/dev/zero"}, [], "/dev/zero"),
        ("a FIFO as model.path", {**base, "STREAMEMBED_MODEL__PATH": str(fifo)}, [], "fifo"),
        ("kafka.client linger_ms = 'soon'", {**base, "STREAMEMBED_KAFKA__CLIENT": '{"linger_ms": "soon"}'}, [],
         "kafka.client.linger_ms"),
    ]
    for what, env, args, named in cases:
        p = Proc(workdir, env, ["run", *args])
        if _exit(res, p, 30, 2, what) == 2:
            res.check(named in p.log(), f"{what}: the refusal does not name {named}: {p.log()[-400:]}")
    root.mkdir(exist_ok=True)
    for what, name, data, named in (("a deeply nested checkpoint", "checkpoint.json",
                                     b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
                                    ("a non-UTF-8 writer-id", "writer-id", b"\xff\xfe\x00bad", "writer-id")):
        (root / name).write_bytes(data)
        p = Proc(workdir, base)
        if _exit(res, p, 30, 2, what) == 2:
            res.check(named in _refusal(p), f"{what}: the refusal does not say {named!r}: {_refusal(p)}")
        (root / name).unlink()
    _exit(res, Proc(workdir, base), 60, 0, "the corrected start")
    account(res, ids, output_ids(root / "embeddings"))
    return res


def attack_10(workdir: Path) -> AttackResult:
    """#10: SIGUSR1 0.3 and 0.8 s after start, SIGINT at 0.8 s, SIGHUP while running, SIGTERM while waiting for
    brokers: never killed by a signal; a stop exits 0 having flushed what it read."""
    res = AttackResult(10, "SIGUSR1 at 0.3 and 0.8 s, SIGINT at 0.8 s, SIGHUP running, SIGTERM in a broker wait")
    model = model_file(workdir)
    ids = write_inputs(workdir / "in", 2, 50)
    gen = {"STREAMEMBED_OUTPUT__ROOT": str(workdir / "gen"), "STREAMEMBED_METRICS__ENABLED": "false",
           "STREAMEMBED_LOGGING__FORMAT": "json", "STREAMEMBED_GENERATOR__RATE": "2000",
           "STREAMEMBED_MODEL__N_LANDMARKS": "30", "STREAMEMBED_MODEL__FIT_SAMPLE": "300"}
    p = Proc(workdir, gen)
    for at in (0.3, 0.8):
        time.sleep(max(0.0, p.started + at - time.monotonic()))
        p.signal(signal.SIGUSR1)
    p.wait_for(p.running, 60)
    res.check(p.alive(), f"SIGUSR1 during start-up ended the daemon (exit {p.proc.poll()})")
    p.signal(signal.SIGTERM)
    if _exit(res, p, 60, 0, "SIGTERM after two early SIGUSR1") == 0:
        res.check(any("refit" in str(r.get("msg", "")) for r in p.records()), "the early refit request was lost")
    p = Proc(workdir, gen)
    time.sleep(max(0.0, p.started + 0.8 - time.monotonic()))
    p.signal(signal.SIGINT)
    _exit(res, p, 60, 0, "SIGINT 0.8 s after start")
    p = Proc(workdir, directory_env(workdir / "in", workdir / "root", model))
    p.wait_for(lambda: sum(output_ids(workdir / "root" / "embeddings").values()) >= len(ids)
               or (workdir / "root" / "checkpoint.json").exists(), 30)
    p.signal(signal.SIGHUP)
    _exit(res, p, 60, 0, "SIGHUP while running")
    account(res, ids, output_ids(workdir / "root" / "embeddings"))
    kafka = {"STREAMEMBED_SOURCE__KIND": "kafka", "STREAMEMBED_MODEL__PATH": str(model),
             "STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{_free_port()}",
             "STREAMEMBED_KAFKA__INPUT_TOPIC": "nowhere", "STREAMEMBED_OUTPUT__ROOT": str(workdir / "k"),
             "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_LOGGING__FORMAT": "json",
             "STREAMEMBED_KAFKA__STARTUP_TIMEOUT_SECONDS": "120"}
    p = Proc(workdir, kafka)
    p.wait_for(lambda: any("retrying" in str(r.get("msg", "")) or "connecting" in str(r.get("msg", ""))
                           for r in p.records()), 30)
    time.sleep(1.0)
    t0 = time.monotonic()
    p.signal(signal.SIGTERM)
    _exit(res, p, 30, 0, "SIGTERM while waiting for the brokers")
    res.check(time.monotonic() - t0 < 15, f"SIGTERM in a broker wait took {time.monotonic() - t0:.0f} s")
    return res


def attack_11(workdir: Path) -> AttackResult:
    """#11: a full ``models/`` during a refit (a 64 KiB tmpfs, in a user and mount namespace), weakening settings,
    a symlinked checkpoint.json and streamembed.pid."""
    res = AttackResult(11, "full models/ during a refit, host 0.0.0.0 and mode 0666, linked checkpoint and pid")
    model = model_file(workdir)
    ids = write_inputs(workdir / "in", 2, 50)
    root = workdir / "root"
    env = batch_env(workdir / "in", root, model, STREAMEMBED_METRICS__ENABLED="true",
                    STREAMEMBED_METRICS__HOST="0.0.0.0", STREAMEMBED_METRICS__PORT="0",
                    STREAMEMBED_OUTPUT__FILE_MODE="0666")
    p = Proc(workdir, env)
    if _exit(res, p, 60, 0, "weakening settings") == 0:
        warned = [str(r.get("msg")) for r in p.records() if r.get("level") == "WARNING"]
        res.check(any("metrics.host = '0.0.0.0'" in w for w in warned), "metrics.host = 0.0.0.0 went unmentioned")
        res.check(any("output.file_mode = '0666'" in w for w in warned), "output.file_mode = 0666 went unmentioned")
    account(res, ids, output_ids(root / "embeddings"))
    (workdir / "elsewhere.json").write_text("{}")
    (root / "checkpoint.json").unlink()
    os.symlink(workdir / "elsewhere.json", root / "checkpoint.json")
    p = Proc(workdir, batch_env(workdir / "in", root, model))
    if _exit(res, p, 60, 2, "a symlinked checkpoint.json") == 2:
        res.check("symbolic link" in _refusal(p), f"the refusal does not name the link: {_refusal(p)}")
    (root / "checkpoint.json").unlink()
    os.symlink(workdir / "elsewhere.pid", root / "streamembed.pid")
    ids2 = write_inputs(workdir / "in", 1, 50, tag="s")
    _exit(res, Proc(workdir, batch_env(workdir / "in", root, model)), 60, 0, "a symlinked streamembed.pid")
    res.check(not (workdir / "elsewhere.pid").exists(), "the pid file was written through the link")
    account(res, ids2, output_ids(root / "embeddings"))
    res.records_in -= len(ids2)  # (the same records counted once: the second start re-reads them all)
    _full_models_refit(workdir / "full", res)
    return res


def _full_models_refit(workdir: Path, res: AttackResult) -> None:
    """A manual refit whose models/ is a full 64 KiB tmpfs: the refit fails with a reason, the stream goes on."""
    workdir.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {workdir}"],
                           capture_output=True)
    if probe.returncode != 0:
        res.problems.append("skip: no user and mount namespaces here (unshare -rm) to fill a models/ directory")
        return
    models = workdir / "models"
    models.mkdir()
    script = (f"mount -t tmpfs -o size=64k tmpfs {models} && exec \"$@\"")
    gen = {"STREAMEMBED_OUTPUT__ROOT": str(workdir / "root"), "STREAMEMBED_METRICS__ENABLED": "false",
           "STREAMEMBED_LOGGING__FORMAT": "json", "STREAMEMBED_GENERATOR__RATE": "2000",
           "STREAMEMBED_REFIT__MODEL_DIR": str(models), "STREAMEMBED_MODEL__N_LANDMARKS": "30",
           "STREAMEMBED_MODEL__FIT_SAMPLE": "300", "STREAMEMBED_DRIFT__RESERVOIR_OBJECTS": "2000"}
    p = Proc(workdir, gen, prefix=["unshare", "-rm", "sh", "-c", script, "sh"])
    p.wait_for(p.running, 60)
    time.sleep(2.0)
    p.signal(signal.SIGUSR1)
    failed = p.wait_for(lambda: any(r.get("msg", "").startswith("refit failed") for r in p.records()), 30)
    time.sleep(1.0)
    res.check(failed and p.alive(), f"a refit into a full models/ did not fail alone (alive: {p.alive()})")
    before = _records_in(p)
    time.sleep(1.5)
    res.check(_records_in(p) >= before, "the stream stopped after the failed refit")
    p.signal(signal.SIGTERM)
    _exit(res, p, 60, 0, "SIGTERM after the failed refit")


def _records_in(p: Proc) -> int:
    return max((int(r.get("records_in", 0)) for r in p.records() if "records_in" in r), default=0)


# ----------------------------------------------------------------------------- the model topic (broker)


def bomb_bytes(inflated: int = 512 << 20) -> bytes:
    """A ~0.5 MB zip whose one ``.npy`` entry inflates to ``inflated`` bytes of zeros (attack #1's record)."""
    import io

    header = np.lib.format.header_data_from_array_1_0(np.zeros(0, np.uint8))
    header["shape"] = (inflated,)
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, header)
    buf = io.BytesIO()
    info = zipfile.ZipInfo("eigenvectors.npy")
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(buf, "w") as zf, zf.open(info, "w", force_zip64=True) as entry:
        entry.write(head.getvalue())
        chunk = bytes(16 << 20)
        for _ in range(inflated // len(chunk)):
            entry.write(chunk)
    return buf.getvalue()


def publish_record(bootstrap: str, topic: str, value: bytes, headers: list[tuple[str, bytes]],
                   key: bytes = b"streamembed") -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=64 << 20)
    try:
        producer.send(topic, key=key, value=value, headers=headers).get(30)
    finally:
        producer.close(10)


def attack_1(workdir: Path, bootstrap: str, topic: str) -> AttackResult:
    """#1: a 0.5 MB record on the model topic that inflates to 512 MiB, no lineage header, a correct sha256 (and
    again with the fleet's lineage): skipped with a WARNING before anything is inflated, at every start."""
    import hashlib

    res = AttackResult(1, "a model record that inflates 0.5 MB to 512 MiB (a decompression bomb)")
    model = model_file(workdir)
    lineage = fitted_model().model_.lineage
    bomb = bomb_bytes()
    sha = hashlib.sha256(bomb).hexdigest().encode()
    publish_record(bootstrap, topic, bomb, [("model_version", b"2"), ("sha256", sha)])
    publish_record(bootstrap, topic, bomb, [("model_version", b"3"), ("sha256", sha),
                                            ("model_lineage", lineage.encode())])
    for start in range(2):
        ids = write_inputs(workdir / "in", 2, 50, tag=f"s{start}-")
        env = batch_env(workdir / "in", workdir / "root", model, STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS=bootstrap,
                        STREAMEMBED_KAFKA__MODEL_TOPIC=topic)
        p = Proc(workdir, env, prefix=[sys.executable, "-c", _PEAK_RSS])
        if _exit(res, p, 90, 0, f"start {start + 1} with the bomb on the model topic") == 0:
            skipped = [r for r in p.records() if "skipped" in str(r.get("msg", ""))]
            res.check(len(skipped) >= 1, "the bomb records were not reported skipped")
        peaks = [int(line.split()[1]) for line in p.log().splitlines() if line.startswith("peak-rss ")]
        res.check(bool(peaks) and peaks[0] < 400 << 20,
                  f"start {start + 1} reached {peaks[0] >> 20 if peaks else '?'} MiB: the bomb was inflated")
        account(res, ids, output_ids(workdir / "root" / "embeddings"))
    return res


#: Runs its arguments as a child and prints the child's peak resident memory ("peak-rss <bytes>").
_PEAK_RSS = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
             "print('peak-rss', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, flush=True); "
             "sys.exit(rc)")


def attack_2_topic(workdir: Path, bootstrap: str, topic: str) -> AttackResult:
    """#2: a checksummed NaN-shift model of the fleet's lineage published as version 2: refused, v1 kept."""
    import hashlib

    from streamembed.model_io import model_to_bytes

    res = AttackResult(2, "a NaN-shift model of the fleet's own lineage published as version 2")
    model = model_file(workdir)
    m = fitted_model().model_
    d = int(m.n_components)
    nan_v2 = m.with_version(2).aligned(np.eye(d), np.full(d, np.nan))
    value = model_to_bytes(nan_v2)
    publish_record(bootstrap, topic, value, [("model_version", b"2"), ("model_lineage", m.lineage.encode()),
                                             ("sha256", hashlib.sha256(value).hexdigest().encode())])
    ids = write_inputs(workdir / "in", 3, 50)
    env = batch_env(workdir / "in", workdir / "root", model, STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS=bootstrap,
                    STREAMEMBED_KAFKA__MODEL_TOPIC=topic)
    p = Proc(workdir, env)
    _exit(res, p, 90, 0, "the fleet with a NaN model on the topic")
    got = output_ids(workdir / "root" / "embeddings")
    account(res, ids, got)
    tables = [pq.read_table(f) for f in sorted((workdir / "root" / "embeddings").glob("part-*.parquet"))]
    versions = {v for t in tables for v in t.column("model_version").to_pylist()}
    ys = [np.asarray(t.column(c).to_numpy(zero_copy_only=False), float) for t in tables for c in t.column_names
          if c.startswith("y")]
    res.check(versions == {1}, f"outputs of model versions {versions}, not only 1")
    res.check(all(np.isfinite(y).all() for y in ys), "an output coordinate is NaN")
    return res


def attack_3(workdir: Path, bootstrap: str, topic_of: Callable[[], str], trials: int = 3) -> AttackResult:
    """#3: two replicas with the same model.path start together on a fresh model topic: both start on one map."""
    res = AttackResult(3, "two replicas with one model.path starting together on a fresh model topic")
    model = model_file(workdir)
    for t in range(trials):
        topic = topic_of()
        procs = []
        for r in range(2):
            env = directory_env(workdir / f"in{t}{r}", workdir / f"root{t}{r}", model,
                                STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS=bootstrap, STREAMEMBED_KAFKA__MODEL_TOPIC=topic)
            (workdir / f"in{t}{r}").mkdir(parents=True, exist_ok=True)
            procs.append(Proc(workdir, env, name=f"replica{t}{r}"))
        for r, p in enumerate(procs):
            res.check(p.wait_for(p.running, 90), f"trial {t}: replica {r} did not start: {_refusal(p)}")
        for p in procs:
            p.signal(signal.SIGTERM)
        for r, p in enumerate(procs):
            _exit(res, p, 60, 0, f"trial {t}: replica {r}")
    return res


ATTACKS: dict[int, Callable[[Path], AttackResult]] = {2: attack_2_file, 4: attack_4, 6: attack_6, 7: attack_7,
                                                     9: attack_9, 10: attack_10, 11: attack_11}
#: The attacks that need the broker: (workdir, bootstrap, a fresh topic's name) -> result.
BROKER_ATTACKS: dict[int, Callable[[Path, str, Callable[[], str]], AttackResult]] = {
    1: lambda w, b, t: attack_1(w, b, t()),
    2: lambda w, b, t: attack_2_topic(w, b, t()),
    3: attack_3,
}


# ----------------------------------------------------------------------------- the output topic (broker)


def read_topic_ids(bootstrap: str, topic: str, timeout: float = 10.0) -> Counter[str]:
    """Every row id on ``topic`` (Arrow output messages), read from the start."""
    import pyarrow as pa
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=64 << 20)
    ids: Counter[str] = Counter()
    try:
        parts = c.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = time.monotonic() + timeout
        idle = 0
        while time.monotonic() < end and idle < 3:
            got = c.poll(timeout_ms=500)
            idle = 0 if got else idle + 1
            for recs in got.values():
                for r in recs:
                    t = pa.ipc.open_stream(pa.py_buffer(r.value)).read_all()
                    ids.update(t.column("id").to_pylist())
    finally:
        c.close()
    return ids


def attack_5(workdir: Path, port: int, start_broker: Callable[[], Any], stop_broker: Callable[[], None],
             make_topic: Callable[[str], None], outage: float = 10.0) -> AttackResult:
    """#5: the broker killed and back ``outage`` s later under a daemon producing to an output topic: the producer
    is made anew (its id unknown to the new broker), no exit, every row produced after the restart arrives."""
    res = AttackResult(5, f"the broker killed and back {outage:g} s later, output to a Kafka topic")
    model = model_file(workdir)
    bootstrap = f"127.0.0.1:{port}"
    make_topic("out")
    env = directory_env(workdir / "in", workdir / "root", model, STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS=bootstrap,
                        STREAMEMBED_OUTPUT__KAFKA_TOPIC="out", STREAMEMBED_KAFKA__RETRY_BACKOFF_MAX_SECONDS="2")
    ids_a = write_inputs(workdir / "in", 2, 100, tag="a")
    p = Proc(workdir, env)
    try:
        res.check(p.wait_for(lambda: sum(output_ids(workdir / "root" / "embeddings").values()) >= len(ids_a), 60),
                  "the first rows were not embedded")
        stop_broker()
        ids_b = write_inputs(workdir / "in", 2, 100, tag="b")
        time.sleep(outage)
        start_broker()
        make_topic("out")
        ids_c = write_inputs(workdir / "in", 2, 100, tag="c")
        end = time.monotonic() + 90
        on_topic: Counter[str] = Counter()
        while time.monotonic() < end and p.alive():
            on_topic = read_topic_ids(bootstrap, "out", timeout=5)
            if all(on_topic[i] for i in ids_c):
                break
            time.sleep(1.0)
        res.check(p.alive(), f"the daemon exited ({p.proc.poll()}) after the broker came back")
        res.check(all(on_topic[i] for i in ids_c), "rows produced after the broker came back are not on the topic")
    finally:
        p.signal(signal.SIGTERM)
        _exit(res, p, 60, 0, "SIGTERM after the broker restart")
    account(res, ids_a + ids_b + ids_c, output_ids(workdir / "root" / "embeddings"))
    return res


class ThrottledProxy:
    """A TCP proxy on 127.0.0.1 to ``upstream``: what clients send goes through at ``rate`` bytes/s (None: at once)."""

    def __init__(self, upstream: int, rate: float | None) -> None:
        import threading

        self.upstream, self.rate = upstream, rate
        self.listen = socket.socket()
        self.listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listen.bind(("127.0.0.1", 0))
        self.listen.listen(64)
        self.port = int(self.listen.getsockname()[1])
        self._stop = threading.Event()
        self._threads: list[Any] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self) -> None:
        import threading

        self.listen.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listen.accept()
            except OSError:
                continue
            server = socket.create_connection(("127.0.0.1", self.upstream))
            for src, dst, throttled in ((client, server, True), (server, client, False)):
                t = threading.Thread(target=self._pump, args=(src, dst, throttled), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, throttled: bool) -> None:
        src.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    data = src.recv(16384 if throttled and self.rate else 1 << 20)
                except TimeoutError:
                    continue
                if not data:
                    break
                if throttled and self.rate:
                    time.sleep(len(data) / self.rate)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self.listen.close()


def tansu_behind_proxy(rate: float | None) -> tuple[subprocess.Popen[bytes], ThrottledProxy, str]:
    """A Tansu broker that tells its clients to connect through a :class:`ThrottledProxy` (its advertised
    listener): (the broker process, the proxy, the bootstrap address through the proxy)."""
    from tools.broker import find_tansu

    broker_port = _free_port()
    proxy = ThrottledProxy(broker_port, rate)
    proc = subprocess.Popen([str(find_tansu()), "broker", "--listener-url", f"tcp://127.0.0.1:{broker_port}",
                             "--advertised-listener-url", f"tcp://127.0.0.1:{proxy.port}",
                             "--storage-engine", "memory://tansu/"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"},
                            start_new_session=True)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", broker_port), timeout=0.5):
            break
        time.sleep(0.1)
    return proc, proxy, f"127.0.0.1:{proxy.port}"


def attack_8(workdir: Path, rate: float = 256 * 1024, stop_seconds: float = 4.0) -> AttackResult:
    """#8: SIGTERM with a backlog of input and an output topic that takes 256 KB/s: exit 0 within
    ``run.stop_seconds`` (and the batch), nothing lost: a restart produces what was not acknowledged."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    res = AttackResult(8, f"SIGTERM with a backlog and a {rate / 1024:.0f} KB/s output topic")
    model = model_file(workdir)
    proc, proxy, bootstrap = tansu_behind_proxy(rate)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("out", 1, 1)])
        admin.close()
        ids = write_inputs(workdir / "in", 40, 2000)
        env = directory_env(workdir / "in", workdir / "root", model, STREAMEMBED_KAFKA__BOOTSTRAP_SERVERS=bootstrap,
                            STREAMEMBED_OUTPUT__KAFKA_TOPIC="out", STREAMEMBED_RUN__STOP_SECONDS=str(stop_seconds),
                            STREAMEMBED_SOURCE__BATCH_ROWS="4096")
        p = Proc(workdir, env)
        p.wait_for(p.running, 60)
        time.sleep(3.0)
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        rc = _exit(res, p, stop_seconds + 30, 0, "SIGTERM with a slow output")
        took = time.monotonic() - t0
        res.check(rc is not None and took < stop_seconds + 8, f"the stop took {took:.1f} s")
        proxy.rate = None  # the output recovers: a restart produces the rest
        p = Proc(workdir, {**env, "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true"})
        _exit(res, p, 120, 0, "the restart")
        on_topic = read_topic_ids(bootstrap, "out", timeout=30)
        account(res, ids, on_topic)
    finally:
        proxy.close()
        proc.kill()
        proc.wait(10)
    return res
