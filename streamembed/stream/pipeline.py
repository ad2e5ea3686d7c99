"""Overlap I/O with compute: a prefetching iterator and a background consumer.

Arrow's Parquet/IPC decoding and encoding release the GIL, and so does the
core's BLAS, so on a 2-core machine reading batch i+1 and writing batch i-1
while batch i is embedded roughly turns "read + embed + write" into their
maximum. Queues are bounded (``depth`` items) so memory stays bounded.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Generic, Iterable, Iterator, TypeVar

__all__ = ["prefetch", "BackgroundConsumer"]

T = TypeVar("T")
_DONE = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Iterate ``items`` in a background thread, ``depth`` items ahead.

    Exceptions raised by ``items`` are re-raised in the consumer. Abandoning
    the iterator early stops the producer at its next item.
    """
    q: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            q.put(_Failure(exc))

    t = threading.Thread(target=produce, name="streamembed-prefetch", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        t.join(timeout=5)


class BackgroundConsumer(Generic[T]):
    """Calls ``consume(item)`` on a background thread, in order; ``close`` waits and re-raises."""

    def __init__(self, consume: Callable[[T], None], depth: int = 2) -> None:
        self._consume = consume
        self._q: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="streamembed-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is _DONE:
                return
            if self._error is None:
                try:
                    self._consume(item)  # type: ignore[arg-type]
                except BaseException as exc:  # noqa: BLE001 - re-raised by put/close
                    self._error = exc

    def put(self, item: T) -> None:
        if self._error is not None:
            raise self._error
        self._q.put(item)

    def close(self) -> None:
        self._q.put(_DONE)
        self._thread.join()
        if self._error is not None:
            raise self._error
