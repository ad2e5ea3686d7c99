"""Memory-mapped input files: zero-copy reads of files that are immutable once published.

Reading a file into memory costs a copy (0.09 CPU-s for 600 MB from the page
cache here) and, in a fresh process, the page faults and zeroing of the
buffers it lands in (another 0.1-0.4 s); a mapping costs neither: Arrow IPC
batches are decoded in place, and Parquet pages are decoded straight from the
page cache. The price: a file that shrinks while it is mapped kills the
process with SIGBUS (no language-level handler can survive it), so only files
that nobody truncates or rewrites in place may be mapped. Files published by
the rename protocol (written under a temporary name, fsynced, renamed into
place: docs/formats.md, "Files and checkpoints") are such files: a later version is a
new inode, and the mapped one stays intact until it is unmapped.

``mode`` (``embed --mmap``, ``directory.mmap``):

* ``never``: always copy (the reader's snapshot or progressive read);
* ``always``: map every Arrow IPC and Parquet file (the producers promise the
  rename protocol);
* ``auto`` (default): map a file whose inode changed after its last write
  (ctime later than mtime: it was renamed, linked, or had its modification
  time restored, as ``cp -p``, ``rsync`` and ``tar`` do, since it was last
  written), which a file still being written in place never is (each write
  sets both to the same instant). A rename within the same clock tick as the
  last write looks unchanged and is copied: the safe side. (A producer that
  fsyncs before its rename, as the protocol says, is detected.)

``streamembed embed`` (one shot, its output written atomically) maps every
Arrow IPC and Parquet file under ``auto`` instead (``exit_on_truncation``):
a file truncated under its mapping then ends the command with a message and
exit 2, nothing written; one that changed is caught by the checks below.

A mapped file is still checked against the version that was opened (its size,
modification time and inode, by ``fstat`` between chunks and at the end), as
copied files are: a change raises ``readers.FileChanged`` and the reader deals
with the rest as before. JSON lines are always copied (their parser copies
anyway).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path
from typing import Final

import numpy as np

from streamembed.config.schema import choices

__all__ = ["MAP_MODES", "published_by_rename", "should_map", "map_file", "MappedFile", "exit_on_truncation"]

#: Values of ``embed --mmap`` and ``directory.mmap`` (the schema's choices).
MAP_MODES: Final[tuple[str, ...]] = choices("directory.mmap")
_MAPPABLE = (".parquet", ".pq", ".arrow", ".arrows", ".ipc", ".feather")


def published_by_rename(st: os.stat_result) -> bool:
    """The inode changed (renamed, linked, times restored) after its last write: not being written in place."""
    return int(st.st_ctime_ns) > int(st.st_mtime_ns)


def should_map(path: str | os.PathLike[str], st: os.stat_result, mode: str) -> bool:
    """Whether ``mode`` maps this file (an Arrow IPC or Parquet file of at least one byte)."""
    if mode not in MAP_MODES:
        raise ValueError(f"mmap mode must be one of {MAP_MODES}, got {mode!r}")
    if mode == "never" or st.st_size == 0 or Path(path).suffix.lower() not in _MAPPABLE:
        return False
    return mode == "always" or published_by_rename(st)


def exit_on_truncation(message: str, code: int) -> bool:
    """From now on, a file truncated under a mapping ends the process with ``message`` and exit ``code`` instead of
    a bare SIGBUS (the compiled extension's handler: write and _exit); False when the extension is not built.

    For a one-shot command that writes its output atomically (``streamembed embed``): its inputs can then be
    mapped whatever their history, because the worst a change under the mapping can do is end the command
    with that message and nothing written. A long-running process must not (it would lose its other work):
    the daemon keeps ``auto``'s rule.
    """
    try:
        from streamembed.core import _native
    except ImportError:
        return False
    _native.exit_on_sigbus(message.encode(), int(code))
    return True


class MappedFile:
    """A read-only shared mapping of one version of a file, and the descriptor it was made from.

    ``data`` is the whole file as a uint8 array over the mapping; arrays
    decoded from it keep the mapping alive (it is unmapped when the last one
    is gone, never explicitly). ``fd`` stays open until :meth:`close` so that
    the reader can ``fstat`` the very inode it maps.
    """

    def __init__(self, fd: int, data: np.ndarray) -> None:
        self.fd: int | None = fd
        self.data = data

    def stat(self) -> os.stat_result:
        if self.fd is None:
            raise ValueError("the mapped file is closed")
        return os.fstat(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def map_file(path: str | os.PathLike[str]) -> tuple[MappedFile, os.stat_result]:
    """Map ``path`` read-only; (the mapping, the fstat of the inode mapped). Raises OSError (or ValueError if empty)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        mm = mmap.mmap(fd, st.st_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except BaseException:
        os.close(fd)
        raise
    if hasattr(mm, "madvise"):
        for advice in ("MADV_SEQUENTIAL", "MADV_WILLNEED"):
            if hasattr(mmap, advice):
                with contextlib.suppress(OSError):  # advice is a hint
                    mm.madvise(getattr(mmap, advice))
    return MappedFile(fd, np.frombuffer(mm, dtype=np.uint8)), st
