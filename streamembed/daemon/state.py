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

import fcntl
import logging
import os
import shutil
import time
from pathlib import Path

from streamembed.atomic import naming_path
from streamembed.core.model import LandmarkModel
from streamembed.daemon.errors import EnvironmentUnavailable, StartupError
from streamembed.settings import Config
from streamembed.stream.checkpoint import Checkpoint

__all__ = ["describe_model", "check_lineage", "archive_run", "descendants", "clean_refit_dirs", "PidLock",
           "process_start_time", "model_record"]

log = logging.getLogger("streamembed.daemon")

#: What ``--fresh`` moves aside (relative to output.root, when they are the default locations).
_RUN_FILES = ("checkpoint.json", "crash-guard.json", "models", "model-history.jsonl", "drift-history.jsonl")


def model_record(model: LandmarkModel, source: str) -> dict[str, object]:
    """What a checkpoint records about the model: lineage, version, landmarks and where it came from."""
    return {"lineage": model.lineage, "version": int(model.version), "landmarks": int(model.n_landmarks),
            "source": source}


def describe_model(model: LandmarkModel, source: str) -> str:
    """One line for the start-up log: lineage, version, size, what input rows carry, where the model came from."""
    if model.features is None:
        rows = f"{model.input_kind} input"
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
    dest.mkdir(parents=True)
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
    """``<root>/streamembed.pid``: the running daemon's pid and start time, under an exclusive ``flock``.

    The lock dies with the process, so ``streamembed refit`` can tell a live
    daemon from a stale file (a killed daemon's pid may belong to a stranger
    by now) and never signals the wrong process.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            other = PidLock.running(self.path)
            raise EnvironmentUnavailable(f"another streamembed daemon (pid {other}) is running with this output.root "
                                         f"({self.path.parent}); stop it first, or use another output.root") from None
        try:
            with naming_path(self.path):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {process_start_time(os.getpid())}\n".encode())
                os.fsync(fd)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                self.path.unlink(missing_ok=True)
            finally:
                os.close(self._fd)
                self._fd = None

    @staticmethod
    def running(path: Path) -> int | None:
        """The pid of the live daemon holding ``path``, or None (no file, a stale file, or a stranger's pid)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return None  # nobody holds the lock: the daemon that wrote this file is gone
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
