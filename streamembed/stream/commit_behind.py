"""One commit at a time on a thread of its own, while the loop embeds the next batches (:class:`CommitBehind`).

A commit (``Checkpointer.seal``'s callable) waits for the Parquet writer
thread, fsyncs and renames the file and its directory, commits the source and
writes the checkpoint: 10-30 ms each here, more on a disk whose fsync is slow,
during which the loop used to embed nothing. ``EmbeddingLoop(overlap_commits=
True)`` seals the roll (the sinks take the next rows into new files at once)
and runs its commit here. The order that makes a crash harmless is kept: a
roll's files are published before its checkpoint, and a roll is sealed only
after the previous commit returned (:meth:`wait`), so at most one roll is ever
published and not yet checkpointed, the one that starts at the checkpoint's
position, as without the overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["CommitBehind"]

T = TypeVar("T")


class CommitBehind(Generic[T]):
    """Runs one callable at a time on a background thread; :meth:`wait` returns its result or raises its error."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._result: T | None = None
        self._error: BaseException | None = None

    @property
    def busy(self) -> bool:
        """A commit was started and not waited for yet."""
        return self._thread is not None

    @property
    def done(self) -> bool:
        """A commit was started and has ended (:meth:`wait` returns at once)."""
        return self._thread is not None and not self._thread.is_alive()

    def start(self, commit: Callable[[], T]) -> None:
        """Run ``commit`` in the background (the previous one must have been waited for)."""
        if self._thread is not None:
            raise RuntimeError("a commit is still running: wait() for it first")

        def run() -> None:
            try:
                self._result = commit()
            except BaseException as exc:  # raised on the loop's thread by wait()
                self._error = exc

        self._thread = threading.Thread(target=run, name="streamembed-commit", daemon=True)
        self._thread.start()

    def wait(self) -> T | None:
        """Wait for the running commit (None if there is none); its result, or its exception raised here."""
        if self._thread is None:
            return None
        self._thread.join()
        self._thread = None
        result, error = self._result, self._error
        self._result = self._error = None
        if error is not None:
            raise error
        return result
