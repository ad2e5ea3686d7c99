"""Open one version of a file: memory-mapped, snapshot, streamed or progressive (:func:`open_input`).

Files are memory-mapped only when the caller's ``mapping`` mode selects them
(:mod:`streamembed.stream.mapped`; off by default: a file that shrinks under a
mapping kills the process with SIGBUS, so only files immutable once published
may be mapped); a mapped Arrow IPC file is decoded in place, a mapped Parquet
file from the page cache. Otherwise a file up to the read budget
(``memlimit.read_budget``: a sixteenth of the process's memory limit, at most
``SNAPSHOT_BYTES``) is read into memory in one go (then decoded zero-copy from
that snapshot, :mod:`.slabs`), a larger one streamed with plain reads, a row
group or record batch at a time, so the memory a file takes follows the memory
limit, never the file size. Either way the file's size, modification time and
inode are checked not to have changed while it was read (else
:class:`~streamembed.stream.readers.base.FileChanged`), so that a file is read
whole or not at all; :mod:`.progressive` trades that for overlap.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from streamembed.memlimit import read_budget
from streamembed.stream.mapped import MappedFile, map_file, should_map
from streamembed.stream.readers.base import SNAPSHOT_BYTES, FileChanged, Signature, file_format, signature
from streamembed.stream.readers.progressive import Filling, OpenParquet
from streamembed.stream.readers.slabs import read_into, shared_pool


class Input:
    """An opened input: ``native`` (Arrow) and ``binary`` (JSON) views of one version of a file.

    ``snapshot`` is the whole file in memory (a uint8 array), or None: then
    either ``filling`` reads it progressively (Arrow IPC), or ``open_parquet``
    (Parquet: its row groups read into pooled slabs as they are reached,
    ``readers.parquet_fill``), or it is read with plain reads (files over the
    snapshot size).
    """

    def __init__(self, path: Path, snapshot: np.ndarray | bytes | None, sig: Signature,
                 filling: Filling | None = None, mapped: MappedFile | None = None,
                 open_parquet: OpenParquet | None = None) -> None:
        self.path, self.snapshot, self.signature, self.filling = path, snapshot, sig, filling
        self.mapped = mapped  # the snapshot is a memory mapping of the file (``stream.mapped``)
        self.open_parquet = open_parquet

    def _whole(self) -> np.ndarray | bytes | None:
        if self.filling is not None and self.snapshot is None:
            self.snapshot = self.filling.whole()
        if self.open_parquet is not None and self.snapshot is None:
            self.snapshot = self.open_parquet.whole()
        return self.snapshot

    def finish(self) -> None:
        """A progressive read: read the rest and check that the whole file was one version (else FileChanged)."""
        if self.filling is not None:
            self.filling.finish()
        if self.open_parquet is not None:
            self.open_parquet.finish()

    def native(self) -> pa.NativeFile:
        whole = self._whole()
        return pa.BufferReader(pa.py_buffer(whole)) if whole is not None else pa.OSFile(str(self.path))

    def binary(self) -> io.BufferedIOBase:
        whole = self._whole()
        if whole is None:
            return open(self.path, "rb")  # the caller closes it
        return io.BytesIO(whole.data if isinstance(whole, np.ndarray) else memoryview(whole))

    def check(self) -> None:
        """Raise FileChanged if the file on disk is no longer the version being read (streamed or mapped reads)."""
        if self.mapped is not None:
            if self.mapped.fd is not None and signature(self.mapped.stat()) != self.signature:
                raise FileChanged(f"{self.path} changed while it was read (it is memory-mapped: files that change "
                                  f"in place must not be, see --mmap / directory.mmap)")
            return
        if self.snapshot is None and self.filling is None and self.open_parquet is None \
                and signature(os.stat(self.path)) != self.signature:
            raise FileChanged(f"{self.path} changed while it was read")

    def close(self) -> None:
        if self.filling is not None:
            self.filling.close()
        if self.open_parquet is not None:
            self.open_parquet.close()
        if self.mapped is not None:
            self.mapped.close()


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0))


def open_input(path: str | os.PathLike[str], snapshot_bytes: int | None = None, *,
               progressive: bool = False, follow_symlinks: bool = True, mapping: str = "never") -> Input:
    """Open one version of ``path``: read into memory if small enough, checked for changes either way.

    ``progressive`` (see the module doc): Arrow IPC files are read as
    decoding reaches them; Parquet and JSON lines are still read whole.
    ``mapping`` (``stream.mapped``: never, auto, always): an Arrow IPC or
    Parquet file it selects is memory-mapped instead, whatever its size.
    Raises OSError (the environment: missing, permissions, I/O) or
    FileChanged. ``follow_symlinks`` False: a symbolic link at ``path`` is not
    opened (OSError ELOOP; the directory source resolves the links it allows).
    """
    p = Path(path)
    opener = None if follow_symlinks else _no_follow
    fmt = file_format(p)
    if mapping != "never" and fmt in ("arrow", "parquet"):
        opened = _open_mapped(p, mapping)
        if opened is not None:
            return opened
    if snapshot_bytes is None:
        snapshot_bytes = min(SNAPSHOT_BYTES, read_budget())
    if progressive and fmt in ("arrow", "parquet"):
        fh = open(p, "rb", buffering=0, opener=opener)  # noqa: SIM115 - closed by Filling.finish/close
        try:
            sig = signature(os.fstat(fh.fileno()))
            if sig.size > snapshot_bytes:
                fh.close()
                return Input(p, None, sig)
            if fmt == "parquet":
                return Input(p, None, sig, open_parquet=OpenParquet(p, fh, sig))
            return Input(p, None, sig, filling=Filling(p, fh, sig))
        except BaseException:
            fh.close()
            raise
    with open(p, "rb", buffering=0, opener=opener) as fh:
        before = signature(os.fstat(fh.fileno()))
        if before.size > snapshot_bytes:
            return Input(p, None, before)
        # into a pooled buffer (a view of it: the slab is reused once the file's batches are gone), one
        # byte more than the size: a file that grew reads longer
        data = shared_pool().get(before.size + 1)[:before.size + 1]
        got = read_into(fh, data)
        after = signature(os.fstat(fh.fileno()))
    if after != before or got != before.size or signature(os.stat(p)) != before:
        raise FileChanged(f"{p} changed while it was read ({before.size} -> {got} bytes)")
    return Input(p, data[:got], before)


def _open_mapped(p: Path, mode: str) -> Input | None:
    """``p`` memory-mapped when ``mode`` selects it (``stream.mapped.should_map``), else None (copy it)."""
    if not should_map(p, os.stat(p), mode):
        return None
    try:
        mf, st = map_file(p)
    except (OSError, ValueError):  # no address space for it (RLIMIT_AS), an empty file: read it as any other
        return None
    if not should_map(p, st, mode):  # replaced by another version between the stat and the open
        mf.close()
        return None
    return Input(p, mf.data, signature(st), mapped=mf)


def looks_unfinished(src: Input, magics: tuple[bytes, ...]) -> bool:
    """Could this unreadable file be one still being written? (Empty, or it starts as the format starts.)"""
    head = src.native().read(8)
    return len(head) == 0 or any(head.startswith(m) or m.startswith(head) for m in magics)
