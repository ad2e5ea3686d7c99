"""Creating files and directories safely: exclusive temporary files, no symbolic links followed, explicit modes.

Everything streamembed writes (outputs, dead letters, checkpoint, crash
guard, pid file, models, histories) is created through here:

* **Temporary files** are ``.<final name>.<random>.tmp`` in the target's own
  directory, created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: a name nobody can
  predict, and never an existing file or a link planted in its place (a link
  at ``.checkpoint.json.tmp`` used to be followed: its target overwritten,
  and ``checkpoint.json`` renamed into a link). A crashed writer's leftovers
  are removed by :func:`clean_temps`.
* **Appended and state files** are opened with ``O_NOFOLLOW``.
* **Modes** are explicit, whatever the process umask: files ``FILE_MODE``
  (0640), directories ``DIR_MODE`` (0750) by default; the daemon sets them
  from ``output.file_mode`` / ``output.dir_mode`` (:func:`set_modes`), which
  also narrows the umask so that files created elsewhere (pyarrow, numpy,
  the refit worker) are no more open than that. Existing directories are
  left as they are.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
from pathlib import Path
from typing import BinaryIO
from collections.abc import Iterator

__all__ = ["FILE_MODE", "DIR_MODE", "set_modes", "modes", "parse_mode", "make_dirs", "create_temp", "clean_temps",
           "temp_name", "open_append", "open_state", "temporary_file"]

#: Default modes of the files and directories streamembed creates.
FILE_MODE, DIR_MODE = 0o640, 0o750
_MODES = [FILE_MODE, DIR_MODE]
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def parse_mode(text: str) -> int:
    """An octal mode such as "0640" or "640" (ValueError otherwise)."""
    t = text.strip().lower().removeprefix("0o")
    if not t or len(t) > 4 or any(c not in "01234567" for c in t):
        raise ValueError(f"{text!r} is not an octal file mode such as '0640'")
    return int(t, 8)


def set_modes(file_mode: int, dir_mode: int, *, umask: bool = True) -> int | None:
    """Use these modes from now on; with ``umask``, narrow the process umask to them. Returns the old umask."""
    _MODES[0], _MODES[1] = int(file_mode) & 0o7777, int(dir_mode) & 0o7777
    if not umask:
        return None
    # what neither mode grants is masked for files and directories created by other code too
    return os.umask(0o777 & ~(_MODES[0] | _MODES[1]))


def modes() -> tuple[int, int]:
    """(file mode, directory mode) in use."""
    return _MODES[0], _MODES[1]


def make_dirs(path: str | os.PathLike[str]) -> Path:
    """``mkdir -p`` whose new directories get the directory mode exactly (existing ones are not touched)."""
    p = Path(path)
    missing = []
    q = p
    while not q.exists():
        missing.append(q)
        if q.parent == q:
            break
        q = q.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, _MODES[1])
        except FileExistsError:
            continue
        os.chmod(d, _MODES[1])  # the umask may have taken bits the mode grants
    if not p.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(p))
    return p


def temp_name(final_name: str) -> str:
    """A fresh temporary name for ``final_name``: ``.<final_name>.<16 random hex digits>.tmp``."""
    return f".{final_name}.{secrets.token_hex(8)}.tmp"


def create_temp(directory: str | os.PathLike[str], final_name: str) -> tuple[BinaryIO, Path]:
    """A new, empty temporary file for ``final_name`` in ``directory``: (binary file object, its path).

    Created exclusively and without following links, with the file mode, and held under an exclusive
    ``flock`` while it is open, so that :func:`clean_temps` of another process sharing the directory
    never removes it; the caller writes, fsyncs and renames it (``atomic.publish``) *before* closing it
    (closed first, it is a leftover to another process's :func:`clean_temps` until renamed), or unlinks it.
    """
    d = Path(directory)
    for _ in range(16):
        path = d / temp_name(final_name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, _MODES[0])
        except FileExistsError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process's clean_temps took it in between: it removes it
            os.close(fd)
            continue
        if not _names(path, fd):  # a clean_temps took and removed it before the lock was ours: another name
            os.close(fd)
            continue
        try:
            os.fchmod(fd, _MODES[0])  # the umask may have taken bits the mode grants
            return os.fdopen(fd, "wb"), path
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(d))


@contextlib.contextmanager
def temporary_file(directory: str | os.PathLike[str], final_name: str) -> Iterator[tuple[BinaryIO, Path]]:
    """:func:`create_temp` as a context: the file is closed at the end, and removed if the block raised."""
    fh, path = create_temp(directory, final_name)
    try:
        with fh:
            yield fh, path
    except BaseException:
        path.unlink(missing_ok=True)
        raise


_CLEANED: set[tuple[str, str]] = set()


def clean_temps(directory: str | os.PathLike[str], final_name_glob: str, *, once: bool = True,
                legacy: bool = True) -> int:
    """Remove temporary files a crashed writer left for names matching ``final_name_glob``; returns how many.

    ``once``: at most once per process for a (directory, glob) (leftovers come only from an earlier process).
    ``legacy``: also the fixed ``.<name>.tmp`` of older versions (a link there is removed, not followed).
    A file a live writer holds (its ``flock``, :func:`create_temp`) is left alone: a directory may be
    shared by processes writing files of the same names (Kafka replicas).
    """
    key = (os.fspath(directory), final_name_glob)
    if once and key in _CLEANED:
        return 0
    _CLEANED.add(key)
    n = 0
    found = list(Path(directory).glob(f".{final_name_glob}.*.tmp"))
    if legacy:
        found += [p for p in Path(directory).glob(f".{final_name_glob}.tmp") if p not in found]
    for p in found:
        try:
            if p.is_symlink():
                p.unlink()
                n += 1
            elif p.is_file():
                n += _remove_unheld(p)
        except OSError:
            pass
    return n


def _remove_unheld(path: Path) -> int:
    """Unlink ``path`` unless a live writer holds its ``flock``; 1 if removed. The unlink happens under the lock,
    so a writer that creates the name meanwhile (:func:`create_temp`) either fails to lock it or finds it gone."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not _names(path, fd):  # renamed or replaced since it was opened: not the file looked at
            return 0
        path.unlink()
        return 1
    except BlockingIOError:
        return 0
    finally:
        os.close(fd)


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed, renamed or replaced meanwhile)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _open_flags(path: Path, flags: int) -> int:
    """Open ``path`` with ``flags``, never through a link; a file it creates gets the file mode."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, _MODES[0])
    except FileExistsError:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC)
    os.fchmod(fd, _MODES[0])
    return fd


def open_append(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for appending (created with the file mode if missing; a link is refused: ELOOP)."""
    return os.fdopen(_open_flags(Path(path), os.O_WRONLY | os.O_APPEND), "ab")


def open_state(path: str | os.PathLike[str]) -> int:
    """A file descriptor of ``path`` for reading and writing in place (created with the file mode; no links)."""
    return _open_flags(Path(path), os.O_RDWR)
