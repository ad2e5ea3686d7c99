"""What a refit and a fit cost against what they need: the tables of docs/performance.md ("Refits and fits").

    python -m benchmarks.bench_refit_cost [--rounds 5] [--sizes 100:1000,500:2000,1000:3000,2000:5000]
                                          [--fit-sizes 100,200,500,1000,2000,5000] [--json OUT]

**Refits.** For n landmarks and N candidates (the old landmarks and N − n
recent objects, half of them off the old map's plane), per round and in a
rotating order:

* ``refit``: ``core.refit.refit.refit`` with its defaults (``selection="adaptive"``);
* ``select+fit``: what a fresh map of the same candidates costs:
  ``select_landmarks`` (the default strategy) of n among the N, then ``fit_model``
  on them;
* ``fit``: ``fit_model`` of the n old landmarks alone.

Ratios are taken within a round; the table gives min and median over the rounds.

**Fits.** For n landmarks: ``fit_model`` with its defaults, against the top d
eigenpairs of the same kernel by ARPACK (``eigen.top_eigenpairs``, the least
any map of d axes computes) and scikit-learn's ``KernelPCA(kernel="precomputed",
n_components=d).fit`` of the double-centred kernel (the peer, if installed);
on Euclidean objects of low dimension (the kernel has rank 30) and on edit
distances between English words (non-Euclidean: the fit also calibrates the
``non_euclidean`` flag).

Everything runs in this process with the library's own BLAS settings (the
fit and the scoring of candidate maps take one BLAS thread themselves); the
load average is printed beside each table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from streamembed.core.fit import cmds
from streamembed.core.fit.eigen import top_eigenpairs
from streamembed.core.model import fit_model
from streamembed.core.refit.landmarks import select_landmarks
from streamembed.core.refit.refit import refit
from streamembed.core.runtime import single_blas_thread

D_COMPONENTS = 10


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _distances(X: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", X, X)
    D = np.sqrt(np.maximum(sq[:, None] + sq[None] - 2.0 * (X @ X.T), 0.0))
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D


def candidates(n: int, N: int, seed: int = 0) -> np.ndarray:
    """(N, N) distances: n old landmarks, then N − n recent objects of which the second half left the old plane."""
    rng = np.random.default_rng(seed)
    p = 30
    X = rng.normal(size=(N, p)) * np.linspace(3.0, 0.5, p)
    X[n + (N - n) // 2:, 10:20] *= 4.0
    return _distances(X)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _rounds(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per contender and round; every round runs each once, in a rotating order (after one warm-up)."""
    names = list(contenders)
    for name in names:
        contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            times[name].append(_timed(contenders[name]))
    return times


def _ratio(times: dict[str, list[float]], num: str, den: str) -> tuple[float, float]:
    r = [a / b for a, b in zip(times[num], times[den], strict=True)]
    return min(r), statistics.median(r)


def refit_table(sizes: list[tuple[int, int]], rounds: int) -> list[dict[str, object]]:
    rows = []
    print(f"\nrefits, d = {D_COMPONENTS} ({_load()})\n")
    print("| landmarks / candidates | refit s (median) | select+fit s | fit s | refit / select+fit (min, median) | "
          "refit / fit (min, median) | outcome |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for n, N in sizes:
        D = candidates(n, N)
        ids = [f"l{i}" for i in range(n)] + [f"c{i}" for i in range(N - n)]
        old = fit_model(D[:n, :n], n_components=D_COMPONENTS, landmark_ids=ids[:n])
        outcome: list[str] = []

        def run_refit(D: np.ndarray = D, ids: list[str] = ids, old: object = old, out: list[str] = outcome) -> None:
            res = refit(old, D, ids)
            out[:] = [f"{res.outcome} ({res.details.get('plan')}, {res.details.get('candidate')})"]

        def select_and_fit(D: np.ndarray = D, n: int = n) -> None:
            L = select_landmarks("max-variance", n, D=D, n_components=D_COMPONENTS)
            fit_model(D[np.ix_(L, L)], n_components=D_COMPONENTS)

        times = _rounds({"refit": run_refit, "select+fit": select_and_fit,
                         "fit": lambda D=D, n=n: fit_model(D[:n, :n], n_components=D_COMPONENTS)}, rounds)
        rs, rf = _ratio(times, "refit", "select+fit"), _ratio(times, "refit", "fit")
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"| {n:,} / {N:,} | {med['refit']:.3f} | {med['select+fit']:.3f} | {med['fit']:.3f} | "
              f"{rs[0]:.2f}, {rs[1]:.2f} | {rf[0]:.1f}, {rf[1]:.1f} | {outcome[0]} |", flush=True)
        rows.append({"n": n, "N": N, "times": times, "refit_over_select_fit": rs, "refit_over_fit": rf,
                     "outcome": outcome[0], "load": os.getloadavg()})
    return rows


