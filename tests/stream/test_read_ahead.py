"""Read-ahead keeps order, surfaces errors, serialises calls into its source, and stops."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from streamembed.config.schema import GeneratorConfig
from streamembed.stream.sources.generator import GaussianMixtureStream
from streamembed.stream.read_ahead import ReadAhead
from streamembed.stream.sources import SourceBatch


class _Counting:
    """A bounded source that records whether two of its methods ever ran at once."""

    name = "counting"

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.i, self.fail_at = n, 0, fail_at
        self.inside = threading.Lock()
        self.overlapped = False
        self.commits: list[Any] = []

    def _enter(self) -> None:
        if not self.inside.acquire(blocking=False):
            self.overlapped = True
            self.inside.acquire()

    def poll(self) -> SourceBatch | None:
        self._enter()
        try:
            if self.i == self.fail_at:
                raise ValueError("bad file")
            if self.i >= self.n:
                return None
            self.i += 1
            time.sleep(0.001)
            return SourceBatch(None, {"i": self.i}, f"b{self.i}")
        finally:
            self.inside.release()

    def restore(self, state: Any) -> None: ...

    def commit(self, position: Any) -> None:
        self._enter()
        try:
            self.commits.append(position)
        finally:
            self.inside.release()

    def wait_hint(self) -> float:
        return 0.0

    @property
    def caught_up(self) -> bool:
        return self.i >= self.n

    @property
    def exhausted(self) -> bool:
        return self.i >= self.n

    def close(self) -> None: ...


def _drain(src: ReadAhead, limit: float = 10.0) -> list[SourceBatch]:
    out, end = [], time.monotonic() + limit
    while not src.exhausted and time.monotonic() < end:
        b = src.poll()
        if b is not None:
            out.append(b)
            src.commit(b.position)
    return out


def test_read_ahead_keeps_order_and_serialises_calls_into_the_source() -> None:
    inner = _Counting(200)
    src = ReadAhead(inner, depth=3)
    got = _drain(src)
    src.close()
    assert [b.position["i"] for b in got] == list(range(1, 201))
    assert inner.commits == [{"i": i} for i in range(1, 201)] and not inner.overlapped
    assert src.exhausted and src.caught_up


def test_read_ahead_reraises_the_source_error_on_the_loop_thread() -> None:
    src = ReadAhead(_Counting(10, fail_at=3))
    with pytest.raises(ValueError, match="bad file"):
        _drain(src)
    src.close()


def test_close_stops_an_endless_source_promptly() -> None:
    from streamembed.stream.sources.generator import GeneratorSource

    src = ReadAhead(GeneratorSource(GaussianMixtureStream(GeneratorConfig(n_features=3, intrinsic_dims=2)),
                                    batch_rows=4))
    assert src.poll() is not None or src.poll() is not None
    t0 = time.monotonic()
    src.close()
    assert time.monotonic() - t0 < 5.0  # close does not wait for an endless source to end


def test_drift_moves_the_component_means() -> None:
    spec = GeneratorConfig(seed=2, n_features=5, intrinsic_dims=2, clusters=1, cluster_std=0.1, noise_std=0.0,
                           drift_speed=4.0)
    s = GaussianMixtureStream(spec)
    early = s.sample(0, 500, np.random.default_rng(0)).mean(axis=0)
    late = s.sample(100_000, 500, np.random.default_rng(0)).mean(axis=0)
    assert np.linalg.norm(late - early) == pytest.approx(4.0, rel=0.05)
