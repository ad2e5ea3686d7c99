"""With the real CLI: batch mode waits for fresh files; the log says what runs.

* Batch mode (``directory.exit_when_idle``): files copied in just before the start, and one still being
  written, are waited for (``directory.settle_seconds``), embedded whole, and the run exits 0.
* The start line names the model (path, version, lineage, landmarks, method); a progress line follows
  every ``run.progress_seconds`` (records in/out/dead per second, backlog, model version); dead letters
  raise a WARNING at once, naming the reasons, and later ones are summed (rate-limited), so the
  WARNINGs account for every dead letter in a few lines.
"""

from __future__ import annotations

import re
import shutil
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from streamembed import LandmarkMDS

from ..stream.helpers import (N_LANDMARKS, dissimilarities, fitted_model, input_table, objects, read_dead, read_ids,
                              write_parquet)
from .cli import log_records
from .daemon import Daemon, directory_env, wait_for

pytestmark = pytest.mark.e2e

SETTLE = 2.0


def _ts(rec: dict) -> float:
    return datetime.fromisoformat(rec["ts"]).timestamp()


def test_batch_mode_waits_for_fresh_files_and_embeds_them_all(tmp_path: Path) -> None:
    """`cp files incoming/ && streamembed run --set directory.exit_when_idle=true`: exit 0 after every row
    is embedded, with batches > 0 (not an immediate exit with batches=0), and not before the files settled;
    a file still growing when the daemon starts is read whole, once."""
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    staging, incoming, out = tmp_path / "staging", tmp_path / "incoming", tmp_path / "out"
    staging.mkdir()
    incoming.mkdir()
    ids: list[str] = []
    for k in range(2):
        names = [f"f{k}-{i}" for i in range(300)]
        write_parquet(staging / f"f{k}.parquet", input_table(names, dissimilarities(objects(300, seed=k))))
        ids += names
    growing = [f"g-{i}" for i in range(200)]
    write_parquet(staging / "g.parquet", input_table(growing, dissimilarities(objects(200, seed=9))))
    data = (staging / "g.parquet").read_bytes()

    t0 = time.time()
    for k in range(2):
        shutil.copy(staging / f"f{k}.parquet", incoming / f"f{k}.parquet")  # fresh modification times, like cp
    with open(incoming / "g.parquet", "wb") as fh:
        fh.write(data[: len(data) // 2])
    env = directory_env(incoming, out, model, STREAMEMBED_DIRECTORY__SETTLE_SECONDS=str(SETTLE),
                        STREAMEMBED_RUN__PROGRESS_SECONDS="0.3")
    d = Daemon(tmp_path, env, ("--set", "directory.exit_when_idle=true"))
    try:
        time.sleep(0.8)
        with open(incoming / "g.parquet", "ab") as fh:  # the writer finishes while the daemon waits
            fh.write(data[len(data) // 2:])
        code = d.wait(30)
    finally:
        d.close()
    log = log_records(d.log())
    assert code == 0, d.log()
    stopped = [r for r in log if r["msg"] == "stopped"]
    assert len(stopped) == 1 and stopped[0]["batches"] > 0 and stopped[0]["embedded"] == 800, d.log()
    assert sorted(read_ids(out / "embeddings", "*.parquet")) == sorted(ids + growing)
    assert read_dead(out / "dead-letter") == []
    reads = [r for r in log if r["msg"].startswith("reading ")]
    assert len(reads) == 3, d.log()
    assert min(_ts(r) for r in reads) >= t0 + SETTLE - 0.05  # nothing was read before it had settled
    # while it waited, the progress line said how many files were waiting (when the daemon started long enough
    # before the files settled to write one: on a loaded machine its start can take the whole settle time)
    waiting = [r for r in log if r["msg"].startswith("progress:") and _ts(r) < min(_ts(x) for x in reads)]
    running = next(_ts(r) for r in log if r["msg"] == "running")
    if running + 1.0 < t0 + SETTLE:
        assert waiting, d.log()
    assert all(r["backlog"] == 3 for r in waiting), d.log()


def test_start_progress_and_rate_limited_dead_letter_warnings(tmp_path: Path) -> None:
    """The log a user follows: the model named at start; a progress line every 0.3 s with per-second rates
    that add up to what was read; dead letters in 14 batches over two files reported in few WARNINGs that
    name the reason and together count every dead letter, the first one right away."""
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    truth = LandmarkMDS.load(model)
    indir, out = tmp_path / "in", tmp_path / "out"
    indir.mkdir()
    env = directory_env(indir, out, model, STREAMEMBED_RUN__PROGRESS_SECONDS="0.3",
                        STREAMEMBED_SOURCE__BATCH_ROWS="64")
    too_long = np.hstack([dissimilarities(objects(400, seed=1)), dissimilarities(objects(400, seed=2))[:, :3]])
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()
        write_parquet(indir / "a-good.parquet", input_table([f"a{i}" for i in range(200)],
                                                            dissimilarities(objects(200, seed=3))))
        write_parquet(indir / "b-bad.parquet", input_table([f"b{i}" for i in range(400)], too_long))
        wait_for(lambda: d.metric("streamembed_records_in_total") == 600, 20, "the first two files", d)
        time.sleep(0.7)  # a progress line or two in between
        write_parquet(indir / "c-bad.parquet", input_table([f"c{i}" for i in range(400)], too_long))
        wait_for(lambda: d.metric("streamembed_records_in_total") == 1000, 20, "the third file", d)
        time.sleep(0.7)
        assert d.terminate() == 0
    finally:
        d.close()
    log = log_records(d.log())

    start = [r for r in log if r["msg"].startswith("model: ")]
    assert len(start) == 1, d.log()
    s = start[0]
    assert (s["path"], s["version"], s["lineage"], s["landmarks"], s["method"]) == \
        (str(model), 1, truth.lineage_, N_LANDMARKS, "projection")
    assert truth.lineage_ in s["msg"] and "version 1" in s["msg"] and f"{N_LANDMARKS} landmarks" in s["msg"]

    progress = [r for r in log if r["msg"].startswith("progress: ")]
    assert len(progress) >= 4, d.log()
    for r in progress:
        # backlog: files seen and not yet read (1 while the second file waits behind the first on a busy machine)
        assert 0.25 <= r["seconds"] < 3.0 and r["model_version"] == 1 and r["backlog"] in (0, 1)
        assert "records/s in" in r["msg"] and "embedded/s" in r["msg"] and "dead letters/s" in r["msg"]
        rate = float(re.match(r"progress: ([0-9.]+) records/s in", r["msg"]).group(1))
        assert abs(rate - r["records_in"] / r["seconds"]) <= 0.01 * rate + 1  # the rate is the count per second
    assert progress[-1]["backlog"] == 0  # caught up at the end
    assert sum(r["records_in"] for r in progress) <= 1000
    assert sum(r["dead_letters"] for r in progress) <= 800

    warnings = [r for r in log if r["level"] == "WARNING" and "dead letters" in r["msg"]]
    dead = read_dead(out / "dead-letter")
    assert len(dead) == 800 and {r["reason"] for r in dead} == {"wrong_length"}
    assert 1 <= len(warnings) <= 3, [w["msg"] for w in warnings]  # 14 batches with dead letters
    assert sum(sum(w["reasons"].values()) for w in warnings) == 800
    assert all("wrong_length" in w["msg"] and f"has {N_LANDMARKS + 3} values" in w["msg"] for w in warnings)
    first_bad = next(r for r in log if r["msg"] == "reading b-bad.parquet from row 0")
    assert _ts(warnings[0]) - _ts(first_bad) < 5.0  # at once, not after the rate limit's 10 s