def _kernel_pca(B: np.ndarray) -> Callable[[], object] | None:
    try:
        from sklearn.decomposition import KernelPCA
    except ImportError:
        return None
    return lambda: KernelPCA(n_components=D_COMPONENTS, kernel="precomputed").fit(B)


def fit_table(sizes: list[int], rounds: int, words: np.ndarray | None) -> list[dict[str, object]]:
    rows = []
    print(f"\nfits, d = {D_COMPONENTS} ({_load()})\n")
    print("| data | landmarks | fit s (median) | top-d eigsh s | KernelPCA.fit s | fit / top-d (min, median) | "
          "fit / KernelPCA (min, median) | rank kept | exact |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    cases = [("Euclidean, rank 30", n, candidates(n, n, seed=1)) for n in sizes]
    if words is not None:
        cases += [("edit distances (words)", n, words[:n, :n]) for n in sizes if n <= words.shape[0]]
    for name, n, D in cases:
        B = cmds.double_center(np.square(D))[0]

        def top_d(B: np.ndarray = B) -> object:
            with single_blas_thread():
                return top_eigenpairs(B, D_COMPONENTS)

        contenders: dict[str, Callable[[], object]] = {
            "fit": lambda D=D: fit_model(D, n_components=D_COMPONENTS), "top-d": top_d}
        peer = _kernel_pca(B) if n <= 2000 else None
        if peer is not None:
            contenders["KernelPCA"] = peer
        times = _rounds(contenders, rounds)
        model = fit_model(D, n_components=D_COMPONENTS)
        med = {k: statistics.median(v) for k, v in times.items()}
        rt = _ratio(times, "fit", "top-d")
        rk = _ratio(times, "fit", "KernelPCA") if "KernelPCA" in times else None
        kpca = f"{med['KernelPCA']:.3f}" if rk else "-"
        rk_text = f"{rk[0]:.2f}, {rk[1]:.2f}" if rk else "-"
        print(f"| {name} | {n:,} | {med['fit']:.3f} | {med['top-d']:.4f} | {kpca} | {rt[0]:.2f}, {rt[1]:.2f} | "
              f"{rk_text} | {model.spectrum.rank} | {model.spectrum.exact} |", flush=True)
        rows.append({"data": name, "n": n, "times": times, "fit_over_top_d": rt, "fit_over_kernel_pca": rk,
                     "rank": model.spectrum.rank, "load": os.getloadavg()})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="100:1000,500:2000,1000:3000,2000:5000",
                    help="refit sizes, landmarks:candidates, comma-separated ('' skips the refit table)")
    ap.add_argument("--fit-sizes", default="100,200,500,1000,1500,2000,5000",
                    help="fit sizes, comma-separated ('' skips the fit table)")
    ap.add_argument("--no-words", dest="words", action="store_false", help="leave out the edit-distance fits")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out: dict[str, object] = {}
    if args.sizes:
        sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",")]
        out["refits"] = refit_table([(a, b) for a, b in sizes], args.rounds)
    if args.fit_sizes:
        fit_sizes = [int(x) for x in args.fit_sizes.split(",")]
        words = None
        if args.words:
            from benchmarks.datasets import english_words

            words = english_words(n=min(max(fit_sizes), 3000)).D
        out["fits"] = fit_table(fit_sizes, args.rounds, words)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
