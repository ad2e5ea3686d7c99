"""Which starts does block RR need? A brute-force study (docs/math.md §3).

    python -m benchmarks.block_starts_study [--problems 600] [--seed 7] [--brute 30]

Problems come from the test generator (``tests/core/place/block/block_cases.py``: k
log-uniform in 2..64, d in 1..10, blocks in span, partly, mostly and
entirely off it). For each, every start of ``core/place/block/solve.py`` is minimised
on its own (trust-region Newton plus the sign rule) and so are ``--brute``
random configurations drawn like the brute-force test's. Printed:

- how often the first start (single-object RR) ends certified, and how
  often a certifiable block is missed by it;
- for blocks without a certificate, each start's hit rate (share of
  blocks on which it reaches the best value found by anything);
- leave-one-out: on how many blocks the solver's start set would end
  above the best value without that start (or without all random ones);
- how many blocks the brute-force starts together beat the start set on;
- how often the first start and the four structured ones agree, and how
  often the value they agree on is not the best (the early stop's risk).

Not a test: it takes minutes. The figures quoted in ``core/place/block/starts.py``
and in the closing note of the block solver come from it.
"""

from __future__ import annotations

import argparse

import numpy as np


from streamembed.core.place.block.solve import (
    CERT_RTOL,
    MORE_RANDOM_STARTS,
    RANDOM_STARTS,
    SCALE_RTOL,
    _gap,
    _out_of_span,
    _run_starts,
)
from streamembed.core.place.block.starts import eigen_starts, projection_starts, random_starts, spectral_starts
from streamembed.core.place.restricted import solve_restricted
from tests.core.place.block.block_cases import KINDS, block_problem


def starts_of(C, Beta, lam):
    """Named starts (s=1 block): the solver's, in its order."""
    C3, B3 = C[None], Beta[None]
    single = solve_restricted(C, np.diagonal(Beta).copy(), lam).y[None]
    named = {
        "single": single,
        "projection": projection_starts(C3, lam),
        "spectral": spectral_starts(C3, B3, lam),
        "eigen(beta)": eigen_starts(C3, B3, lam),
        "projection+eigen(K0)": eigen_starts(C3, B3, lam, projection_starts(C3, lam)),
    }
    rand = random_starts(C3, B3, lam, 0, RANDOM_STARTS + MORE_RANDOM_STARTS)[0]
    for i in range(rand.shape[0]):
        named[f"random{i}"] = rand[i][None]
    return named


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=600)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--brute", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n_cert = n_unc = cert_missed = 0
    hits: dict[str, int] = {}
    loo: dict[str, int] = {}
    brute_wins = 0
    agree = {r: [0, 0] for r in (0, 2, 4)}
    for _ in range(args.problems):
        kind = str(rng.choice(KINDS, p=[0.4, 0.35, 0.15, 0.1]))
        k = int(np.exp(rng.uniform(np.log(2), np.log(64.5))))
        d = int(rng.integers(1, 11))
        C, Beta, lam, b_norm2 = block_problem(rng, k, d, kind)[:4]
        named = starts_of(C, Beta, lam)
        S = np.concatenate(list(named.values()))[None]
        scale_y = np.sqrt(np.abs(np.diagonal(Beta)).mean() / d) + 1e-300
        brute = rng.normal(size=(args.brute, k, d)) * scale_y * np.exp(rng.uniform(-1, 1, size=(args.brute, 1, 1)))
        f0 = _out_of_span(np.array([b_norm2]), C[None])
        res = _run_starts(np.concatenate([S, brute[None]], axis=1), C[None], Beta[None], lam, f0)
        f = res.objective[0]
        ns = len(named)
        scale = 2 * b_norm2 + float((Beta**2).sum())
        f_best = f.min()
        tol = 1e-9 * f_best + SCALE_RTOL * scale
        reach = f <= f_best + tol
        first_gap = _gap(res.y[:, :1].reshape(1, k, d), C[None], Beta[None], lam)[0]
        certified_first = first_gap <= CERT_RTOL * f[0] + SCALE_RTOL * scale
        best_gap = _gap(res.y[0, int(np.argmin(f))][None], C[None], Beta[None], lam)[0]
        certifiable = best_gap <= CERT_RTOL * f_best + SCALE_RTOL * scale
        if certified_first:
            n_cert += 1
            continue
        cert_missed += int(certifiable)
        n_unc += 1
        names = list(named)
        for i, name in enumerate(names):
            key = "random (each)" if name.startswith("random") else name
            hits[key] = hits.get(key, 0) + int(reach[i])
        ours = f[:ns]
        ours_best = ours.min()
        for r, count in agree.items():
            group = ours[: 5 + r]  # the first start, the four structured ones and r random ones
            if (np.abs(group - group.min()) <= tol).all():
                count[0] += 1
                count[1] += int(group.min() > f_best + tol)
        brute_wins += int(ours_best > f[ns:].min() + tol)
        groups = {name: [i] for i, name in enumerate(names) if not name.startswith("random")}
        groups["all random"] = [i for i, name in enumerate(names) if name.startswith("random")]
        for g, idx in groups.items():
            rest = np.delete(ours, idx)
            loo[g] = loo.get(g, 0) + int(rest.min() > ours_best + tol)
    print(f"{args.problems} problems: first start certified on {n_cert}; {n_unc} without a certificate "
          f"({cert_missed} of them certifiable from another start)")
    print("hit rate on blocks without a first-start certificate:")
    for key, v in hits.items():
        denom = n_unc * (RANDOM_STARTS + MORE_RANDOM_STARTS) if key == "random (each)" else n_unc
        print(f"  {key:24s} {v / max(denom, 1):.3f}")
    print("blocks whose best would be missed without:")
    for key, v in loo.items():
        print(f"  {key:24s} {v}")
    print(f"blocks on which {args.brute} brute-force random starts beat all the solver's starts: {brute_wins}")
    for r, (n_agree, n_wrong) in agree.items():
        print(f"blocks on which the first start, the four structured ones and {r} random ones all agree: "
              f"{n_agree}, of which above the best value: {n_wrong}")


if __name__ == "__main__":
    main()
