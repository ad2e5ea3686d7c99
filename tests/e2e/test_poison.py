"""The poison corpus (tests/poison.py) through the real daemon in directory mode, then a restart over its state.

Every kind is followed by a good record: it must come out embedded (nothing
stalls behind a poison), every poison record must be a dead letter with its
reason, /healthz must answer 200 throughout, SIGTERM must give exit 0, and a
second run over the same state must neither crash nor emit anything again.
The Kafka-mode twin is tests/kafka/test_poison_kafka.py.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any
from collections.abc import Callable

import pytest

from .. import poison
from ..poison import MAX_BLOCK_ROWS, build_corpus, expected, write_corpus
from ..stream.helpers import fitted_model, read_dead, read_ids
from .daemon import Daemon, directory_env, wait_for

pytestmark = pytest.mark.e2e

CORPUS_ENV = {
    "STREAMEMBED_OUTPUT__DEAD_LETTER_FORMAT": "jsonl",
    "STREAMEMBED_SOURCE__MAX_BLOCK_ROWS": str(MAX_BLOCK_ROWS),
    "STREAMEMBED_METRICS__WEDGED_AFTER_SECONDS": "10",  # a wedged loop shows within the test's time
    "STREAMEMBED_DIRECTORY__INCOMPLETE_SECONDS": "2",
}


def settle(pred: Callable[[], bool], timeout: float, also: Callable[[], Any] | None = None) -> bool:
    """Poll ``pred`` (and ``also``, e.g. a health probe) until it holds or ``timeout``; never fails."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if also is not None:
            also()
        if pred():
            return True
        time.sleep(0.1)
    return False


def _dead_keys(dead: list[dict[str, Any]], where: dict[object, tuple[str, int]]) -> Counter[tuple[Any, ...]]:
    return Counter((*where.get(r["file"], ("?" + str(r["file"]), -9)), r["row"], r["reason"]) for r in dead)


@pytest.mark.slow
def test_poison_corpus_in_directory_mode_then_a_restart(tmp_path: Path) -> None:
    kinds = [k for k in build_corpus() if k.files is not None]
    assert len(kinds) >= 70
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    indir, out = tmp_path / "in", tmp_path / "out"
    laid = write_corpus(kinds, indir)
    want_ids, want_dead = expected(kinds, "file")
    exact = {k.name for k in kinds}
    want_exact_dead = {x for x in want_dead if x[0] in exact}
    env = directory_env(indir, out, model, **CORPUS_ENV)
    health: list[int] = []
    d = Daemon(tmp_path, env)
    try:
        d.wait_port()

        def all_there() -> bool:
            ids = set(read_ids(out / "embeddings", "*.parquet"))
            if not all(rid in ids for rid in laid.after.values()):
                return False
            got = set(_dead_keys(read_dead(out / "dead-letter"), laid.where))
            return want_exact_dead <= got

        settle(all_there, 90, also=lambda: health.append(d.get("/healthz")[0]))
        time.sleep(1.0)  # anything more than expected would show now
        health.append(d.get("/healthz")[0])
        out_ids = Counter(read_ids(out / "embeddings", "*.parquet"))
        dead = read_dead(out / "dead-letter")
        got_dead = _dead_keys(dead, laid.where)
        # nothing stalled: the good record after every kind came out
        assert {k: laid.after[k] for k in laid.after if laid.after[k] not in out_ids} == {}
        # every record of the exact kinds: embedded, or a dead letter with its reason; no more, no less, no twice
        assert {x for x in got_dead if x[0] in exact or x[0].startswith("?")} == want_exact_dead
        assert [x for x, c in got_dead.items() if c > 1] == []
        assert [i for i, c in out_ids.items() if c > 1] == []
        assert set(out_ids) == want_ids
        assert all(r["detail"] for r in dead)
        by_key = {(*laid.where[r["file"]], r["row"]): r for r in dead}
        assert "nested too deeply" in by_key[("json_deep_vector", 0, 1)]["detail"]
        assert "did you mean 'dissimilarities'" in by_key[("json_vector_misspelt", 0, 1)]["detail"]
        assert "did you mean 'dissimilarities'" in by_key[("col_vector_misspelt", 0, 0)]["detail"]
        assert "appears 2 times" in by_key[("col_id_duplicate", 0, 0)]["detail"]
        assert by_key[("file_non_utf8_name", 0, 1)]["file"] == "file_non_utf8_name-\ufffd\ufffd.jsonl"
        assert by_key[("json_not_utf8", 0, 1)]["raw"] is not None
        assert by_key[("json_vector_negative", 0, 1)]["id"] == "json_vector_negative.0.1"
        # the scraped counters agree with the files
        assert d.metric("streamembed_dead_letters_total") == len(dead)
        for reason, n in Counter(r["reason"] for r in dead).items():
            assert d.metric("streamembed_records_failed_total", f'reason="{reason}"') == n, reason
        assert d.metric("streamembed_quarantined_batches_total") == 0
        assert d.get("/readyz")[0] == 200
        assert d.terminate() == 0
    finally:
        d.close()
    assert health and set(health) == {200}, Counter(health)
    assert "the loop failed" not in d.log()
    dead_files = sorted(p.name for p in (out / "dead-letter").iterdir())

    # the same state again: nothing is read twice, nothing crashes; a new good file proves the loop went past it all
    d2 = Daemon(tmp_path, env)
    try:
        d2.wait_port()
        (indir / "zzz-after-restart.jsonl").write_bytes(poison.jsonl_line(
            {"id": "after-restart", "dissimilarities": poison.good_rows(1, 999)[0].tolist()}) + b"\n")
        wait_for(lambda: "after-restart" in read_ids(out / "embeddings", "*.parquet"), 30, "the new file", d2)
        assert d2.metric("streamembed_records_in_total") == 1
        assert d2.metric("streamembed_dead_letters_total") == 0
        assert d2.get("/healthz")[0] == 200
        assert d2.terminate() == 0
    finally:
        d2.close()
    assert Counter(read_ids(out / "embeddings", "*.parquet")) == out_ids + Counter(["after-restart"])
    assert sorted(p.name for p in (out / "dead-letter").iterdir()) == dead_files

    # every poison case processed a second time, from scratch (a new output root): the same outcome
    out2 = tmp_path / "out2"
    (indir / "zzz-after-restart.jsonl").unlink()
    d3 = Daemon(tmp_path, directory_env(indir, out2, model, **CORPUS_ENV))
    try:
        d3.wait_port()
        settle(lambda: d3.dead() or (_dead_keys(read_dead(out2 / "dead-letter"), laid.where) == got_dead
                                     and Counter(read_ids(out2 / "embeddings", "*.parquet")) == out_ids), 60)
        assert not d3.dead(), d3.log()
        assert d3.get("/healthz")[0] == 200
        assert d3.terminate() == 0
    finally:
        d3.close()
    assert _dead_keys(read_dead(out2 / "dead-letter"), laid.where) == got_dead
    assert Counter(read_ids(out2 / "embeddings", "*.parquet")) == out_ids
