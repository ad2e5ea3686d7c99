"""Atomic, durable file publication: the one helper behind sinks, checkpoints and model files.

A file appears complete under its final name or not at all, and survives a
power loss once published: write to a temporary name in the same directory,
fsync the file, rename it over the final name, fsync the directory. The
temporary file is created by ``fsafe.create_temp``: a random name, created
exclusively, never through a symbolic link, with the configured file mode.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO
from collections.abc import Iterator

from streamembed.fsafe import clean_temps, create_temp

__all__ = ["atomic_write_bytes", "atomic_file", "publish", "fsync_dir", "fsync_file", "glob_escape", "with_path",
           "naming_path"]


def with_path(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """``exc`` naming ``path`` (an OSError of the same errno, caused by ``exc``); ``exc`` itself if it names one.

    ``write``/``fsync`` (and pyarrow's writers) raise "[Errno 28] No space left
    on device" without the file: the operator must be told which disk.
    """
    if exc.filename is not None or exc.errno is None:
        return exc
    named = OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))  # the errno's subclass
    named.__cause__ = exc
    return named


@contextlib.contextmanager
def naming_path(path: str | os.PathLike[str]) -> Iterator[None]:
    """Re-raise an OSError of the block that names no file as one that names ``path`` (:func:`with_path`)."""
    try:
        yield
    except OSError as exc:
        named = with_path(exc, path)
        if named is exc:
            raise
        raise named from exc


def fsync_file(path: str | os.PathLike[str]) -> None:
    """fsync the file at ``path`` (by name: for files another library wrote and closed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with naming_path(path):
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename inside it survives a power loss."""
    fsync_file(path)


def publish(fh: BinaryIO, tmp: str | os.PathLike[str], final: str | os.PathLike[str]) -> Path:
    """Make the finished temporary file ``tmp``, still open as ``fh``, durable under ``final`` (same directory).

    ``fh`` is flushed and fsynced before the rename, so every byte written
    through it (a Parquet footer still in its buffer) is under the final name
    the moment it appears; it stays open, and its ``flock`` held, until the
    caller closes it after the rename (``fsafe.create_temp``).
    """
    with naming_path(tmp):
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    fsync_dir(Path(final).parent)
    return Path(final)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], *, clean: bool = True) -> Iterator[BinaryIO]:
    """``with atomic_file(p) as fh: fh.write(...)``: ``p`` appears complete or not at all.

    The parent directory must exist. The temporary file is
    ``.<name>.<random>.tmp`` beside it (``fsafe.create_temp``); on an exception
    it is removed. ``clean``: what a crashed writer left for ``p`` is removed
    before its first write in a process (writers of many names, such as
    sinks, clean their own prefix once instead).
    """
    path = Path(path)
    if clean:
        clean_temps(path.parent, glob_escape(path.name))
    fh, tmp = create_temp(path.parent, path.name)
    try:
        with naming_path(tmp), fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
            os.replace(tmp, path)  # while its flock is held: no other process's clean_temps can take it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def glob_escape(name: str) -> str:
    """``name`` as a glob that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, clean: bool = True) -> None:
    """Write ``data`` to ``path`` atomically and durably (``clean``: see :func:`atomic_file`)."""
    with atomic_file(path, clean=clean) as fh:
        fh.write(data)
