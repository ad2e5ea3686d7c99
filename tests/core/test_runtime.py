"""core.runtime: one worker pool for every hot path, the default thread count once, no waiting on it from inside."""

from __future__ import annotations

import os
import threading

import numpy as np

from streamembed.core import runtime
from streamembed.core.place.block.solve import solve_blocks
from streamembed.core.fit.cmds import fit_spectrum
from streamembed.core.place.projection import ProjectionKernel
from streamembed.core.place.restricted import CHUNK_ROWS, solve_restricted


def _streamembed_threads() -> set[str]:
    """The thread-name prefixes of the core's compute threads alive now."""
    return {t.name.rsplit("_", 1)[0] for t in threading.enumerate() if t.name.startswith("streamembed-")
            and not t.name.startswith(("streamembed-ops", "streamembed-http"))}


def test_default_threads_is_min_two_cpus() -> None:
    assert runtime.default_threads() == max(1, min(2, os.cpu_count() or 1))
    assert runtime.resolve_threads(None) == runtime.default_threads() and runtime.resolve_threads(3) == 3


def test_the_pool_is_one_and_grows_when_asked_for_more() -> None:
    pool = runtime.worker_pool()
    assert runtime.worker_pool() is pool and runtime.worker_pool(1) is pool
    bigger = runtime.worker_pool(runtime._POOL_SIZE + 1)
    assert bigger._max_workers == runtime._POOL_SIZE and runtime.worker_pool() is bigger


def test_in_worker_is_true_only_on_pool_threads() -> None:
    assert not runtime.in_worker()
    assert runtime.worker_pool(2).submit(runtime.in_worker).result(timeout=60)


def _problem(rng: np.random.Generator, n: int = 30, d: int = 3, m: int = 3 * CHUNK_ROWS):
    P = rng.normal(size=(n + m, 5))
    L = P[:n]
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1))
    A = np.sqrt(((P[n:, None] - L[None]) ** 2).sum(-1))
    sp = fit_spectrum(D, None, "full", np.dtype(np.float64), d)
    return sp, A, d


def test_projection_rr_and_blocks_share_the_one_pool(rng: np.random.Generator) -> None:
    """Every hot path that splits a batch runs on ``runtime.worker_pool`` (before: three pools of their own)."""
    sp, A, d = _problem(rng)
    kernel = ProjectionKernel(sp, d, np.dtype(np.float64), n_threads=2, backend="numpy")
    Z, _ = kernel(A)
    lam = sp.eigenvalues[:d]
    c = Z[:, :d] * np.sqrt(lam)
    solve_restricted(c, Z[:, d], lam, n_threads=2)
    sizes = np.array([2] * 32 + [4] * 32)  # two sizes: two tasks for the pool
    Beta = np.concatenate([np.eye(k).ravel() for k in sizes])
    solve_blocks(c[: sizes.sum()], Beta, sizes, lam, np.ones(sizes.size), n_threads=2)
    assert _streamembed_threads() <= {"streamembed-worker"}


def test_work_on_a_pool_thread_runs_inline_and_matches(rng: np.random.Generator) -> None:
    """A hot path called from a pool task runs its chunks itself: no deadlock, the same numbers."""
    sp, A, d = _problem(rng)
    lam = sp.eigenvalues[:d]
    kernel = ProjectionKernel(sp, d, np.dtype(np.float64), n_threads=2)

    def run() -> tuple[np.ndarray, np.ndarray]:
        Z, _ = kernel(A)
        return Z, solve_restricted(Z[:, :d] * np.sqrt(lam), Z[:, d], lam, n_threads=2).y

    pool = runtime.worker_pool(2)
    # occupy every pool thread with a task that itself needs the pool
    futures = [pool.submit(run) for _ in range(runtime._POOL_SIZE)]
    outside = run()
    for f in futures:
        inside = f.result(timeout=120)
        np.testing.assert_array_equal(inside[0], outside[0])
        np.testing.assert_array_equal(inside[1], outside[1])
