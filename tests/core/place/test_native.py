"""The compiled kernels (streamembed/core/_native) against the numpy paths they replace.

Both implementations stay in the package: numpy is the fallback where no C
compiler was present at install, and the reference these tests hold the
compiled kernels to, on every instruction set the CPU runs.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamembed import LandmarkMDS
from streamembed.core.place import projection
from streamembed.core.place import restricted
from streamembed.core.fit.cmds import fit_spectrum
from streamembed.core.place.projection import ProjectionKernel

from ..conftest import landmark_problem

native = projection._native
needs_native = pytest.mark.skipif(native is None, reason="streamembed.core._native was not built (no C compiler)")


def test_native_kernels_are_built_where_a_compiler_exists():
    """An install with a C compiler must not silently fall back to the slow paths."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler here: the numpy paths are the whole story")
    assert projection.available_backends() == ("compiled", "numpy")
    assert restricted.available_backends() == ("compiled", "numpy")


def _spectrum(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    D, _, _ = landmark_problem(rng, n, max(d, 2) + 2, 1)
    return fit_spectrum(D, n_residual=d, n_components=d)


def _inputs(rng, m: int, n: int, dtype) -> np.ndarray:
    return (rng.uniform(0.0, 3.0, size=(m, n))).astype(dtype)


@needs_native
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, d", [(2, 1), (3, 2), (15, 3), (16, 10), (17, 11), (40, 12), (100, 24), (300, 5),
                                  (700, 10)])
def test_compiled_projection_equals_numpy(isa, dtype, n, d):
    """Every (rows, landmarks, columns) shape: the tail of a vector, column groups, row blocks."""
    d = min(d, n)
    spec = _spectrum(n, d)
    rng = np.random.default_rng(n * 100 + d)
    fast = ProjectionKernel(spec, d, np.dtype(dtype), backend="compiled")
    slow = ProjectionKernel(spec, d, np.dtype(dtype), backend="numpy")
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for m in (0, 1, 2, 3, 4, 5, 9, 3000):
        A = _inputs(rng, m, n, dtype)
        Zf, sf = fast(A)
        Zs, ss = slow(A)
        assert Zf.dtype == dtype and Zf.shape == (m, d + 1)
        scale = np.abs(Zs).max() if m else 1.0
        np.testing.assert_allclose(Zf, Zs, rtol=0, atol=tol * max(scale, 1.0))
        assert not sf.any() and not ss.any()


@needs_native
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_projection_flags_every_bad_row_and_only_those(isa, dtype):
    n, d, m = 37, 4, 64  # 37: full vectors and a tail on every instruction set
    spec = _spectrum(n, d)
    rng = np.random.default_rng(7)
    A = _inputs(rng, m, n, dtype)
    bad = {3: (0, -1.0), 10: (36, -1e-30), 17: (20, np.nan), 30: (35, np.inf), 41: (33, -np.inf), 63: (36, np.nan)}
    for i, (j, v) in bad.items():
        A[i, j] = v
    Z, suspect = ProjectionKernel(spec, d, np.dtype(dtype), backend="compiled")(A)
    assert set(np.flatnonzero(suspect)) == set(bad)
    # -0.0 has its sign bit set: flagged, then cleared by the exact recheck (estimator)
    A2 = _inputs(rng, 4, n, dtype)
    A2[2, 36] = -0.0
    _, s2 = ProjectionKernel(spec, d, np.dtype(dtype), backend="compiled")(A2)
    assert list(np.flatnonzero(s2)) == [2]


@needs_native
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, d, k", [(7, 2, 3), (37, 4, 12), (121, 10, 50), (200, 2, 10), (200, 10, 50),
                                     (500, 10, 50), (1000, 3, 16)])
