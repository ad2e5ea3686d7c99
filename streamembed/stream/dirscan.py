"""Which files a watched directory holds, kept current at a cost that does not grow with the files already read.

A plain rescan lists and stats every file each time: 0.59 CPU-s for 20,000
files, every poll, forever (an idle daemon used 0.95 of a core). A
:class:`DirectoryIndex` does per scan only:

* one ``stat`` per watched directory; a directory is listed again only when
  its modification time changed (a file was added, removed or renamed), or
  when it was listed less than ``RACY_SECONDS`` after its last change (a change
  within the same timestamp tick would otherwise go unseen); listing reads
  names only (``os.scandir``), new names are stat'ed;
* a ``stat`` of every *hot* file: new, changed, not yet finished with by
  the caller (settling, retrying, unfinished tail), or modified less than
  ``WARM_SECONDS`` ago (a file just written is the one likely to be appended
  to);
* a ``stat`` of at most ``recheck`` (256) *cold* files (those the caller
  declared finished with :meth:`cool`), round-robin: a file changed in place
  long after it was read (appended to, rewritten) is noticed within
  ``files / recheck`` scans (20,000 files, a scan every 0.5 s: 40 s); a new
  or renamed file at the next scan.

So an idle directory of 20,000 finished files costs a few directory stats and
256 file stats per poll (measured: after 20,000 one-row files the idle daemon
used 0.7 % of a core).

Patterns (:func:`compile_pattern`) are globs on the path relative to the
directory, ``/``-separated: ``*``, ``?`` and ``[...]`` match within one name,
``**`` as a whole path segment matches zero or more directories (so
``**/*.parquet`` matches ``a.parquet`` and ``x/y/a.parquet``), ``**`` elsewhere
matches anything. A pattern without ``/`` or ``**`` matches files directly in
the directory only. Hidden names (``.x``, ``_x``) and ``*.tmp``/``*.part``
names are never matched, and hidden directories are not entered.

Symbolic links: a link whose target lies inside the directory is read as
that file; one that leads out of it (or nowhere) is not followed, and a
symlinked directory is not entered; :attr:`DirectoryIndex.outside` names the
links refused, for the caller to report once.
"""

from __future__ import annotations

import os
import re
import stat as statmod
import time
from dataclasses import dataclass, field
from pathlib import Path

from streamembed.config.schema import DirectoryConfig
from streamembed.stream.readers import Signature

__all__ = ["compile_pattern", "DirectoryIndex", "ScanResult", "is_hidden", "RECHECK_PER_SCAN", "RACY_SECONDS",
           "WARM_SECONDS"]

#: Cold files re-stat'ed per scan (round-robin).
RECHECK_PER_SCAN = 256
#: A file modified less than this long ago stays hot (stat'ed at every scan) even when the caller is done with it.
WARM_SECONDS = 10.0
#: A directory listed less than this long after its last change is listed again at the next scan.
RACY_SECONDS = 2.0
_SKIP_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload")


def is_hidden(name: str) -> bool:
    """Names never read: hidden (``.x``, ``_x``) or being written (``*.tmp``, ``*.part``, ...)."""
    return name.startswith((".", "_")) or name.endswith(_SKIP_SUFFIXES)


def _segment(seg: str) -> str:
    out, i = [], 0
    while i < len(seg):
        ch = seg[i]
        if ch == "*":
            if seg.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            j = seg.find("]", i + 2 if seg.startswith(("[!", "[^"), i) else i + 1)
            if j < 0:
                out.append(re.escape(ch))
            else:
                body = seg[i + 1:j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def compile_pattern(pattern: str) -> tuple[re.Pattern[str], bool]:
    """(regex on the relative path, whether subdirectories are searched) for a glob (see the module doc)."""
    segs = [s for s in pattern.strip("/").split("/") if s != ""] or ["*"]
    parts: list[str] = []
    for k, seg in enumerate(segs):
        last = k == len(segs) - 1
        if seg == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_segment(seg) + ("" if last else "/"))
    deep = len(segs) > 1 or "**" in pattern
    return re.compile("".join(parts) + r"\Z", re.S), deep


