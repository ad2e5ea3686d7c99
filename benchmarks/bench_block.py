"""Block RR throughput against single-object RR, in one run (docs/math.md §3).

For n landmarks, d kept axes and input dtype, objects/s of

- single-object RR: ``LandmarkMDS.embed(A, method="restricted")`` on ``m_single`` rows;
- block RR in blocks of k: ``core.place.block.prepare.prepare_blocks`` (validation,
  centring and projection of the rows, β of each block) plus
  ``core.place.block.solve.solve_blocks``, on ``m_block`` rows cut into consecutive
  blocks of k with their mutual dissimilarities;
- the former solver (``tools.block_reference``, one L-BFGS run per block
  and start) on a few blocks, for the before/after ratio;

each block rate also as a share of the single-object rate measured in the
same run (the machine is shared and noisy: compare only ratios). Problems
are those of ``python -m benchmarks bench``: landmarks and objects from N(0, I) in
R^(2d), Euclidean dissimilarities. ``--hard`` adds a configuration where
blocks lie mostly off the kept axes (few landmarks in R^3, d = 2, objects
with three more dimensions), where the certificate seldom closes and the
solver restarts blocks. ``--profile`` prints where the time goes.

    python -m benchmarks.bench_block [--n 500] [--d 10] [--ks 2,8,64] [--hard] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from collections.abc import Sequence

import numpy as np

from streamembed import LandmarkMDS
from streamembed.core.place.block.solve import solve_blocks
from streamembed.core.place.block.prepare import prepare_blocks
from tools.block_reference import solve_block_reference
from streamembed.core.inputs.centering import center_block

from benchmarks.timing import best_time, euclidean, landmark_matrix, make_points


def _blocks(Z: np.ndarray, k: int) -> list[np.ndarray]:
    """Mutual dissimilarities of consecutive blocks of k rows of Z."""
    return [euclidean(Z[s : s + k], Z[s : s + k]) for s in range(0, Z.shape[0], k)]


def _embed_blocks(model: LandmarkMDS, A: np.ndarray, cross: list[np.ndarray], sizes: np.ndarray,
                  n_threads: int | None = None):
    """The whole block path from raw rows: check and pack, then solve."""
    sp = model.spectrum_
    d = int(model.n_components)
    prep = prepare_blocks(A, cross, sizes, sp.row_means, sp.grand_mean, sp.eigenvectors[:, :d])
    b = prep.batch
    return solve_blocks(b.c, b.beta, b.sizes, model.eigenvalues_[:d], b.b_norm2, n_threads=n_threads)


def _reference_rate(model: LandmarkMDS, A: np.ndarray, cross: list[np.ndarray], k: int, n_blocks: int) -> float:
    """Objects/s of the former per-block L-BFGS solver on the first n_blocks blocks."""
    sp = model.spectrum_
    d = int(model.n_components)
    U = sp.eigenvectors[:, :d]
    t0 = time.perf_counter()
    for i in range(n_blocks):
        Ab = A[i * k : (i + 1) * k].astype(np.float64)
        B, Beta = center_block(Ab**2, cross[i] ** 2, sp.row_means, sp.grand_mean)
        solve_block_reference(B @ U, Beta, model.eigenvalues_[:d], float((B**2).sum()))
    return n_blocks * k / (time.perf_counter() - t0)


def run(n: int = 500, d: int = 10, ks: Sequence[int] = (2, 8, 64), dtypes: Sequence[str] = ("float32", "float64"),
        m_block: int = 32768, m_single: int = 200_000, repeat: int = 3, reference_objects: int = 128,
        landmark_dims: int | None = None, extra_dims: int = 0, seed: int = 0) -> list[dict]:
    """Rows of the table (module docstring); one per (dtype, k).

    landmark_dims/extra_dims: landmarks in R^landmark_dims (default 2d),
    objects with extra_dims more dimensions the landmarks do not reach.
    """
    p = 2 * d if landmark_dims is None else landmark_dims
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((n, p)) if landmark_dims is not None else make_points(n, 1, d, seed)[0]
    m_rows = max(m_block, m_single)
    Z = np.hstack([rng.standard_normal((m_rows, p)), rng.standard_normal((m_rows, extra_dims))])
    Lx = np.hstack([L, np.zeros((n, extra_dims))])
    model = LandmarkMDS(n_components=d).fit(landmark_matrix(L))
    rows = []
    for dtype in dtypes:
        A_all = np.ascontiguousarray(euclidean(Z, Lx), dtype=dtype)
        A_single = A_all[:m_single]
        t_single = best_time(lambda A_single=A_single: model.embed(A_single, method="restricted"), repeat)
        single_rate = m_single / t_single
        for k in ks:
            m = m_block // k * k
            A = A_all[:m]
            cross = [c.astype(dtype) for c in _blocks(Z[:m], k)]
            sizes = np.full(m // k, k)
            t_block = best_time(lambda A=A, cross=cross, sizes=sizes: _embed_blocks(model, A, cross, sizes), repeat,
                                budget_seconds=60.0)
            sol = _embed_blocks(model, A, cross, sizes)
            n_ref = max(1, min(reference_objects // k, len(cross)))
            ref_rate = _reference_rate(model, A, cross, k, n_ref)
            rows.append({
                "n": n, "d": d, "dtype": dtype, "k": k, "m_block": m, "m_single": m_single,
                "single_rr_objects_per_s": single_rate,
                "block_objects_per_s": m / t_block,
                "block_over_single_rr": t_single / m_single / (t_block / m),
                "reference_objects_per_s": ref_rate,
                "speedup_over_reference": (m / t_block) / ref_rate,
                "certified_share": float(sol.certified.mean()),
                "mean_starts": float(sol.n_starts.mean()),
                "mean_iterations": float(sol.iterations.mean()),
            })
    return rows


def profile(n: int = 500, d: int = 10, k: int = 8, dtype: str = "float32", m_block: int = 32768, top: int = 14,
            landmark_dims: int | None = None, extra_dims: int = 0) -> str:
    """cProfile of one block call (prepare + solve, on one thread so that the profiler sees all of it):
    the functions with the most own time."""
    p = 2 * d if landmark_dims is None else landmark_dims
    rng = np.random.default_rng(1)
    L = rng.standard_normal((n, p))
    Z = np.hstack([rng.standard_normal((m_block, p)), rng.standard_normal((m_block, extra_dims))])
    model = LandmarkMDS(n_components=d).fit(landmark_matrix(L))
    m = m_block // k * k
    A = np.ascontiguousarray(euclidean(Z[:m], np.hstack([L, np.zeros((n, extra_dims))])), dtype=dtype)
    cross = _blocks(Z[:m], k)
    sizes = np.full(m // k, k)
    _embed_blocks(model, A, cross, sizes, n_threads=1)
    prof = cProfile.Profile()
    prof.enable()
    _embed_blocks(model, A, cross, sizes, n_threads=1)
    prof.disable()
    import io

    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _print(rows: list[dict], title: str) -> None:
    print(title)
    print(f"{'dtype':8} {'k':>3} {'single RR obj/s':>15} {'block obj/s':>12} {'block/single':>12} {'before obj/s':>12}"
          f" {'speed-up':>9} {'certified':>9} {'starts':>7} {'iters':>6}")
    for r in rows:
        print(f"{r['dtype']:8} {r['k']:3d} {r['single_rr_objects_per_s']:15,.0f} {r['block_objects_per_s']:12,.0f} "
              f"{r['block_over_single_rr']:12.4f} {r['reference_objects_per_s']:12,.0f} "
              f"{r['speedup_over_reference']:9.0f} {r['certified_share']:9.3f} {r['mean_starts']:7.2f} "
              f"{r['mean_iterations']:6.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--ks", default="2,8,64", help="block sizes, comma-separated")
    ap.add_argument("--m-block", type=int, default=32768, help="rows embedded per block measurement")
    ap.add_argument("--m-single", type=int, default=200_000, help="rows embedded per single-RR measurement")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hard", action="store_true", help="also the configuration with blocks mostly off the kept axes")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one k = 8 and one k = 64 call")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.ks.split(",")]
    rows = run(args.n, args.d, ks, m_block=args.m_block, m_single=args.m_single, repeat=args.repeat)
    _print(rows, f"block RR, n = {args.n} landmarks, d = {args.d}, objects in R^{2 * args.d}")
    if args.hard:
        hard = run(40, 2, ks, ("float64",), m_block=args.m_block // 4, m_single=args.m_single, repeat=1,
                   landmark_dims=3, extra_dims=3)
        _print(hard, "\nhard: n = 40 landmarks in R^3, d = 2, objects with 3 dimensions more")
        rows += [dict(r, configuration="hard") for r in hard]
    if args.profile:
        for k in (8, 64):
            print(f"\nprofile, k = {k}, float32:")
            print(profile(args.n, args.d, k, m_block=args.m_block))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
