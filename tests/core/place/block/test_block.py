"""Block RR (multi-point restricted reconstruction, docs/math.md §3): the batched solver."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from streamembed import LandmarkMDS
from streamembed.core.place.block.solve import block_objective, solve_block, solve_blocks
from streamembed.core.place.block.prepare import prepare_blocks
from tools.block_reference import solve_block_reference
from streamembed.core.inputs.centering import center_block
from streamembed.core.flags import FLAG_AMBIGUOUS, FLAG_UNCERTIFIED
from streamembed.core.place.restricted import restricted_objective, solve_restricted

from .block_cases import block_problem
from ...conftest import euclidean


def _solve(problems, lam):
    """solve_blocks for a list of (C, Beta, ‖B‖²) of one model."""
    return solve_blocks(np.concatenate([p[0] for p in problems]), np.concatenate([p[1].ravel() for p in problems]),
                        np.array([p[0].shape[0] for p in problems]), lam, np.array([p[2] for p in problems]))


def test_two_objects_off_the_landmark_line_reference_case():
    # Trosset et al. 2025, §6: landmarks (-1, 0), (1, 0), d = 1; objects (0, 9), (0, -9), 18 apart.
    # Projection puts both at 0, one-at-a-time RR at ±√79 each; the block at ±(√80, -√80), F = 644.
    L = np.array([[-1.0, 0.0], [1.0, 0.0]])
    Z = np.array([[0.0, 9.0], [0.0, -9.0]])
    model = LandmarkMDS(n_components=1).fit(euclidean(L, L))
    B, Beta = center_block(euclidean(Z, L) ** 2, euclidean(Z, Z) ** 2, model.spectrum_.row_means,
                           model.spectrum_.grand_mean)
    assert Beta[0, 1] == pytest.approx(-81.0)  # squared mutual dissimilarity 324
    C = B @ model.spectrum_.eigenvectors[:, :1]
    sol = solve_block(C, Beta, model.eigenvalues_, float((B**2).sum()))
    np.testing.assert_allclose(np.abs(sol.y.ravel()), [np.sqrt(80.0)] * 2, rtol=1e-12)
    assert sol.y[0, 0] == -sol.y[1, 0]
    assert sol.objective == pytest.approx(644.0, rel=1e-12)
    assert sol.certified
    # C = 0: Y and -Y are equally good; the rule puts the first entry of largest magnitude positive
    assert (sol.flags & FLAG_AMBIGUOUS).all() and sol.y[0, 0] > 0
    np.testing.assert_allclose(np.abs(sol.single.ravel()), [np.sqrt(79.0)] * 2, rtol=1e-12)


def test_a_block_of_one_is_the_single_object_solution():
    rng = np.random.default_rng(11)
    problems, singles = [], []
    C0, Beta0, lam, b0, model, A, _ = block_problem(rng, 6, 3, "normal", n=12, p=4)
    for i in range(6):
        C = C0[i : i + 1]
        problems.append((C, Beta0[i : i + 1, i : i + 1], float((C**2).sum()) + rng.uniform(0, 5)))
        singles.append(solve_restricted(C, np.diagonal(Beta0)[i : i + 1].copy(), lam))
    sol = _solve(problems, lam)
    for i, single in enumerate(singles):
        np.testing.assert_allclose(sol.y[i], single.y[0], rtol=1e-12, atol=1e-12 * np.abs(single.y).max())
        b_perp2 = problems[i][2] - float((problems[i][0] ** 2).sum())
        f1 = restricted_objective(single.y, problems[i][0], np.diagonal(problems[i][1]), lam, np.array([b_perp2]))[0]
        assert sol.objective[i] == pytest.approx(f1, rel=1e-12)
    assert sol.certified.all() and (sol.n_starts == 1).all()


def test_a_block_of_one_in_the_hard_case_keeps_the_single_solvers_sign_and_flag():
    # the object (0, 9) against landmarks (-1, 0), (1, 0): c = 0, y = +√79 flagged ambiguous
    L = np.array([[-1.0, 0.0], [1.0, 0.0]])
    model = LandmarkMDS(n_components=1).fit(euclidean(L, L))
    z = np.array([[0.0, 9.0]])
    B, Beta = center_block(euclidean(z, L) ** 2, np.zeros((1, 1)), model.spectrum_.row_means,
                           model.spectrum_.grand_mean)
    sol = solve_blocks(B @ model.spectrum_.eigenvectors[:, :1], Beta.ravel(), np.array([1]), model.eigenvalues_,
                       np.array([float((B**2).sum())]))
    assert sol.y[0, 0] == pytest.approx(np.sqrt(79.0), rel=1e-12)
    assert sol.flags[0] & FLAG_AMBIGUOUS and sol.certified[0]


@pytest.mark.parametrize("k", [2, 7, 40])
def test_blocks_in_the_span_are_recovered_exactly(k):
    rng = np.random.default_rng(k)
    for d in (1, 3, 6):
        C, Beta, lam, b_norm2, model, A, cross = block_problem(rng, k, d, "in_span")
        sol = solve_blocks(C, Beta.ravel(), np.array([k]), lam, np.array([b_norm2]))
        y_proj = C / np.sqrt(lam)
        scale = np.abs(y_proj).max()
        np.testing.assert_allclose(sol.y, y_proj, atol=1e-9 * scale)
        # and the placed objects reproduce their dissimilarities to the landmarks
        np.testing.assert_allclose(euclidean(sol.y, model.embedding_), A, atol=1e-8 * (1 + A.max()))
        assert sol.certified[0]
        assert 0.0 <= sol.objective[0] <= 1e-13 * (2 * b_norm2 + (Beta**2).sum())  # round-off of ‖B‖² - ‖C‖²


def test_the_objective_cannot_go_negative():
    # blocks that fit exactly: the expanded form 2(Σλ‖Y_:j‖² - 2Σ√λ Y_:j·C_:j + ‖B‖²) + ‖R‖²
    # cancels to about -1e-13 on some of them; the sum of squares cannot
    rng = np.random.default_rng(3)
    expanded_negative = 0
    for _ in range(60):
        k, d = int(rng.integers(2, 10)), int(rng.integers(1, 5))
        C, Beta, lam, b_norm2 = block_problem(rng, k, d, "in_span")[:4]
        sol = solve_block(C, Beta, lam, b_norm2)
        assert sol.objective >= 0.0
        assert block_objective(sol.y, C, Beta, lam, b_norm2) >= 0.0
        sl = np.sqrt(lam)
        R = sol.y @ sol.y.T - Beta
        expanded = 2 * ((lam * sol.y**2).sum() - 2 * (sl * sol.y * C).sum() + b_norm2) + (R * R).sum()
        expanded_negative += int(expanded < 0)
    assert expanded_negative > 0  # the old form does go negative on this sample: the test has teeth


def test_not_worse_than_the_reference_lbfgs_solver():
    rng = np.random.default_rng(5)
    for kind in ("normal", "near_hard", "off_span"):
        for _ in range(4):
            k, d = int(rng.integers(2, 6)), int(rng.integers(1, 4))
            C, Beta, lam, b_norm2 = block_problem(rng, k, d, kind)[:4]
            ours = solve_block(C, Beta, lam, b_norm2)
            ref = solve_block_reference(C, Beta, lam, b_norm2)
            assert ours.objective <= ref.objective * (1 + 1e-9) + 1e-13 * (2 * b_norm2 + (Beta**2).sum())


def test_certificate_bounds_the_distance_to_the_global_minimum_from_any_stationary_point():
    # From every local minimum the solver's starts find, F(Y) - gap(Y) must stay at or below the best F.
    from streamembed.core.place.block.solve import _gap, _out_of_span, _run_starts
    from streamembed.core.place.block.starts import random_starts

    rng = np.random.default_rng(8)
    local_minima = 0
    for _ in range(12):
        k, d = int(rng.integers(2, 12)), int(rng.integers(1, 5))
        C, Beta, lam, b_norm2 = block_problem(rng, k, d, "near_hard")[:4]
        res = _run_starts(random_starts(C[None], Beta[None], lam, 0, 16), C[None], Beta[None], lam,
                          _out_of_span(np.array([b_norm2]), C[None]))
        f = res.objective[0]
        gaps = _gap(res.y[0], np.repeat(C[None], 16, 0), np.repeat(Beta[None], 16, 0), lam)
        assert (f - gaps <= f.min() * (1 + 1e-12) + 1e-12).all()
        local_minima += int((f > f.min() * (1 + 1e-6)).any())
    assert local_minima > 0  # some problems have local minima above the global one


def test_uncertified_blocks_are_flagged_and_restarted():
    # few landmarks in R^2, blocks far off their plane: the duality bound often does not close
    rng = np.random.default_rng(21)
    L = rng.normal(size=(5, 2))
    model = LandmarkMDS(n_components=2).fit(euclidean(L, L))
    Lx = np.hstack([L, np.zeros((5, 2))])
    probs = []
    for _ in range(12):
        Z = np.hstack([rng.normal(size=(6, 2)) * 0.3, rng.normal(size=(6, 2)) * 3])
        B, Beta = center_block(euclidean(Z, Lx) ** 2, euclidean(Z, Z) ** 2, model.spectrum_.row_means,
                               model.spectrum_.grand_mean)
        probs.append((B @ model.spectrum_.eigenvectors[:, :2], Beta, float((B**2).sum())))
    sol = _solve(probs, model.eigenvalues_[:2])
    unc = ~sol.certified
    assert unc.any()
    np.testing.assert_array_equal((sol.flags & FLAG_UNCERTIFIED) != 0, np.repeat(unc, 6))
    assert (sol.n_starts[unc] > 1).all() and (sol.n_starts[~unc] == 1).all()
    assert (sol.n_best_starts >= 1).all() and (sol.n_best_starts <= sol.n_starts).all()
    assert (sol.gap[unc] > 1e-9 * sol.objective[unc]).all()
    assert (sol.gap[~unc] <= 1e-9 * sol.objective[~unc] + 1e-13 * (2 * np.array([p[2] for p in probs])[~unc])).all()


def test_batch_independence_with_mixed_sizes_and_bad_blocks_left_out():
    rng = np.random.default_rng(4)
    d = 3
    L = rng.normal(size=(9, 4))
    model = LandmarkMDS(n_components=d).fit(euclidean(L, L))
    Lx = np.hstack([L, np.zeros((9, 1))])
    sizes = [1, 5, 2, 9, 3, 5, 1, 16]
    Z = np.hstack([rng.normal(size=(sum(sizes), 4)) * rng.uniform(0.05, 1), rng.normal(size=(sum(sizes), 1)) * 2])
    A = euclidean(Z, Lx)
    off = np.concatenate([[0], np.cumsum(sizes)])
    cross = [euclidean(Z[a:b], Z[a:b]) for a, b in pairwise(off)]
    cross[4] = cross[4].copy()
    cross[4][0, 2] += 1.0  # not symmetric: left out, the others proceed
    sp = model.spectrum_
    prep = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors[:, :d])
    assert prep.valid.tolist() == [True, True, True, True, False, True, True, True]
    b = prep.batch
    together = solve_blocks(b.c, b.beta, b.sizes, model.eigenvalues_[:d], b.b_norm2)
    row_off = np.concatenate([[0], np.cumsum(b.sizes)])
    beta_off = np.concatenate([[0], np.cumsum(b.sizes**2)])
    for j in range(b.sizes.size):
        rows = slice(row_off[j], row_off[j + 1])
        one = solve_blocks(b.c[rows], b.beta[beta_off[j] : beta_off[j + 1]], b.sizes[j : j + 1],
                           model.eigenvalues_[:d], b.b_norm2[j : j + 1])
        np.testing.assert_array_equal(one.y, together.y[rows])  # exactly: nothing is shared between blocks
        assert one.objective[0] == together.objective[j] and one.n_starts[0] == together.n_starts[j]
    assert (together.n_starts > 1).any()  # some blocks went through the restarts
    # and on one thread, chunk by chunk, the same numbers
    serial = solve_blocks(b.c, b.beta, b.sizes, model.eigenvalues_[:d], b.b_norm2, n_threads=1)
    np.testing.assert_array_equal(serial.y, together.y)


def test_deterministic():
    rng = np.random.default_rng(9)
    C, Beta, lam, b_norm2 = block_problem(rng, 12, 3, "near_hard")[:4]
    a = solve_block(C, Beta, lam, b_norm2)
    b = solve_block(C, Beta, lam, b_norm2)
    np.testing.assert_array_equal(a.y, b.y)


def test_inconsistent_packing_is_refused():
    lam = np.array([2.0, 1.0])
    with pytest.raises(ValueError, match="sum to the 3 rows"):
        solve_blocks(np.zeros((3, 2)), np.zeros(5), np.array([2, 2]), lam, np.zeros(2))
    with pytest.raises(ValueError, match="Σ sizes² = 5"):
        solve_blocks(np.zeros((3, 2)), np.zeros(4), np.array([2, 1]), lam, np.zeros(2))
    with pytest.raises(ValueError, match="lam has 2"):
        solve_blocks(np.zeros((3, 1)), np.zeros(5), np.array([2, 1]), lam, np.zeros(2))
