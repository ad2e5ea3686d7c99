"""The compiled block kernels (csrc/block.c) compute what the numpy path computes, to round-off: the same
certified placements, starts, flags and gaps on every kind of block, and the same centred rows."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.core.flags import FLAG_AMBIGUOUS
from streamembed.core.place.block import newton, prepare
from streamembed.core.place.block.solve import solve_blocks

from .block_cases import KINDS, block_problem

pytestmark = pytest.mark.skipif("compiled" not in newton.available_backends(),
                                reason="built without the compiled kernels")


def _twelve_blocks(kind: str, k: int, d: int) -> tuple[np.ndarray, ...]:
    """``solve_blocks``' first five arguments for twelve blocks of ``kind`` with k members, every block against
    the first one's spectrum: one call, one size."""
    rng = np.random.default_rng(1000 * k + d)
    problems = [block_problem(rng, k, d, kind) for _ in range(12)]
    c = np.concatenate([p[0] for p in problems])
    beta = np.concatenate([p[1].ravel() for p in problems])
    b_norm2 = np.array([max(p[3], float((p[0] ** 2).sum())) for p in problems])
    return c, beta, np.full(len(problems), k), problems[0][2], b_norm2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k, d", [(1, 2), (2, 1), (5, 3), (8, 10), (32, 2)])