@dataclass
class _Dir:
    mtime_ns: int = -1
    listed_wall: float = 0.0
    files: set[str] = field(default_factory=set)  # matching entries (relative paths)
    dirs: set[str] = field(default_factory=set)  # subdirectories (relative paths)


@dataclass
class ScanResult:
    """One scan: the hot files (mtime_ns, rel, signature) and the relative paths gone since the last scan."""

    hot: list[tuple[int, str, Signature]]
    gone: list[str]
    problem: str | None = None
    error: OSError | None = None
    listed: int = 0  # directories listed in this scan
    statted: int = 0  # files stat'ed in this scan


class DirectoryIndex:
    """The files under ``directory`` matching ``pattern`` (see the module doc)."""

    def __init__(self, directory: str | os.PathLike[str], pattern: str = DirectoryConfig.pattern,
                 recheck: int = RECHECK_PER_SCAN) -> None:
        self.directory = Path(directory)
        self._root = os.path.join(os.fspath(self.directory), "")  # with its trailing separator
        self.pattern = pattern
        self.regex, self.deep = compile_pattern(pattern)
        self.recheck = int(recheck)
        self.files: dict[str, Signature | None] = {}  # every matching file known, with its last signature
        self.outside: dict[str, str] = {}  # links leading out of the directory: rel -> where they point
        self._dirs: dict[str, _Dir] = {}
        self._hot: set[str] = set()
        self._cold: set[str] = set()
        self._order: list[str] = []  # the round of cold rechecks (entries no longer cold are skipped)
        self._cursor = 0
        self._root_real: str | None = None

    # ------------------------------------------------------------------ the caller's view
    def cool(self, rel: str) -> None:
        """The caller is done with ``rel`` at its current signature: recheck it round-robin from now on
        (once it has not been modified for ``WARM_SECONDS``: a file just written may well be appended to)."""
        sig = self.files.get(rel)
        if rel in self._hot and sig is not None and time.time_ns() - sig.mtime_ns > WARM_SECONDS * 1e9:
            self._hot.discard(rel)
            self._cold.add(rel)
            self._order.append(rel)

    def heat(self, rel: str) -> None:
        """Stat ``rel`` at every scan again."""
        if rel in self.files and rel not in self._hot:
            self._cold.discard(rel)
            self._hot.add(rel)

    def real_path(self, rel: str) -> Path:
        """Where to open ``rel``: itself, or the target of a link that stays inside the directory."""
        p = self.directory / rel
        return Path(os.path.realpath(p)) if os.path.islink(p) else p

    # ------------------------------------------------------------------ scanning
    def scan(self) -> ScanResult:
        result = ScanResult([], [])
        try:
            st = os.stat(self.directory)
        except FileNotFoundError:
            result.problem = f"input directory {self.directory} does not exist (yet)"
            result.gone = list(self.files)
            self._forget_all()
            return result
        except OSError as exc:
            result.problem, result.error = f"cannot list input directory {self.directory}: {exc}", exc
            return result
        if not statmod.S_ISDIR(st.st_mode):
            result.problem = f"input directory {self.directory} is not a directory"
            return result
        self._root_real = os.path.realpath(self.directory)
        try:
            self._visit("", st, result)
        except OSError as exc:
            result.problem, result.error = f"cannot list input directory {self.directory}: {exc}", exc
            return result
        for rel in list(self._hot):
            self._stat_into(rel, result)
        self._recheck(result)
        return result

    def _recheck(self, result: ScanResult) -> None:
        """Stat the next ``recheck`` cold files of the round; a changed one turns hot, a vanished one is gone."""
        order, cold, files = self._order, self._cold, self.files
        if len(order) > 2 * len(cold) + 1024:  # compact the round: drop entries that left it
            order[:] = [rel for rel in order if rel in cold]
            self._cursor = 0
        budget = min(self.recheck, len(cold))
        changed: list[tuple[str, Signature | None]] = []
        i = self._cursor
        while budget > 0 and order:
            if i >= len(order):
                i = 0
            rel = order[i]
            i += 1
            if rel not in cold:
                continue
            budget -= 1
            new = self._stat(rel)
            if new != files.get(rel):
                changed.append((rel, new))
        self._cursor = i
        result.statted += min(self.recheck, len(cold))
        for rel, new in changed:
            if new is None:
                self._drop(rel, result)
            else:
                files[rel] = new
                self.heat(rel)
                result.hot.append((new.mtime_ns, rel, new))

    def _visit(self, rel_dir: str, st: os.stat_result, result: ScanResult) -> None:
        d = self._dirs.get(rel_dir)
        if d is None:
            d = self._dirs[rel_dir] = _Dir()
        if st.st_mtime_ns != d.mtime_ns or d.listed_wall - st.st_mtime_ns / 1e9 < RACY_SECONDS:
            self._list(rel_dir, d, st, result)
        for sub in sorted(d.dirs):
            try:
                sst = os.stat(self.directory / sub, follow_symlinks=False)
            except OSError:
                sst = None
            if sst is None or not statmod.S_ISDIR(sst.st_mode):
                self._drop_dir(sub, result)
                d.dirs.discard(sub)
                continue
            self._visit(sub, sst, result)

    def _list(self, rel_dir: str, d: _Dir, st: os.stat_result, result: ScanResult) -> None:
        path = self.directory / rel_dir if rel_dir else self.directory
        wall = time.time()
        files: set[str] = set()
        dirs: set[str] = set()
        with os.scandir(path) as it:
            for entry in it:
                name = entry.name
                if is_hidden(name):
                    continue
                rel = f"{rel_dir}/{name}" if rel_dir else name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    if self.deep:
                        dirs.add(rel)
                    continue
                if self.regex.match(rel):
                    files.add(rel)
        result.listed += 1
        for rel in files - d.files:
            self.files[rel] = None
            self._hot.add(rel)
        for rel in d.files - files:
            self._drop(rel, result)
        for sub in d.dirs - dirs:
            self._drop_dir(sub, result)
        d.files, d.dirs = files, dirs
        d.mtime_ns, d.listed_wall = st.st_mtime_ns, wall

    def _stat(self, rel: str) -> Signature | None:
        """The signature of the regular file ``rel`` (a link inside the directory: of its target); None if none."""
        path = self._root + rel  # strings, not Paths: this runs for every hot file at every scan
        try:
            st = os.stat(path, follow_symlinks=False)
            if statmod.S_ISLNK(st.st_mode):
                target = os.path.realpath(path)
                root = self._root_real or os.path.realpath(self.directory)
                if os.path.commonpath([root, target]) != root or target == root:
                    self.outside[rel] = target
                    return None
                self.outside.pop(rel, None)
                st = os.stat(target, follow_symlinks=False)
        except (OSError, ValueError):
            return None
        if not statmod.S_ISREG(st.st_mode):
            return None
        return Signature(st.st_size, st.st_mtime_ns, st.st_ino)

    def _stat_into(self, rel: str, result: ScanResult) -> None:
        sig = self._stat(rel)
        result.statted += 1
        if sig is None:
            if not os.path.lexists(self._root + rel):
                self._drop(rel, result)
            else:  # a link out of the directory, a FIFO, a dangling link: not a file to read; look again later
                self.files[rel] = None
            return
        self.files[rel] = sig
        result.hot.append((sig.mtime_ns, rel, sig))

    def _drop(self, rel: str, result: ScanResult) -> None:
        if rel in self.files:
            del self.files[rel]
            result.gone.append(rel)
        self._hot.discard(rel)
        self._cold.discard(rel)
        self.outside.pop(rel, None)

    def _drop_dir(self, rel_dir: str, result: ScanResult) -> None:
        d = self._dirs.pop(rel_dir, None)
        if d is None:
            return
        for rel in d.files:
            self._drop(rel, result)
        for sub in d.dirs:
            self._drop_dir(sub, result)

    def _forget_all(self) -> None:
        self.files.clear()
        self._dirs.clear()
        self._hot.clear()
        self._cold.clear()
        self._order.clear()
        self._cursor = 0
        self.outside.clear()
