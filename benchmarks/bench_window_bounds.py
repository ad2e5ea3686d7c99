"""Are the drift window's k0 statistics what they are named? Bound coverage and estimate accuracy (docs/math.md §4).

    python -m benchmarks.bench_window_bounds [--windows 25] [--shares 0.01,0.05,0.1,0.3] [--k0-rows 32]

Euclidean data whose truth is computable: 100 landmarks drawn from a
3-dimensional Gaussian mixture in R^20 (intrinsic_dims = 3, as the daemon's
generator; the map keeps d = 2, so the third axis is dropped energy τ), and
windows of arrivals (4 batches of 256) of which a share lies off the
landmarks' span (the same mixture shifted 5 units along a random direction
orthogonal to it, plus isotropic noise of 0.5 in the 17 off-span
directions: that is k0). Each batch is embedded with ``k0_rows`` exact rows,
as the daemon does, and fed to a ``DriftWindow``; the truth is the window's
exact K0 (``model.block_residual`` with the window's mutual distances): Tr(K0)
and ‖K0‖₂ = λ_max(K0) (the landmarks are Euclidean with every positive
eigenpair kept, so ‖k0‖₂ over landmarks and window is that of the window).

Reported per off-span share: how often the window's ``norm_k0`` is at least
the true ‖k0‖₂ (a bound must be, always) and the ratio estimate/truth of
Tr(k0) for the old estimator (the scaled sample, which was also the old
``norm_k0``), the control variate Σu − (N/s)·Στ, and the regression
estimator the window now reports (``bounds.trace_estimate``), with the share
of windows within ±25 % and the estimator's own stated standard error
against its actual error.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


from streamembed import LandmarkMDS
from streamembed.core.monitor.drift import DriftWindow
from streamembed.core.monitor.residuals import dropped_energy


def world(rng: np.random.Generator, third: float, p: int = 20, q: int = 3, clusters: int = 4):
    basis = np.linalg.qr(rng.normal(size=(p, p)))[0]
    span, off = basis[:, :q], basis[:, q:]
    means = rng.normal(size=(clusters, q)) * 5.0 * np.array([1.0, 0.7, third])

    def draw(m: int, share: float) -> np.ndarray:
        lab = rng.integers(clusters, size=m)
        Z = (means[lab] + 0.5 * rng.normal(size=(m, q)) * np.array([3.0, 2.0, 1.0])[:q]) @ span.T
        far = rng.random(m) < share
        k = int(far.sum())
        if k:
            Z[far] += 5.0 * off[:, 0] + 0.5 * rng.normal(size=(k, p - q)) @ off.T
        return Z

    return draw


def dist(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    d2 = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2 * X @ Y.T
    return np.sqrt(np.maximum(d2, 0.0))


def one_window(seed: int, share: float, k0_rows: int, batches: int, batch: int, third: float) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    draw = world(rng, third)
    L = draw(100, 0.0)
    est = LandmarkMDS(n_components=2).fit(dist(L, L))
    model = est.model_
    win = DriftWindow.for_model(model, max_objects=batches * batch)
    Zs, old_k0, old_n = [], [], 0
    cv_tau, u_all = [], []
    for b in range(batches):
        Z = draw(batch, share)
        A = dist(Z, L)
        res = est.embed(A, k0_rows=k0_rows)
        rows = res.residual_rows
        win.add(float(b), res.relative_unexplained, res.k0[rows], res.residual_coords, res.beta[rows],
                unexplained=res.unexplained)
        Zs.append(Z)
        old_k0.append(res.k0[rows])
        cv_tau.append(dropped_energy(res.residual_coords, 2))
        u_all.append(res.unexplained)
        old_n += batch
    stats = win.statistics()
    Z = np.vstack(Zs)
    K0 = model.block_residual(dist(Z, L), dist(Z, Z))
    w = np.linalg.eigvalsh(0.5 * (K0 + K0.T))
    true_trace, true_norm = float(np.trace(K0)), float(w[-1])
    k0s, taus = np.concatenate(old_k0), np.concatenate(cv_tau)
    s = k0s.size
    old = old_n / s * float(k0s.sum())
    cv = stats.trace_k0_bound - old_n / s * float(taus.sum())
    us = k0s + taus
    ua = np.concatenate(u_all)
    c = np.cov(k0s, us)
    bsl = c[0, 1] / c[1, 1] if c[1, 1] > 0 else 0.0
    reg = old_n / s * k0s.sum() + bsl * (ua.sum() - old_n / s * us.sum())
    # post-stratified ratio estimator: strata by the window's u quantiles; per stratum Σ_all u·(Σk0/Σu)_sample
    edges = np.quantile(ua, [0.5, 0.9, 0.99])
    hs, ha = np.searchsorted(edges, us), np.searchsorted(edges, ua)
    strat, pooled = 0.0, k0s.sum() / us.sum() if us.sum() > 0 else 0.0
    for h in range(edges.size + 1):
        m = hs == h
        strat += ua[ha == h].sum() * (k0s[m].sum() / us[m].sum() if m.any() and us[m].sum() > 0 else pooled)
    return {"true_trace": true_trace, "true_norm": true_norm, "bound": stats.norm_k0, "old": old, "cv": cv, "reg": reg,
            "strat": strat,
            "new": stats.trace_k0, "stderr": stats.trace_k0_stderr, "trace_bound": stats.trace_k0_bound}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=25, help="windows per off-span share")
    ap.add_argument("--shares", default="0.01,0.05,0.1,0.3")
    ap.add_argument("--k0-rows", type=int, default=32, help="exact k0 rows per batch (daemon default 32)")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--third", type=float, default=0.3,
                    help="spread of the cluster means along the dropped third axis, relative to the first")
    args = ap.parse_args()
    t0 = time.perf_counter()
    shares = [float(x) for x in args.shares.split(",")]
    rows, covered, total = [], 0, 0
    for share in shares:
        out = [one_window(1000 * i + int(share * 1e4), share, args.k0_rows, args.batches, args.batch, args.third)
               for i in range(args.windows)]
        tr = np.array([o["true_trace"] for o in out])
        ok = np.array([o["bound"] >= o["true_norm"] * (1 - 1e-9) for o in out])
        tb = np.array([o["trace_bound"] >= o["true_trace"] * (1 - 1e-9) for o in out])
        covered += int(ok.sum())
        total += ok.size
        loose = np.array([o["bound"] / o["true_norm"] for o in out])
        line = {"share": share, "bound >= ||k0||": f"{ok.sum()}/{ok.size}", "sum u >= Tr": f"{tb.sum()}/{tb.size}",
                "bound/||k0||": f"{loose.min():.2f}-{loose.max():.2f}"}
        for name in ("old", "cv", "reg", "strat", "new"):
            ratio = np.array([o[name] for o in out]) / tr
            line[name] = f"{ratio.min():.2f}-{ratio.max():.2f} ({np.mean(np.abs(ratio - 1) <= 0.25):.0%})"
        z = np.array([(o["new"] - o["true_trace"]) / o["stderr"] if o["stderr"] > 0 else 0.0 for o in out])
        line["|err| <= 2 se"] = f"{np.mean(np.abs(z) <= 2):.0%}"
        rows.append(line)
    cols = list(rows[0])
    print(f"{args.windows} windows per share of {args.batches} x {args.batch} objects, k0_rows = {args.k0_rows} "
          f"per batch; estimate/truth ratio range (share of windows within +-25 %)")
    print("| " + " | ".join(cols) + " |")
    print("| " + " | ".join("---" for _ in cols) + " |")
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    print(f"bound coverage: {covered}/{total} windows; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
