"""The watched directory (:class:`DirectorySource`): files read once complete, resumable by position.

File sources never lose a record (docs/sources.md): a file is read once it
is complete — its size, modification time and inode unchanged for
``settle_seconds`` — and read whole or not at all (``readers.open_input``); a
file whose last part is still being written (an unfinished JSON line, an
Arrow stream cut inside a message, a Parquet or Arrow file without its
footer) is read up to that point and resumed when it grows, and only
dead-lettered if it stays unfinished for ``incomplete_seconds``; a file that
cannot be opened for a reason of the environment (permissions, I/O errors)
is retried with backoff, never dead-lettered; a file that changes after it
was read is read again (appended rows only, for JSON lines and Arrow streams).

``source.kind = "directory"`` (``config.sources``): :func:`build_source` builds it from ``[directory]``,
:func:`preflight` refuses batch mode on a directory that is not there before the daemon writes anything.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterator


from streamembed.config.schema import Config, DirectoryConfig
from streamembed.core.options import BATCH_ROWS, MAX_BLOCK_ROWS
from streamembed.exits import StartupError
from streamembed.stream.dirscan import DirectoryIndex
from streamembed.stream.origin import RowOrigin
from streamembed.stream.readers import FileChanged, ReadChunk, Signature, file_format, iter_file, open_input
from streamembed.stream.sinks import safe_label
from streamembed.stream.sources.base import SourceBatch, SourceContext, SourceSetup, display_name

__all__ = ["DirectorySource", "build_source", "preflight"]

log = logging.getLogger("streamembed.source")


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _entry_problem(v: dict[str, Any]) -> str | None:
    """What is wrong with one ``done`` entry of a checkpoint (None: nothing)."""
    if v.get("sig") is not None and Signature.from_json(v.get("sig")) is None:
        return "'sig' must be [size, mtime_ns, inode] (integers)"
    if v.get("rows") is not None and not _is_count(v.get("rows")):
        return "'rows' must be a row count"
    if v.get("tail") is not None and not isinstance(v.get("tail"), str):
        return "'tail' must be text"
    if v.get("gen") is not None and not _is_count(v.get("gen")):
        return "'gen' must be a count"
    return None


def _short_hash(rel: str) -> str:
    return hashlib.blake2s(os.fsencode(rel), digest_size=4).hexdigest()


_SKIP_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload")
#: Formats whose files grow by appending whole rows (a grown file continues where it was).
_APPENDABLE = ("jsonl", "arrow-stream")
#: A signature no file has: "read it again" (it changed while being read, or failed half-way).
_NEVER = Signature(-1, -1, -1)
#: Environment errors retried with backoff: first wait, longest wait (seconds).
RETRY_FIRST, RETRY_MAX = 1.0, 60.0


@dataclass
class _Waiting:
    """A file seen but not read yet: its signature since ``since``, and when to retry after an error."""

    sig: Signature
    since: float  # monotonic time this signature was first seen
    retry_at: float = 0.0
    backoff: float = 0.0
    scans: int = 1


@dataclass
class _Reading:
    rel: str
    row: int
    sig: Signature
    chunks: Iterator[ReadChunk]
    #: how many times the file has been opened for reading, this one included: part of every batch label,
    #: so a file read again (changed after it was read, or first found unfinished) never reuses the output
    #: names of an earlier, committed read; a read resumed after a crash keeps its number (and names)
    gen: int = 1


class DirectorySource:
    """Files matching ``pattern`` under ``directory``, each read once it is complete (see the module doc).

    New files are picked up as they appear, oldest modification time first
    (ties by name). Hidden files (``.x``, ``_x``) and names ending in
    ``.tmp``/``.part`` are ignored; ``pattern`` is a glob on the relative path
    (``**/`` matches zero or more directories: ``dirscan.compile_pattern``);
    symbolic links out of the directory are not followed. A scan costs what
    changed since the last one, not the files already read
    (``dirscan.DirectoryIndex``). Large files are read ``batch_rows`` rows at
    a time. Position: ``{"done": {rel: {"sig": [size, mtime_ns, inode], "rows": n, "tail": str | None,
    "gen": g}}, "current": {"file": rel, "row": r, "sig": [...], "gen": g} | None}``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        pattern: str = DirectoryConfig.pattern,
        batch_rows: int = BATCH_ROWS,
        settle_seconds: float = DirectoryConfig.settle_seconds,
        poll_seconds: float = DirectoryConfig.poll_seconds,
        max_block_rows: int = MAX_BLOCK_ROWS,
        exit_when_idle: bool = False,
        incomplete_seconds: float = DirectoryConfig.incomplete_seconds,
        name: str = "files",
        metrics: Any = None,
        mapping: str = "never",
    ) -> None:
        self.directory = Path(directory)
        self.mapping = mapping  # which files are memory-mapped instead of copied (``stream.mapped``)
        self.pattern = pattern
        self.batch_rows = int(batch_rows)
        self.settle_seconds = float(settle_seconds)
        self.poll_seconds = float(poll_seconds)
        self.max_block_rows = int(max_block_rows)
        self.exit_when_idle = exit_when_idle
        self.incomplete_seconds = float(incomplete_seconds)
        self.name = name
        self.metrics = metrics
        self._done: dict[str, dict[str, Any]] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._reading: _Reading | None = None
        self._resume: dict[str, tuple[int, Signature | None, int]] = {}
        self._idle = False
        self._listing_problem: str | None = None
        self._file_problems: dict[str, str] = {}  # rel -> why it could not be read (retried with backoff)
        self._warned: set[str] = set()
        self._ready: list[tuple[str, int, Signature]] = []  # files found ready by the last scan, in order
        self._ready_at = 0.0
        self._index = DirectoryIndex(self.directory, pattern)
        self._scan_cost = 0.0  # seconds the last scan took
        self._pruned = False

    # -- state -------------------------------------------------------------
    def _position(self) -> dict[str, Any]:
        cur = None
        if self._reading is not None:
            r = self._reading
            cur = {"file": r.rel, "row": r.row, "sig": r.sig.as_json(), "gen": r.gen}
        # entries of _done are replaced, never changed in place: a shallow copy is a snapshot
        # (the checkpoint sorts the names when it writes them)
        return {"done": dict(self._done), "current": cur}

    def restore(self, state: Any) -> None:
        """Resume from a position; raises ValueError naming what is wrong with it."""
        if not state:
            return
        if not isinstance(state, dict):
            raise ValueError(f"the '{self.name}' position must be an object, got {type(state).__name__}")
        done = state.get("done", {})
        if isinstance(done, list):  # schema 1: names only
            if not all(isinstance(x, str) for x in done):
                raise ValueError(f"'{self.name}.done' must list file names")
            done = {x: {"sig": None, "rows": None} for x in done}
        if not isinstance(done, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in done.items()):
            raise ValueError(f"'{self.name}.done' must map file names to {{sig, rows}}")
        for k, v in done.items():
            problem = _entry_problem(v)
            if problem is not None:
                raise ValueError(f"'{self.name}.done' entry {k!r:.120}: {problem}, got {v!r:.200}")
        cur = state.get("current")
        if cur is not None:
            if not (isinstance(cur, dict) and isinstance(cur.get("file"), str) and _is_count(cur.get("row"))
                    and (cur.get("sig") is None or Signature.from_json(cur.get("sig")) is not None)
                    and (cur.get("gen") is None or _is_count(cur.get("gen")))):
                raise ValueError(f"'{self.name}.current' must be null or {{\"file\": name, \"row\": n >= 0, "
                                 f"\"sig\": [size, mtime_ns, inode], \"gen\": n}}, got {cur!r:.200}")
            self._resume = {cur["file"]: (int(cur["row"]), Signature.from_json(cur.get("sig")),
                                          int(cur.get("gen") or 1))}
        self._done = {k: {"sig": v.get("sig"), "rows": v.get("rows"), "tail": v.get("tail"), "gen": v.get("gen", 0)}
                      for k, v in done.items()}

    def commit(self, position: Any) -> None:
        """Positions are kept by the checkpoint file."""

    # -- discovery ---------------------------------------------------------
    def _next_ready(self) -> tuple[str, int, Signature] | None:
        """The next file to read (rel, first row, signature), or None.

        One scan finds every file that is ready; they are read in order
        without scanning again until the list is used up or ``poll_seconds``
        have passed (each file is checked again when it is opened). A scan
        costs what changed, not what was read before
        (``dirscan.DirectoryIndex``); with nothing to read, the caller waits
        ``wait_hint()`` (``poll_seconds``) before polling again.
        """
        now = time.monotonic()
        # a scan costs O(files not yet read): with a large backlog, scan at most ~5 % of the time
        if self._ready and now - self._ready_at < max(self.poll_seconds, 1.0, 20 * self._scan_cost):
            return self._ready.pop(0)
        ready = self._scan_ready(now)
        self._scan_cost = time.monotonic() - now
        self._ready, self._ready_at = ready[1:], now
        return ready[0] if ready else None

    def _scan_ready(self, now: float) -> list[tuple[str, int, Signature]]:
        """Every file ready to be read now, in reading order (resumed first, then by modification time)."""
        wall_ns = time.time_ns()
        scan = self._index.scan()
        for gone in scan.gone:
            self._waiting.pop(gone, None)
            self._file_problems.pop(gone, None)
            self._done.pop(gone, None)  # deleted after it was read: nothing left to remember
        if scan.problem is not None:
            if scan.error is not None:
                self._environment_problem(scan.problem, "listing", scan.error)
            else:
                self._listing_problem = scan.problem
            return []
        self._listing_problem = None
        if not self._pruned:  # files read by an earlier run and deleted since: forget them (once)
            for gone in [k for k in self._done if k not in self._index.files]:
                del self._done[gone]
            self._pruned = True
        for rel, target in self._index.outside.items():
            if rel not in self._warned:
                log.warning("%s is a symbolic link out of the watched directory (to %s): not followed",
                            display_name(rel), display_name(target))
                self._warned.add(rel)
        ready: list[tuple[int, int, str, int, Signature]] = []
        for mtime_ns, rel, sig in scan.hot:
            start = self._start_row(rel, sig)
            if start is None:
                self._index.cool(rel)  # read, and unchanged: recheck it round-robin only
                self._waiting.pop(rel, None)
                continue
            w = self._waiting.get(rel)
            if w is None or w.sig != sig:
                w = self._waiting[rel] = _Waiting(sig, now)
            else:
                w.scans += 1
            if w.retry_at > now:
                continue
            # complete: unchanged for settle_seconds while we watched, or last modified that long ago
            settled = (self.settle_seconds <= 0 or now - w.since >= self.settle_seconds
                       or (wall_ns - mtime_ns) / 1e9 >= self.settle_seconds)
            if not settled or (self._unfinished(rel, sig) and now - w.since < self.incomplete_seconds):
                continue  # still being written, or unfinished and unchanged: give its writer time
            ready.append((0 if rel in self._resume else 1, mtime_ns, rel, start, sig))
        ready.sort()
        return [(rel, start, sig) for _, _, rel, start, sig in ready]

    def _appendable(self, rel: str) -> bool:
        """JSON lines and Arrow streams grow by whole rows; Parquet and Arrow files are rewritten."""
        fmt = file_format(rel)
        return fmt == "jsonl" or (fmt == "arrow" and not rel.lower().endswith((".arrow", ".feather")))

    def _unfinished(self, rel: str, sig: Signature) -> bool:
        """Was ``rel`` left with an unfinished tail at this very signature?"""
        done = self._done.get(rel)
        return done is not None and done.get("tail") is not None and Signature.from_json(done.get("sig")) == sig

    def _start_row(self, rel: str, sig: Signature) -> int | None:
        """Where to start reading ``rel`` now (None: nothing new in it)."""
        if rel in self._resume:
            row, old, _ = self._resume[rel]
            return row if old is None or old == sig or (self._appendable(rel) and sig.size > old.size) else 0
        done = self._done.get(rel)
        if done is None:
            return 0
        old = Signature.from_json(done.get("sig"))
        rows = done.get("rows")
        if old is None:
            return None  # read by an older streamembed that kept no signature
        if old == sig:
            return int(rows or 0) if done.get("tail") is not None else None
        if self._appendable(rel) and sig.size > old.size and rows is not None:
            return int(rows)  # appended to: read what is new
        if rows:
            if rel not in self._warned:
                log.warning("%s changed after it was read; reading it again (its rows may be output twice)",
                            display_name(rel))
                self._warned.add(rel)
            if self.metrics is not None:
                self.metrics.files_reread.inc()
        return 0

    def _open(self, rel: str, start: int, sig: Signature) -> bool:
        final = self._unfinished(rel, sig)  # unfinished for incomplete_seconds: take it as it is now
        try:
            opened = open_input(self._index.real_path(rel), follow_symlinks=False, mapping=self.mapping)
        except FileChanged:
            return False  # still changing: the next scan sees its new signature
        except FileNotFoundError:
            return False  # deleted since it was listed
        except OSError as exc:
            self._retry_later(rel, sig, exc)
            return False
        if opened.signature != sig:
            opened.close()  # changed since it was judged settled: the next scan looks at it again
            self._ready.clear()
            return False
        self._warned.discard(rel)
        self._file_problems.pop(rel, None)
        resumed = self._resume.pop(rel, None)
        self._waiting.pop(rel, None)
        gen = resumed[2] if resumed is not None else int(self._done.get(rel, {}).get("gen") or 0) + 1
        chunks = iter_file(opened.path, batch_rows=self.batch_rows, start_row=start,
                           max_block_rows=self.max_block_rows, name=display_name(rel), final=final, opened=opened)
        self._reading = _Reading(rel, start, opened.signature, chunks, gen)
        log.info("reading %s from row %d", display_name(rel), start)
        return True

    def _retry_later(self, rel: str, sig: Signature, exc: OSError) -> None:
        now = time.monotonic()
        w = self._waiting.get(rel)
        if w is None or w.sig != sig:
            w = self._waiting[rel] = _Waiting(sig, now)
        w.backoff = min(RETRY_MAX, max(RETRY_FIRST, 2 * w.backoff))
        w.retry_at = now + w.backoff
        self._environment_problem(f"cannot read {display_name(rel)}: {exc} (retrying in {w.backoff:.0f} s)",
                                  rel, exc)

    @property
    def problem(self) -> str | None:
        """Why the source cannot do its job now (the directory, or files it may not read), for /readyz."""
        if self._listing_problem is not None:
            return self._listing_problem
        if not self._file_problems:
            return None
        first = next(iter(self._file_problems.values()))
        more = len(self._file_problems) - 1
        return first + (f"; and {more} more file(s)" if more else "")

    def _environment_problem(self, text: str, key: str, exc: OSError) -> None:
        if self.metrics is not None:
            self.metrics.read_retries.labels(reason=errno.errorcode.get(exc.errno or 0, "other")).inc()
        if key not in self._warned:
            log.warning("%s", text)
            self._warned.add(key)
        if key == "listing":
            self._listing_problem = text
        else:
            self._file_problems[key] = text

    # -- polling -----------------------------------------------------------
    def poll(self) -> SourceBatch | None:
        while self._reading is None:
            nxt = self._next_ready()
            if nxt is None or (not self._open(*nxt) and not self._ready):
                self._idle = True
                return None
        self._idle = False
        r = self._reading
        assert r is not None
        label = f"{self.name}-{safe_label(r.rel, 64)}-{_short_hash(r.rel)}-g{r.gen}-r{r.row:012d}"
        name = display_name(r.rel)
        try:
            chunk = next(r.chunks, None)
        except FileChanged:
            log.warning("%s changed while it was read; it will be read again once it is complete", name)
            self._done[r.rel] = {"sig": _NEVER.as_json(), "rows": r.row, "tail": None, "gen": r.gen}
            self._reading = None
            return SourceBatch(None, self._position(), label, origin=RowOrigin(name, None, r.row))
        except OSError as exc:
            self._retry_later(r.rel, r.sig, exc)
            self._done[r.rel] = {"sig": _NEVER.as_json(), "rows": r.row, "tail": None, "gen": r.gen}
            self._reading = None
            return None
        if chunk is None or (chunk.table is None and not chunk.dead and chunk.tail is None):
            # end of file: an empty batch that marks the file done
            self._done[r.rel] = {"sig": r.sig.as_json(), "rows": r.row, "tail": None, "gen": r.gen}
            self._reading = None
            return SourceBatch(None, self._position(), label, origin=RowOrigin(name, None, r.row))
        r.row = chunk.end_row
        if chunk.tail is not None:
            # the rest is unfinished: wait for the file to grow (or for incomplete_seconds)
            self._done[r.rel] = {"sig": r.sig.as_json(), "rows": r.row, "tail": chunk.tail, "gen": r.gen}
            self._waiting[r.rel] = _Waiting(r.sig, time.monotonic())
            self._reading = None
            log.info("%s: %s; waiting for the rest", name, chunk.tail)
        elif chunk.dead and chunk.table is None and chunk.end_row == chunk.start_row:
            # unreadable file or unreadable rest: the file is finished
            self._done[r.rel] = {"sig": r.sig.as_json(), "rows": r.row, "tail": None, "gen": r.gen}
            self._reading = None
        return SourceBatch(chunk.table, self._position(), label, dead=chunk.dead,
                           origin=RowOrigin(name, chunk.rows, chunk.start_row))

    def wait_hint(self) -> float:
        return self.poll_seconds

    @property
    def caught_up(self) -> bool:
        return self._idle

    @property
    def backlog(self) -> int:
        """Files seen and not read yet (unsettled, unfinished or retrying)."""
        return len(self._waiting)

    @property
    def exhausted(self) -> bool:
        """Batch mode: every file read, and none still settling, unfinished or retrying."""
        return self.exit_when_idle and self._idle and self._reading is None and not self._waiting

    def close(self) -> None:
        self._reading = None


