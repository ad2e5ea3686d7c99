"""Block RR against brute-force global minimisation (docs/math.md §3).

The batched solver must never end above the best of 30 independent L-BFGS
runs from random starts by more than 1e-9 relative (plus 1e-13 of the
block's scale F(0), for blocks that fit exactly), on 220 random problems:
k from 2 to 64 (log-uniform, and 64 for every 40th), d from 1 to 10 in turn, blocks in the landmarks'
span, partly off it, mostly off it (near-hard) and entirely off it (the
hard case); checked in four tests of 55 consecutive problems, each well inside
the per-test deadline on a loaded runner.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.core.place.block.solve import solve_blocks

from .block_cases import KINDS, block_problem, brute_force

N_PROBLEMS = 220


def _problems(seed: int, count: int):
    """(kind, k, d, C, Beta, lam, ‖B‖²) and a generator for the brute force's starts, per problem."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(KINDS, size=count, p=[0.4, 0.35, 0.15, 0.1])
    for i, kind in enumerate(kinds):
        k = 64 if i % 40 == 0 else int(np.exp(rng.uniform(np.log(2), np.log(64.5))))
        d = 1 + i % 10
        yield (str(kind), k, d, *block_problem(rng, k, d, str(kind))[:4]), np.random.default_rng([seed, i])


#: The problems are checked in this many tests of consecutive problems (the same 220 in every case): each stays
#: well inside the per-test deadline on a loaded two-core runner (about 10-20 s each at load 2).
CHUNKS = 4


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_never_above_a_30_start_brute_force_minimum(chunk: int) -> None:
    size = -(-N_PROBLEMS // CHUNKS)
    failures = []
    for i, ((kind, k, d, C, Beta, lam, b_norm2), rng) in enumerate(_problems(2025, N_PROBLEMS)):
        if not chunk * size <= i < (chunk + 1) * size:
            continue
        sol = solve_blocks(C, Beta.ravel(), np.array([k]), lam, np.array([b_norm2]))
        f_brute = brute_force(C, Beta, lam, b_norm2, rng, n_starts=30)
        scale = 2.0 * b_norm2 + float((Beta**2).sum())
        if sol.objective[0] > f_brute * (1 + 1e-9) + 1e-13 * scale:
            failures.append((kind, k, d, sol.objective[0], f_brute))
        if sol.certified[0]:
            # a certified block is globally optimal: brute force cannot beat it
            assert f_brute >= sol.objective[0] - sol.gap[0] - 1e-9 * f_brute - 1e-13 * scale
    assert not failures, failures


@pytest.mark.slow  # 220 landmark fits: about 12 s
def test_the_brute_force_problems_cover_every_kind_size_and_regime() -> None:
    """The 220 problems span every kind, k from 2 to 64, d from 1 to 10, and both certified and uncertified
    blocks (the solver alone: the brute force is the slow part)."""
    certified, kinds_seen, k_seen, d_seen = 0, set(), set(), set()
    for (kind, k, d, C, Beta, lam, b_norm2), _ in _problems(2025, N_PROBLEMS):
        sol = solve_blocks(C, Beta.ravel(), np.array([k]), lam, np.array([b_norm2]))
        certified += int(sol.certified[0])
        kinds_seen.add(kind)
        k_seen.add(k)
        d_seen.add(d)
    assert kinds_seen == set(KINDS) and min(k_seen) == 2 and max(k_seen) == 64 and d_seen == set(range(1, 11))
    assert 0 < certified < N_PROBLEMS  # both regimes are exercised
