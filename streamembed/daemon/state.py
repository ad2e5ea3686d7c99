"""A run's state in ``output.root``: which map it belongs to, its refitted models, its pid lock, its leftovers.

One root holds one map's run. The checkpoint records the lineage and version
of the model it was written with (``stream.checkpoint``); at start the daemon
resumes from the root only if that lineage is the configured model's,
otherwise it refuses and says how to go on (a new root, or ``--fresh``, which
moves the old run aside). Refitted models found in ``<root>/models`` are used
only when they descend from the configured model (same lineage, newer
version), so a leftover model of another run can never replace it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import secrets
import shutil
import time
from pathlib import Path

from streamembed.atomic import atomic_file, glob_escape, naming_path

from streamembed.core.model import LandmarkModel
from streamembed.daemon.errors import EnvironmentUnavailable, StartupError
from streamembed.fsafe import clean_temps, make_dirs, open_state
from streamembed.config.schema import Config
from streamembed.stream.checkpoint import Checkpoint

__all__ = ["describe_model", "check_lineage", "archive_run", "descendants", "clean_refit_dirs", "clean_leftovers",
           "PidLock",
           "process_start_time", "model_record", "writer_tag", "WRITER_ID_FILE"]

log = logging.getLogger("streamembed.daemon")

#: What ``--fresh`` moves aside (relative to output.root, when they are the default locations).
_RUN_FILES = ("checkpoint.json", "crash-guard.json", "models", "model-history.jsonl", "drift-history.jsonl",
              "writer-id")


def model_record(model: LandmarkModel, source: str) -> dict[str, object]:
    """What a checkpoint records about the model: lineage, version, landmarks and where it came from."""
    return {"lineage": model.lineage, "version": int(model.version), "landmarks": int(model.n_landmarks),
            "source": source}


def describe_model(model: LandmarkModel, source: str) -> str:
    """One line for the start-up log: lineage, version, size, what input rows carry, where the model came from."""
    if model.features is None:
        rows = f"{model.input_kind} input"
    elif model.has_objects:  # rows carry objects (the engine computes their dissimilarities)
        rows = (f"object input ({len(model.features)} landmark objects, metric {model.metric}; dissimilarity rows "
                f"also accepted)")
    else:  # rows carry features (the engine computes their dissimilarities); precomputed rows work too
        how = "kernel" if model.input_kind == "similarity" else "metric"
        rows = (f"feature input (p = {model.features.shape[1]}, {model.metric} {how}; {model.input_kind} rows "
                f"also accepted)")
    return (f"lineage {model.lineage} version {model.version} ({model.n_landmarks} landmarks, d = "
            f"{model.n_components}, {rows}, from {source})")


def check_lineage(ckpt: Checkpoint | None, model: LandmarkModel, source: str, cfg: Config) -> None:
    """Refuse to resume a run of another map (StartupError naming both and the ways forward)."""
    if ckpt is None:
        return
    if ckpt.lineage is None:
        log.warning("the checkpoint %s was written by an older streamembed that did not record its model; "
                    "assuming it belongs to the configured model", cfg.checkpoint_path)
        return
    if ckpt.lineage == model.lineage:
        return
    m = ckpt.model or {}
    theirs = (f"lineage {ckpt.lineage} version {m.get('version')} ({m.get('landmarks', '?')} landmarks, "
              f"from {m.get('source', '?')})")
    raise StartupError(
        f"output.root = {cfg.output.root!r} holds the run of another map: its checkpoint {cfg.checkpoint_path} was "
        f"written with model {theirs}, but the configured model is {describe_model(model, source)}. Either give "
        f"this model its own output root (--set output.root=DIR), or start over in this root with `streamembed run "
        f"--fresh` (moves the old run aside to {cfg.root}/previous-<time>/ ; nothing is deleted)")


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def archive_run(cfg: Config) -> Path | None:
    """``--fresh``: move the previous run aside to ``<root>/previous-<time>/``; returns where, or None.

    Moved: its state (checkpoint, crash guard, saved and refitted models, histories) and, when they lie inside
    output.root, its output and dead-letter directories, so that the new run's output holds one map's
    rows only. Output directories configured outside output.root stay where they are (a WARNING names
    them: they still hold the old run's rows).
    """
    root = cfg.root
    present = [root / name for name in _RUN_FILES if (root / name).exists()]
    for extra in (cfg.checkpoint_path, cfg.model_dir, cfg.history_path):
        if extra.exists() and extra not in present:
            present.append(extra)
    saved = root / "model.npz"  # the map a generator-fitted run kept (unless it is the model this run loads)
    if saved.is_file() and not (cfg.model.path and Path(cfg.model.path).resolve() == saved.resolve()):
        present.append(saved)
    for outdir in (cfg.embeddings_dir, cfg.dead_letter_dir):
        if not outdir.is_dir() or outdir in present or not any(outdir.iterdir()):
            continue
        if _inside(outdir, root) and outdir.resolve() != root.resolve():
            present.append(outdir)
        else:
            log.warning("--fresh: %s is outside output.root and keeps the previous run's files; the new run "
                        "writes beside them", outdir)
    if not present:
        return None
    dest = root / f"previous-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    k = 1
    while dest.exists():
        dest = root / f"previous-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{k}"
        k += 1
    make_dirs(dest)
    for p in present:
        target = dest / p.name
        if target.exists():  # two moved paths with one name (e.g. a checkpoint_path outside the root)
            target = dest / f"{p.parent.name}-{p.name}"
        shutil.move(str(p), str(target))
    log.warning("--fresh: moved the previous run's state aside", extra={"to": str(dest),
                                                                        "moved": [p.name for p in present]})
    return dest


def descendants(model: LandmarkModel, candidates: list[tuple[Path, LandmarkModel]]) -> list[tuple[Path, LandmarkModel]]:
    """The refitted models that descend from ``model``: same lineage, newer version, oldest first."""
    out = []
    for path, m in candidates:
        if m.lineage != model.lineage:
            log.warning("ignoring %s: it belongs to another map (lineage %s, not the configured %s)", path,
                        m.lineage, model.lineage)
        elif m.version > model.version:
            out.append((path, m))
    return sorted(out, key=lambda pm: pm[1].version)


def clean_refit_dirs(model_dir: Path) -> int:
    """Remove ``refit-*`` work directories a killed daemon left behind; returns how many."""
    if not model_dir.is_dir():
        return 0
    n = 0
    for p in model_dir.glob("refit-*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    if n:
        log.info("removed %d leftover refit work directories", n, extra={"dir": str(model_dir)})
    return n


def clean_leftovers(cfg: Config) -> int:
    """Remove the temporary files a killed daemon left (``.part-*.tmp``, ``.dead-*.tmp``, state files' ones) in the
    output, dead-letter, model and root directories; returns how many. Called at start, holding the root's lock;
    a temporary file another live writer of a shared directory holds is left alone (``fsafe.clean_temps``)."""
    n = 0
    for directory, glob in ((cfg.embeddings_dir, "part-*"), (cfg.dead_letter_dir, "dead-*"), (cfg.model_dir, "*"),
                            (cfg.root, "*"), (cfg.checkpoint_path.parent, glob_escape(cfg.checkpoint_path.name))):
        if directory.is_dir():
            n += clean_temps(directory, glob, once=False)
    if n:
        log.info("removed %d temporary files a stopped daemon left", n)
    return n


def process_start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22), None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


class PidLock:
    """The one daemon of an ``output.root``: an exclusive ``flock`` on the root directory itself.

    The lock is held on the directory, not on a file in it, so deleting
    ``<root>/streamembed.pid`` (or anything else in the root) cannot let a
    second daemon run on the same root. ``streamembed.pid`` only says who
    holds the lock: the daemon's pid and start time, so ``streamembed refit``
    can tell a live daemon from a stale file (a killed daemon's pid may belong
    to a stranger by now) and never signals the wrong process. The lock dies
    with the process.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._dir_fd: int | None = None
        self._fd: int | None = None

    def acquire(self) -> None:
        root = make_dirs(self.path.parent)
        dir_fd = _lock_fd(root)
        try:
            fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(dir_fd)
            other = PidLock.running(self.path)
            who = f"pid {other}" if other is not None else "its pid file is gone"
            raise EnvironmentUnavailable(f"another streamembed daemon ({who}) is running with this output.root "
                                         f"({root}); stop it first, or use another output.root") from None
        if self.path.is_symlink():  # planted: the lock on the root is ours, so the name is ours to take back
            log.warning("%s was a symbolic link (to %s): removed; the pid file is never written through a link",
                        self.path, os.readlink(self.path))
            self.path.unlink()
        try:
            fd = open_state(self.path)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what older versions lock, and look for
        except BlockingIOError:
            os.close(fd)
            os.close(dir_fd)
            raise EnvironmentUnavailable(f"another streamembed daemon (pid {PidLock.running(self.path)}) holds "
                                         f"{self.path}; stop it first, or use another output.root") from None
        except BaseException:
            os.close(dir_fd)
            raise
        try:
            with naming_path(self.path):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {process_start_time(os.getpid())}\n".encode())
                os.fsync(fd)
        except OSError:
            os.close(fd)
            os.close(dir_fd)
            raise
        self._dir_fd, self._fd = dir_fd, fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                self.path.unlink(missing_ok=True)
            finally:
                os.close(self._fd)
                self._fd = None
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    @staticmethod
    def running(path: Path) -> int | None:
        """The pid of the live daemon holding the root of ``path``, or None (none, a stale file, a stranger's pid)."""
        held = False
        try:
            dir_fd = _lock_fd(Path(path).parent)
        except OSError:
            dir_fd = None
        if dir_fd is not None:
            try:
                fcntl.flock(dir_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                held = True
            finally:
                os.close(dir_fd)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            if not held:  # an older daemon locked only the file
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return None  # nobody holds a lock: the daemon that wrote this file is gone
                except BlockingIOError:
                    pass
            text = os.read(fd, 100).decode(errors="replace").split()
        finally:
            os.close(fd)
        try:
            pid, start = int(text[0]), int(text[1])
        except (IndexError, ValueError):
            return None
        return pid if process_start_time(pid) == start else None


def _lock_fd(root: Path) -> int:
    """A file descriptor of the directory ``root`` to ``flock`` (read-only; directories cannot be opened otherwise)."""
    return os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))


#: ``<root>/writer-id``: this root's random id, in every output file name (``-w<id>``), and the file's own inode.
WRITER_ID_FILE = "writer-id"
#: The longest writer-id file read (an id, an inode number and a newline take 30 bytes).
_WRITER_ID_BYTES = 256


def writer_tag(root: Path) -> str:
    """``-w<8 hex digits>``: the id of the run in ``root``, made once and kept (``--fresh`` makes a new one).

    Output and dead-letter names carry it, so daemons with their own roots can share an embeddings or
    dead-letter directory without overwriting each other's files (their inputs may have the same names),
    while a restart of one keeps its names (a replayed roll replaces its own file). The file also records its
    own inode: a root copied with its writer-id (``cp -a root1 root2``) would overwrite the other root's files
    in a shared directory, so a writer-id whose inode is not the one it records is refused (StartupError: delete
    it to make the copy a writer of its own). It is read without following a link, and only its first bytes.
    """
    path = Path(root) / WRITER_ID_FILE
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return _new_writer_id(root, path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StartupError(f"{path} is a symbolic link: state files are never read through links; replace it "
                               f"by a regular file, or delete it to make a new writer id") from None
        raise
    try:
        ino = os.fstat(fd).st_ino
        raw = os.read(fd, _WRITER_ID_BYTES)
    finally:
        os.close(fd)
    try:
        parts = raw.decode("ascii").split()
    except UnicodeDecodeError:
        raise StartupError(f"{path} is not a writer id written by streamembed (its bytes are not text): delete it to "
                           f"make a new one") from None
    if not parts or len(parts[0]) != 8 or any(c not in "0123456789abcdef" for c in parts[0]):
        log.warning("%s is not an 8-digit hex id; making a new one", path)
        return _new_writer_id(root, path)
    if len(parts) == 1:  # written by an older streamembed: stamp it now
        return _new_writer_id(root, path, parts[0])
    if parts[1] != str(ino):
        raise StartupError(
            f"{path} was copied from another root (it was written as inode {parts[1]}, this file is inode {ino}): "
            f"two roots with one writer id overwrite each other's files in a shared output directory. If this root "
            f"is a copy (cp -a, a restored backup), delete {path}: this root then writes under a new id of its own")
    return f"-w{parts[0]}"


def _new_writer_id(root: Path, path: Path, text: str | None = None) -> str:
    """Write ``path`` with ``text`` (default: a new random id) and the inode of the file it is written to."""
    make_dirs(root)
    text = text or secrets.token_hex(4)
    with atomic_file(path) as fh:
        fh.write(f"{text} {os.fstat(fh.fileno()).st_ino}\n".encode())
    return f"-w{text}"
