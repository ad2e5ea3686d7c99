"""The refit history (``model-history.jsonl``): one JSON object per line, appended by the daemon, read by ``/map``.

:func:`append_record` is the writer (``daemon.refits.RefitManager`` records
every refit outcome through it: installed, kept, superseded, failed); it
stamps each record with its UTC ``time`` (to the millisecond, so that
``streamembed plot drift`` marks a refit between the drift updates around it)
and ``unix`` seconds, and appends through ``fsafe.open_append`` (never through
a link; created with the configured file mode).

:class:`RecentRecords` is the reader behind the map page: the newest records,
cut to the keys the page shows, read from the end of the file (at most
``HISTORY_TAIL_BYTES``) and re-read only when the file changed. A record that
is not a JSON object is skipped, never an error: the file is written by
another process and may end with a torn line.

The drift history (``drift-history.jsonl``) is written by the drift monitor
(``monitors.drift``) and read by ``plots.history``.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from streamembed.fsafe import make_dirs, open_append

__all__ = ["append_record", "utc_stamp", "RecentRecords", "tail_lines", "page_record", "HISTORY_KEYS",
           "HISTORY_TAIL_BYTES"]

#: Most bytes read from the end of the refit history per look (records listing thousands of landmark ids are long).
HISTORY_TAIL_BYTES = 4 << 20
#: Keys of a refit history record that the page shows (the rest, e.g. the landmark id lists, stay in the file).
HISTORY_KEYS = ("time", "status", "trigger", "reason", "model_version", "previous_version", "alignment_rms",
                "duration_seconds", "n_candidates", "kept_old_landmarks", "error", "detail", "candidate",
                "unexplained_before", "unexplained_after", "unexplained_best", "movement", "detector")
#: Characters kept of a string value shown on the page.
MAX_TEXT_CHARS = 500


def utc_stamp(unix_ms: int) -> str:
    """``unix_ms`` (milliseconds since the epoch) as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix_ms // 1000)) + f".{unix_ms % 1000:03d}Z"


def append_record(path: Path, doc: dict[str, Any], *, now: float | None = None) -> dict[str, Any]:
    """Append ``doc`` to the JSON-lines file ``path`` with ``time`` and ``unix`` first; returns the record written.

    ``now`` is the Unix time in seconds (default: the clock); numpy scalars in
    ``doc`` are written as floats. Raises ``OSError`` when the file cannot be
    appended to.
    """
    ms = round((time.time() if now is None else now) * 1000)
    record = {"time": utc_stamp(ms), "unix": ms / 1000, **doc}
    make_dirs(path.parent)
    with open_append(path) as fh:  # never through a link; created with the file mode
        fh.write((json.dumps(record, default=float) + "\n").encode("utf-8"))
        fh.flush()
    return record


class RecentRecords:
    """The newest ``count`` records of a history file as the page shows them, newest last (not thread-safe)."""

    def __init__(self, path: Path | str | None, count: int, max_bytes: int = HISTORY_TAIL_BYTES) -> None:
        self.path = None if path is None else Path(path)
        self.count = int(count)
        self.max_bytes = int(max_bytes)
        self._cached: tuple[tuple[int, int], list[dict[str, Any]]] | None = None

    def read(self) -> list[dict[str, Any]]:
        """The records (``page_record`` of each line); [] when there is no file. Re-read only when it changed."""
        if self.path is None:
            return []
        try:
            st = self.path.stat()
        except OSError:
            return []
        key = (st.st_size, st.st_mtime_ns)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        records = [page_record(line) for line in tail_lines(self.path, self.count, self.max_bytes)]
        got = [r for r in records if r is not None]
        self._cached = (key, got)
        return got


def tail_lines(path: Path, count: int, max_bytes: int) -> list[str]:
    """The last ``count`` complete lines of ``path``, reading at most ``max_bytes`` from its end."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            block = 64 << 10
            data = b""
            pos = size
            while pos > start and data.count(b"\n") <= count:
                step = min(block, pos - start)
                pos -= step
                fh.seek(pos)
                data = fh.read(step) + data
    except OSError:
        return []
    lines = data.split(b"\n")
    if pos > 0:
        lines = lines[1:]  # the first line may be cut
    lines = [ln for ln in lines if ln.strip()]
    return [ln.decode("utf-8", errors="replace") for ln in lines[-count:]]


def page_record(line: str) -> dict[str, Any] | None:
    """One history line cut to ``HISTORY_KEYS`` (finite numbers, short strings); None if not a JSON object."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    out: dict[str, Any] = {}
    for k in HISTORY_KEYS:
        v = rec.get(k)
        if isinstance(v, str):
            out[k] = v[:MAX_TEXT_CHARS]
        elif isinstance(v, bool) or v is None:
            if v is not None:
                out[k] = v
        elif isinstance(v, (int, float)):
            out[k] = v if isinstance(v, int) else _finite(v)
    if isinstance(rec.get("new_landmarks"), list):
        out["landmarks"] = len(rec["new_landmarks"])
    return out


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None