def test_a_fused_second_product_gives_the_numbers_of_two_calls_and_flags_zero_entries(isa, dtype, n, d, k):
    """The radius's columns in the projection's pass (``ProjectionKernel.fused``): both outputs equal, bit for
    bit, what the two kernels give alone (each part keeps its own kernels: row blocks or single rows), and the
    rows holding an entry equal to zero - in a full vector, in the tail, -0.0 - are exactly those flagged."""
    spec = _spectrum(n, d)
    rng = np.random.default_rng(n + d + k)
    M = rng.standard_normal((n, k)) * 1e-3
    from streamembed.core.fit.cmds import LandmarkSpectrum

    frame = LandmarkSpectrum(eigenvalues=np.ones(k), eigenvectors=-2.0 * M, row_means=np.zeros(n), grand_mean=0.0,
                             negative_share=0.0, exact=True)
    base = ProjectionKernel(spec, d, np.dtype(dtype), backend="compiled")
    extra = ProjectionKernel(frame, k, np.dtype(dtype), backend="compiled")
    for m in (1, 3, 4, 5, 9, 2 * 1024 + 7, 5000):
        A = _inputs(rng, m, n, dtype) + 0.1
        zeros = {0: 0, m // 2: n - 1, m - 1: n // 2}
        for i, j in zeros.items():
            A[i, j] = 0.0
        if m > 3:
            A[1, n - 1] = -0.0
            zeros[1] = n - 1
        Z, suspect, zero, Z2 = base.fused(extra)(A)
        Zb, sb = base(A)
        Ze, _ = extra(A)
        assert np.array_equal(Z, Zb) and np.array_equal(Z2, Ze) and np.array_equal(suspect, sb)
        assert set(np.flatnonzero(zero)) == set(zeros), (m, sorted(np.flatnonzero(zero)))
    slow = ProjectionKernel(spec, d, np.dtype(dtype), backend="numpy").fused(
        ProjectionKernel(frame, k, np.dtype(dtype), backend="numpy"))
    _, _, zero_slow, Z2s = slow(A)
    assert np.array_equal(zero_slow, zero)
    np.testing.assert_allclose(Z2s, Z2, rtol=0, atol=(2e-5 if dtype == np.float32 else 1e-12) * np.abs(Z2s).max())


@needs_native
def test_estimator_recheck_clears_negative_zero_and_names_real_problems():
    rng = np.random.default_rng(3)
    D, A, _ = landmark_problem(rng, 30, 3, 6)
    est = LandmarkMDS(n_components=2).fit(D)
    A = A.astype(np.float32)
    A[1, 29] = -0.0
    A[4, 5] = -2.0
    res = est.embed(A, errors="mask")
    assert res.valid.tolist() == [True, True, True, True, False, True]
    assert res.reasons[4].code == "negative" and res.reasons[4].index == 5 and "A[5]" in str(res.reasons[4])


@needs_native
def test_project_refuses_mismatched_buffers():
    A = np.ones((4, 20), np.float32)
    WT = np.zeros((3, 32), np.float32)
    WT[:, :20] = 1.0
    offset = np.array([1.0, 2.0, 3.0], np.float32)
    Z = np.empty((4, 3), np.float32)
    flags = np.zeros(4, np.uint8)
    native.project(A, WT, offset, Z, flags, 0, 4)
    np.testing.assert_array_equal(Z, [[21.0, 22.0, 23.0]] * 4)
    with pytest.raises(TypeError, match="all be float32 or all float64"):
        native.project(A, WT.astype(np.float64), offset, Z, flags, 0, 4)
    with pytest.raises(ValueError, match="ldw >= n rounded up to 64 bytes"):
        native.project(A, np.zeros((3, 20), np.float32), offset, Z, flags, 0, 4)
    with pytest.raises(ValueError, match="and Z \\(4, 2\\) \\+ Z2 \\(.., 0\\) need 2 rows of WT and 2 offsets"):
        native.project(A, WT, offset, np.empty((4, 2), np.float32), flags, 0, 4)
    with pytest.raises(ValueError, match="offset \\(2,\\)"):
        native.project(A, WT, offset[:2], Z, flags, 0, 4)
    with pytest.raises(ValueError, match="need 4 rows of WT"):  # Z2 takes rows of WT too
        native.project(A, WT, offset, Z, flags, 0, 4, np.empty((4, 1), np.float32))
    with pytest.raises(ValueError, match="row range 0:5 outside 0:4"):
        native.project(A, WT, offset, Z, flags, 0, 5)
    with pytest.raises(ValueError, match="unknown kernel ISA 'neon'"):
        native.set_isa("neon")


def test_projection_backend_choice_is_checked():
    spec = _spectrum(10, 2)
    assert ProjectionKernel(spec, 2, np.dtype(np.float16)).backend == "numpy"
    with pytest.raises(ValueError, match="projection backend 'gpu' is not available"):
        ProjectionKernel(spec, 2, np.dtype(np.float64), backend="gpu")
    if native is not None:
        with pytest.raises(ValueError, match="takes native float32 or float64"):
            ProjectionKernel(spec, 2, np.dtype(">f8"), backend="compiled")


# ------------------------------------------------------------------ secular equation


def _secular_inputs(rng, m: int, d: int, hard_share: float = 0.2):
    lam = np.sort(rng.uniform(0.5, 30.0, d))[::-1]
    if d >= 3 and rng.random() < 0.5:
        lam[-1] = lam[-2]  # a repeated smallest eigenvalue
    c = rng.normal(size=(m, d)) * np.sqrt(lam) * rng.uniform(0.01, 3.0, (m, 1))
    yhat2 = np.square(c / np.sqrt(lam)).sum(1)
    beta = yhat2 * rng.uniform(0.0, 3.0, m) + rng.uniform(0, 1, m) * (rng.random(m) < 0.3) * 50
    hard = rng.random(m) < hard_share
    c[hard, -1] = np.where(rng.random(hard.sum()) < 0.5, 0.0, 1e-9)
    return c, beta, lam


@needs_native
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 12), m=st.integers(1, 300))
def test_compiled_secular_solver_equals_numpy(seed, d, m):
    rng = np.random.default_rng(seed)
    c, beta, lam = _secular_inputs(rng, m, d)
    fast = restricted.solve_restricted(c, beta, lam, backend="compiled")
    slow = restricted.solve_restricted(c, beta, lam, backend="numpy")
    np.testing.assert_array_equal(fast.flags, slow.flags)
    scale = 1.0 + np.abs(beta) + np.square(c).sum(1)
    assert (np.abs(fast.t - slow.t) <= 1e-9 * scale).all()
    np.testing.assert_allclose(fast.y, slow.y, rtol=1e-8, atol=1e-9 * np.sqrt(scale.max()))
    assert abs(fast.iterations - slow.iterations) <= 1