def test_the_compiled_block_solver_is_the_numpy_solver(kind: str, k: int, d: int, isa: str) -> None:
    """In every instruction set this CPU runs (the ``isa`` fixture): AVX-512, AVX2 with and without fused
    multiply-adds (below ``UNFUSED_BELOW_K`` members), and the baseline build."""
    args = _twelve_blocks(kind, k, d)
    got = {be: solve_blocks(*args, n_threads=1, backend=be) for be in ("numpy", "compiled")}
    a, b = got["numpy"], got["compiled"]
    scale = max(float(np.abs(a.y).max()), 1e-300)
    # an ambiguous block's column whose C_:j is round-off (not exactly 0) takes the sign round-off gives it
    free = (a.flags & FLAG_AMBIGUOUS) != 0
    np.testing.assert_allclose(b.y[~free], a.y[~free], rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(np.abs(b.y[free]), np.abs(a.y[free]), rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(b.objective, a.objective, rtol=1e-9, atol=1e-12 * float(a.objective.max()))
    np.testing.assert_array_equal(b.certified, a.certified)
    np.testing.assert_array_equal(b.flags, a.flags)
    np.testing.assert_array_equal(b.n_starts, a.n_starts)


def test_the_compiled_newton_takes_the_numpy_iterations_and_bounds_the_same_gap() -> None:
    rng = np.random.default_rng(7)
    C, Beta, lam, b2, *_ = block_problem(rng, 6, 3, "near_hard")
    stack = [block_problem(np.random.default_rng(s), 6, 3, "normal") for s in range(20)]
    Cs = np.stack([C] + [p[0] for p in stack])
    Bs = np.stack([Beta] + [p[1] for p in stack])
    f0 = np.zeros(Cs.shape[0])
    Y0 = Cs / np.sqrt(lam)
    ref = newton.trust_region_newton(Y0, Cs, Bs, lam, f0)
    got, gap = newton.first_start(Y0, Cs, Bs, lam, f0, 200, "compiled")
    np.testing.assert_array_equal(got.iterations, ref.iterations)
    np.testing.assert_array_equal(got.cg_iterations, ref.cg_iterations)
    np.testing.assert_allclose(got.y, ref.y, atol=1e-10 * float(np.abs(ref.y).max()))
    from streamembed.core.place.block.certificate import optimality_gap

    g, g_scale = newton.gradient(ref.y, Cs, Bs, lam)
    want = optimality_gap(ref.y, g, Bs, float(lam[-1]), g_scale)[0]
    known = ~np.isnan(gap)
    assert known.any()
    np.testing.assert_allclose(gap[known], want[known], rtol=1e-6, atol=1e-12 * float(np.abs(want).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_compiled_rows_are_the_numpy_rows(dtype: type) -> None:
    rng = np.random.default_rng(3)
    A = (rng.random((300, 40)) * 5).astype(dtype)
    A[7, 3] = -1.0
    A[11, 0] = np.nan
    A[12, 5] = np.inf
    U = rng.normal(size=(40, 6))
    means = rng.random(40) * 3
    ref = prepare.centre_rows(A, means, 1.5, U, n_threads=1, backend="numpy")
    got = prepare.centre_rows(A, means, 1.5, U, n_threads=1, backend="compiled")
    np.testing.assert_array_equal(got[3], ref[3])
    assert got[3].tolist().count(True) == 3 and got[3][[7, 11, 12]].all()
    ok = ~ref[3]
    for x, y in zip(got[:3], ref[:3], strict=True):
        np.testing.assert_allclose(x[ok], y[ok], rtol=1e-12, atol=1e-12 * float(np.abs(y[ok]).max()))


@pytest.mark.parametrize("k", [1, 2, 7, 32])
def test_the_compiled_consistency_flag_is_the_numpy_flag(k: int) -> None:
    from streamembed.core.place.block.consistency import inconsistent_blocks
    from streamembed.core.place.block.prepare import BlockBatch

    rng = np.random.default_rng(k)
    nb, r = 200, 6
    Y = rng.normal(size=(nb, k, r))
    Z = rng.normal(size=(nb, k, 3))
    noise = rng.normal(size=(nb, k, k)) * rng.uniform(0, 0.5, size=(nb, 1, 1))  # consistent to contradicted
    beta = Y @ Y.transpose(0, 2, 1) + Z @ Z.transpose(0, 2, 1) + noise + noise.transpose(0, 2, 1)
    beta[0, 0, 0] = np.inf  # a non-finite block is flagged
    sizes = np.full(nb, k)
    batch = BlockBatch(c=Y.reshape(-1, r)[:, :3].copy(), beta=beta.ravel(), sizes=sizes, b_norm2=np.ones(nb),
                       beta_self=np.diagonal(beta, axis1=1, axis2=2).ravel())
    coords = Y.reshape(-1, r)
    with np.errstate(invalid="ignore"):  # numpy's path multiplies the infinite entry by the identity's zeros
        want = inconsistent_blocks(batch, coords, 0.01, np.dtype(np.float64), backend="numpy")
    got = inconsistent_blocks(batch, coords, 0.01, np.dtype(np.float64), backend="compiled")
    assert 0 < want.sum() < nb and want[0]
    np.testing.assert_array_equal(got, want)


def test_the_compiled_cross_checks_find_the_numpy_problems() -> None:
    from streamembed.core import _native
    from streamembed.core.place.block.prepare import CROSS_RTOL, _entry_problems

    rng = np.random.default_rng(5)
    M = rng.random((60, 6, 6)) * 10
    M = M + M.transpose(0, 2, 1)
    M[:, np.arange(6), np.arange(6)] = 0.0
    M[1, 2, 3] = -1.0
    M[2, 0, 5] = np.nan
    M[3, 4, 4] = 1e-3
    M[4, 1, 2] += 1e-3
    M[5, 1, 2] += 1e-9  # within CROSS_RTOL of the largest entry: fine
    M[6, 3, 1] = np.inf
    with np.errstate(invalid="ignore"):
        want = _entry_problems(M, CROSS_RTOL, "cross")
    bad = np.zeros(60, dtype=np.uint8)
    largest = np.empty(60)
    _native.block_cross(M, CROSS_RTOL, bad, largest)
    assert np.flatnonzero(bad).tolist() == [j for j, _ in want] == [1, 2, 3, 4, 6]
    finite = np.where(np.isfinite(M), np.abs(M), 0.0).reshape(60, -1).max(axis=1)
    np.testing.assert_array_equal(largest, finite)


def test_the_chosen_instruction_set_reaches_the_block_solver() -> None:
    """``set_isa`` picks the block solver's kernels too: the baseline build (no fused multiply-add) rounds a block
    of ``UNFUSED_BELOW_K`` or more members differently from the fused kernels, and a smaller block, which the
    vector kernels solve unfused, exactly as they do."""
    from streamembed.core.place import projection

    nat = projection._native
    assert nat is not None
    fused = [i for i in nat.supported_isas() if i != "sse2"]
    if not fused:
        pytest.skip("this CPU runs the baseline kernels only")
    best = nat.isa()
    try:
        for k, d, differs in ((8, 10, True), (32, 2, True), (5, 3, False)):
            args = _twelve_blocks("normal", k, d)
            got = {}
            for isa in (fused[0], "sse2"):
                nat.set_isa(isa)
                got[isa] = solve_blocks(*args, n_threads=1, backend="compiled").y
            assert bool((got[fused[0]] != got["sse2"]).any()) is differs, (k, d)
    finally:
        nat.set_isa(best)