def preflight(cfg: Config) -> None:
    """Batch mode on a directory that does not exist would end at once, having read nothing, and exit 0 as if it
    had succeeded: refuse it (StartupError naming the path). A watching daemon waits for it instead."""
    d = cfg.directory
    path = Path(d.path)
    if not d.exit_when_idle or path.is_dir():
        return
    what = "is not a directory" if path.exists() else "does not exist"
    raise StartupError(f"directory.path = {d.path!r} ({path.absolute()}) {what}: batch mode "
                       f"(directory.exit_when_idle = true) has nothing to read; fix the path or create the directory")


def build_source(cfg: Config, context: SourceContext) -> SourceSetup:
    """The watched directory of ``cfg`` (``[directory]``, ``[source]``)."""
    d, s = cfg.directory, cfg.source
    preflight(cfg)
    if not Path(d.path).is_dir():
        log.warning("directory.path = %r (%s) does not exist (yet); waiting for it to appear", d.path,
                    Path(d.path).absolute())
    return SourceSetup(DirectorySource(d.path, pattern=d.pattern, batch_rows=s.batch_rows,
                                       settle_seconds=d.settle_seconds, poll_seconds=d.poll_seconds,
                                       max_block_rows=s.max_block_rows, exit_when_idle=d.exit_when_idle,
                                       incomplete_seconds=d.incomplete_seconds, metrics=context.metrics,
                                       mapping=d.mmap))
