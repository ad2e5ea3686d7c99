"""A corpus of malformed input: every bad record is a dead letter with its reason; the daemon stays up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from ..stream.helpers import (N_LANDMARKS, dissimilarities, fitted_model, input_table, objects, read_dead, read_ids,
                              write_arrow, write_jsonl, write_parquet)
from .daemon import Daemon, directory_env, wait_for

pytestmark = pytest.mark.e2e


def _corpus(indir: Path) -> tuple[set[str], set[tuple[str, int | None, str]]]:
    """(ids that must be embedded, expected dead letters as (file, row, reason))."""
    indir.mkdir()
    A = dissimilarities(objects(40), dtype=np.float64)
    good = {f"g{i}" for i in range(10)}
    write_parquet(indir / "01-good.parquet", input_table(sorted(good), A[:10]))

    rows = [A[10].tolist(), A[11].tolist()[:-1], A[12].tolist(), A[13].tolist(), A[14].tolist(), A[15].tolist(),
            A[16].tolist()]
    rows[2][4] = float("nan")
    rows[3][0] = float("inf")
    rows[4][7] = -1.0
    t = pa.table({
        "id": [None, "wrong-length", "nan", "inf", "negative", "old-version", "fine"],
        "dissimilarities": pa.array(rows, pa.list_(pa.float64())),
        "landmark_version": pa.array([None, None, None, None, None, 7, 1], pa.int64()),
    })
    write_parquet(indir / "02-bad-rows.parquet", t)
    good.add("fine")

    (indir / "03-garbage.parquet").write_bytes(b"this is not parquet at all")
    (indir / "04-empty.arrow").write_bytes(b"")

    trunc_ids = [f"t{i}" for i in range(20)]
    p = write_arrow(indir / "05-truncated.arrows", input_table(trunc_ids, A[20:40].astype(np.float32)), chunk=5)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    # whole 5-row messages before the cut survive; find how many by reading it the way the engine does
    from streamembed.stream.readers import iter_file

    chunks = list(iter_file(p, batch_rows=1000))
    survived = [i for c in chunks if c.table is not None for i in c.table.column("id").to_pylist()]
    good.update(survived)
    cut_row = len(survived)

    lines = [
        b"\xff\xfe\xfa binary junk",
        b"{this is not json",
        b'{"id": "letters", "dissimilarities": ["a", "b"]}',
        b'{"id": 12345.5, "dissimilarities": [1, 2]}',
    ]
    write_jsonl(indir / "06-lines.jsonl", [{"id": "j-ok", "dissimilarities": A[0].tolist()}], lines)
    good.add("j-ok")

    C = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.5, 3.0, 0.0]])  # not symmetric
    write_parquet(indir / "07-bad-block.parquet", input_table(["b0", "b1", "b2"], A[:3], cross=C))

    expected = {
        ("02-bad-rows.parquet", 0, "missing_id"),
        ("02-bad-rows.parquet", 1, "wrong_length"),
        ("02-bad-rows.parquet", 2, "non_finite"),
        ("02-bad-rows.parquet", 3, "non_finite"),
        ("02-bad-rows.parquet", 4, "negative"),
        ("02-bad-rows.parquet", 5, "unknown_landmark_version"),
        ("03-garbage.parquet", None, "unreadable_file"),
        ("04-empty.arrow", None, "unreadable_file"),
        ("05-truncated.arrows", cut_row, "undecodable"),
        ("06-lines.jsonl", 1, "undecodable"),
        ("06-lines.jsonl", 2, "undecodable"),
        ("06-lines.jsonl", 3, "non_numeric"),
        ("06-lines.jsonl", 4, "bad_id"),
        ("07-bad-block.parquet", 0, "bad_block"),
        ("07-bad-block.parquet", 1, "bad_block"),
        ("07-bad-block.parquet", 2, "bad_block"),
    }
    assert A.shape[1] == N_LANDMARKS
    return good, expected


def test_every_malformed_record_is_a_dead_letter_and_the_daemon_stays_healthy(tmp_path: Path) -> None:
    model = tmp_path / "model.npz"
    fitted_model().save(model)
    good, expected = _corpus(tmp_path / "in")
    out = tmp_path / "out"
    d = Daemon(tmp_path, directory_env(tmp_path / "in", out, model, STREAMEMBED_OUTPUT__DEAD_LETTER_FORMAT="jsonl"))
    try:
        d.wait_port()
        wait_for(lambda: len(read_dead(out / "dead-letter")) >= len(expected)
                 and len(read_ids(out / "embeddings", "*.parquet")) >= len(good), 30, "all files handled", d)
        dead = read_dead(out / "dead-letter")
        got = {(r["file"], r["row"], r["reason"]) for r in dead}
        assert got == expected
        assert all(r["detail"] for r in dead)
        by_reason = {(r["file"], r["row"]): r for r in dead}
        assert by_reason[("06-lines.jsonl", 1)]["raw"] is not None  # raw bytes (base64) of the non-UTF-8 line
        assert "letters" in by_reason[("06-lines.jsonl", 3)]["record"]
        assert by_reason[("02-bad-rows.parquet", 4)]["id"] == "negative"
        assert set(read_ids(out / "embeddings", "*.parquet")) == good
        assert d.get("/healthz")[0] == 200 and d.get("/readyz")[0] == 200
        assert d.metric("streamembed_dead_letters_total") == len(expected)
        assert d.metric("streamembed_records_failed_total", 'reason="unreadable_file"') == 2
        assert d.metric("streamembed_records_failed_total", 'reason="bad_block"') == 3
        assert d.terminate() == 0
    finally:
        d.close()
