"""Read-ahead and write-behind keep order and surface errors."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.settings import GeneratorConfig
from streamembed.stream.generator import GaussianMixtureStream
from streamembed.stream.pipeline import BackgroundConsumer, prefetch


def test_prefetch_keeps_order_and_reraises() -> None:
    assert list(prefetch(iter(range(50)), depth=3)) == list(range(50))

    def boom():
        yield 1
        raise ValueError("bad file")

    it = prefetch(boom())
    assert next(it) == 1
    with pytest.raises(ValueError, match="bad file"):
        next(it)


def test_abandoned_prefetch_stops_its_thread() -> None:
    it = prefetch(iter(range(10**9)), depth=2)
    assert next(it) == 0
    it.close()  # returns: the producer noticed the stop flag


def test_background_consumer_in_order_and_errors_surface() -> None:
    got: list[int] = []
    c = BackgroundConsumer(got.append)
    for i in range(100):
        c.put(i)
    c.close()
    assert got == list(range(100))

    def fail(x: int) -> None:
        raise OSError("disk full")

    c2 = BackgroundConsumer(fail)
    c2.put(1)
    with pytest.raises(OSError, match="disk full"):
        c2.close()


def test_drift_moves_the_component_means() -> None:
    spec = GeneratorConfig(seed=2, n_features=5, intrinsic_dims=2, clusters=1, cluster_std=0.1, noise_std=0.0,
                       drift_speed=4.0)
    s = GaussianMixtureStream(spec)
    early = s.sample(0, 500, np.random.default_rng(0)).mean(axis=0)
    late = s.sample(100_000, 500, np.random.default_rng(0)).mean(axis=0)
    assert np.linalg.norm(late - early) == pytest.approx(4.0, rel=0.05)