@needs_native
def test_secular_refuses_mismatched_buffers():
    k, d = 5, 3
    args = [np.ones((d, k)), np.ones(k), np.ones(k), np.zeros(d), np.zeros(d, np.uint8), 1.0, 100, 1e-7, 1e-13,
            np.empty(k), np.zeros(k, np.uint8), 0, k]
    assert native.secular(*args) >= 1
    bad = list(args)
    bad[1] = np.ones(k + 1)
    with pytest.raises(ValueError, match="beta, proj_norm2, u, converged need 5 entries"):
        native.secular(*bad)
    bad = list(args)
    bad[0] = np.ones((d, k), np.float32)
    with pytest.raises(TypeError, match="aT must be a 2-D C-contiguous float64 array"):
        native.secular(*bad)
    bad = list(args)
    bad[-1] = k + 1
    with pytest.raises(ValueError, match="column range 0:6 outside 0:5"):
        native.secular(*bad)


def test_without_the_extension_everything_runs_on_numpy(monkeypatch):
    """What an install without a C compiler sees: the numpy paths, chosen by default, same numbers."""
    rng = np.random.default_rng(11)
    D, A, _ = landmark_problem(rng, 40, 4, 50, off_span=0.5)
    est = LandmarkMDS(n_components=3).fit(D)
    before = est.embed(A, method="restricted")
    monkeypatch.setattr(projection, "_native", None)
    monkeypatch.setattr(restricted, "_native", None)
    assert projection.available_backends() == ("numpy",) and restricted.available_backends() == ("numpy",)
    fresh = LandmarkMDS(n_components=3).fit(D)
    assert fresh.model_.kernel(3, np.dtype(np.float64)).backend == "numpy"
    after = fresh.embed(A, method="restricted")
    np.testing.assert_allclose(after.y, before.y, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(after.t, before.t, rtol=1e-9, atol=1e-10)
    with pytest.raises(ValueError, match="backend 'compiled' is not available here"):
        restricted.solve_restricted(np.ones((1, 2)), np.ones(1), np.array([2.0, 1.0]), backend="compiled")


@pytest.mark.parametrize("backend", ["compiled", "numpy"])
def test_a_kernel_shared_by_threads_gives_each_call_its_own_numbers(backend):
    """Threads calling one kernel at once (a model handed to threads): the numpy path once squared every
    thread's rows into one shared buffer, and 2-21 of 40 batches came back wrong."""
    from concurrent.futures import ThreadPoolExecutor

    if backend not in projection.available_backends():
        pytest.skip("streamembed.core._native was not built (no C compiler)")
    rng = np.random.default_rng(5)
    L, Z = rng.normal(size=(300, 5)), rng.normal(size=(40 * 600, 5))
    A = np.sqrt(np.maximum(np.square(Z).sum(1)[:, None] + np.square(L).sum(1) - 2 * Z @ L.T, 0.0))
    spec = LandmarkMDS(n_components=2).fit(np.sqrt(np.square(L[:, None] - L[None]).sum(-1))).spectrum_
    for n_threads in (1, 2):
        kernel = ProjectionKernel(spec, 2, np.dtype(np.float64), n_threads=n_threads, backend=backend)
        batches = [np.ascontiguousarray(A[i * 600:(i + 1) * 600]) for i in range(40)]
        want = [kernel(a)[0] for a in batches]
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda a, kernel=kernel: kernel(a)[0], batches))
        assert sum(not np.array_equal(g, w) for g, w in zip(got, want, strict=True)) == 0

