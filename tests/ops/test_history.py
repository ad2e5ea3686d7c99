"""``ops.history``: the refit history appended by the daemon and read back for the map page."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from streamembed.ops.history import MAX_TEXT_CHARS, RecentRecords, append_record, utc_stamp


def test_a_record_is_stamped_and_appended_as_one_json_line(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "model-history.jsonl"  # the directory is made
    rec = append_record(path, {"status": "installed", "alignment_rms": np.float64(0.25)}, now=1_700_000_000.1234)
    append_record(path, {"status": "failed"}, now=1_700_000_001.0)
    lines = path.read_text().splitlines()
    assert [json.loads(x) for x in lines] == [rec, {"time": "2023-11-14T22:13:21.000Z", "unix": 1700000001.0,
                                                    "status": "failed"}]
    assert list(rec) == ["time", "unix", "status", "alignment_rms"]
    assert rec["time"] == "2023-11-14T22:13:20.123Z" and rec["unix"] == 1700000000.123
    assert utc_stamp(999) == "1970-01-01T00:00:00.999Z"


def test_the_page_reads_the_newest_records_and_skips_what_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "model-history.jsonl"
    for v in range(30):
        append_record(path, {"status": "installed", "model_version": v, "new_landmarks": list(range(v))})
    append_record(path, {"status": "failed", "error": "x" * 2000, "alignment_rms": float("nan")})
    with open(path, "a") as fh:
        fh.write("[1, 2]\n")  # not an object
        fh.write('{"status": "kept", "model_ver')  # torn: the writer is another process
    recent = RecentRecords(path, 5)
    got = recent.read()
    # the last 5 lines, of which two are not records
    assert [r.get("model_version") for r in got] == [28, 29, None]
    assert got[0]["landmarks"] == 28 and "new_landmarks" not in got[0]
    assert len(got[-1]["error"]) == MAX_TEXT_CHARS and got[-1]["alignment_rms"] is None
    assert recent.read() is got  # unchanged file: not read again
    with open(path, "a") as fh:
        fh.write('sion": 31, "movement": {"x": 1}}\n')
    assert recent.read()[-1] == {"status": "kept", "model_version": 31}  # a whole line now; only plain values kept


def test_no_file_is_no_records(tmp_path: Path) -> None:
    assert RecentRecords(tmp_path / "absent.jsonl", 5).read() == []
    assert RecentRecords(None, 5).read() == []
