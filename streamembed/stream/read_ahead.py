"""Overlap reading with embedding: any source polled ahead on a background thread.

Arrow's Parquet/IPC decoding and the file reads release the GIL, and so does
the core's projection kernel, so reading batch i+1 while batch i is embedded
turns "read + embed" into roughly their maximum. The queue is bounded
(``depth`` batches), so memory stays bounded; every call into the wrapped
source (poll, commit, close) is serialised by a lock, so sources need not be
thread-safe (a Kafka consumer is not). A source with a ``preempt`` attribute
(Kafka) is given an Event that is set while the loop's thread waits for that
lock, so that a poll blocked waiting for messages ends early and a commit is
not held back by it.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from typing import Any
from collections.abc import Iterator

from streamembed.stream.sources import SourceBatch

__all__ = ["ReadAhead"]

log = logging.getLogger("streamembed.read_ahead")

_END = object()
#: Longest wait of the reader thread after the source had nothing (it follows the source's ``wait_hint``).
MAX_IDLE_WAIT = 1.0


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class ReadAhead:
    """A :class:`~streamembed.stream.sources.Source` that polls ``inner`` ``depth`` batches ahead.

    ``restore`` must be called before the first ``poll`` (which starts the
    background thread). Exceptions raised by the inner source are re-raised by
    ``poll`` on the caller's thread.
    """

    def __init__(self, inner: Any, depth: int = 2, idle_sleep: float = 0.05) -> None:
        self.inner = inner
        self.name = inner.name
        self.depth = max(1, int(depth))
        self.idle_sleep = idle_sleep
        self._q: queue.Queue[object] = queue.Queue(maxsize=self.depth)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._idle = False
        self._caught_up = False
        self._exhausted = False
        # a source that blocks in poll (Kafka) ends that wait early while the caller waits for the lock
        self._want = threading.Event()
        if hasattr(inner, "preempt"):
            inner.preempt = self._want

    # ------------------------------------------------------------------ the Source interface
    def restore(self, state: Any) -> None:
        with self._locked():
            self.inner.restore(state)

    def poll(self) -> SourceBatch | None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="streamembed-read-ahead", daemon=True)
            self._thread.start()
        if self._exhausted:
            return None
        try:
            item = self._q.get(timeout=self.idle_sleep)
        except queue.Empty:
            return None
        if item is _END:
            self._exhausted = True
            return None
        if isinstance(item, _Failure):
            raise item.exc
        return item  # type: ignore[return-value]

    def commit(self, position: Any) -> None:
        with self._locked():
            self.inner.commit(position)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The source's lock, taken from the caller's thread: a blocking poll on the reader thread is cut short."""
        self._want.set()
        try:
            with self._lock:
                self._want.clear()
                yield
        finally:
            self._want.clear()

    def wait_hint(self) -> float:
        return 0.0

    @property
    def caught_up(self) -> bool:
        """Nothing is queued and the inner source found nothing waiting on its last poll."""
        return self._exhausted or (self._q.empty() and self._idle and self._caught_up)

    @property
    def exhausted(self) -> bool:
        return self._exhausted

    @property
    def backlog(self) -> int | None:
        return getattr(self.inner, "backlog", None)

    @property
    def problem(self) -> str | None:
        return getattr(self.inner, "problem", None)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._locked():
            self.inner.close()

    # ------------------------------------------------------------------ the reader thread
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    batch = self.inner.poll()
                    exhausted, caught_up = self.inner.exhausted, self.inner.caught_up
                    hint = self.inner.wait_hint()
                if batch is not None:
                    self._idle = False
                    self._put(batch)
                    continue
                if exhausted:
                    self._put(_END)
                    return
                self._caught_up, self._idle = caught_up, True
                # the source's own pace (a directory: poll_seconds between scans), at most MAX_IDLE_WAIT
                self._stop.wait(max(0.001, min(hint, MAX_IDLE_WAIT)) if hint > 0 else 0.001)
        except BaseException as exc:  # handed to the loop's thread
            self._put(_Failure(exc))

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
