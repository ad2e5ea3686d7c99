"""Which in-map statistic detects a population switch soonest at the same false-alarm rate (docs/drift.md).

    python -m benchmarks.drift_statistics [--pools words,...] [--seeds 5] [--stationary 1000000]
                                          [--out benchmarks/results/drift_statistics.md]

For each pool of ``benchmarks.drift_pools`` and seed: a map of 200 landmarks
(100 for pools of fewer than 800 fit objects) chosen by max-variance with that
seed among the fit objects, d = 2. Every old and new object is projected once
(its 64 leading monitored coordinates, its unexplained energy, its centred
landmark-kernel row); streams are drawn from these with replacement. Each
candidate statistic is one value per block of objects, calibrated by the same
``core.monitor.block_detector.BlockDetector`` (a CUSUM on the values' falls, the
threshold set for ``ERT`` = 10⁸ stationary objects between false alarms) on a
baseline of 20,000 old objects (the daemon's ``drift.baseline_objects``); the
off-map CUSUM (``CusumDetector``, the daemon's defaults) sees the same baseline
objects' unexplained energies. Then:

* delay: the stream switches to the new population; objects until the
  detector alarms (median over seeds; "—" when it did not within 20,000);
* false alarms: ``--stationary`` old objects after the baseline, at a stated
  run of 10⁵ objects (so that alarms can be counted), per 10⁶ objects.

Candidates (the space the captured share is measured in, docs/math.md §7.7):

* ``nystrom q=…, M=…``: the map's share of the block's best d-plane in the
  space of the q leading monitored axes (the monitor's own projections; the
  product's statistic, ``drift.plane_axes`` and ``drift.plane_objects``);
* ``kernel q=…``: the same in the landmark-kernel space restricted to the q
  leading axes (each axis j weighted by √λ_j: the centred kernel row's
  coordinates on the eigenvectors);
* ``kernel rows``: the same on the whole centred landmark-kernel row (n
  dimensions, negative eigen-directions included);
* ``hotelling q=…``: a two-sample test of the block's mean profile on axes
  d+1..q against the baseline's (Hotelling's T² with the baseline covariance;
  a rise of T² is a fall of −T²): it alarms on any change of the mean off the
  map, including those no refit gains from.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchmarks.drift_pools import POOLS, load_pool
from streamembed import LandmarkMDS
from streamembed.core.inputs.centering import center_cross
from streamembed.core.monitor.block_detector import BlockDetector
from streamembed.core.monitor.captured import captured_share
from streamembed.core.monitor.cusum import CalibrationError
from streamembed.core.monitor.detector import CusumDetector
from streamembed.core.monitor.fit_baseline import leading_axes

BASELINE = 20_000
HORIZON = 20_000
ERT = 1e8
ERT_COUNTED = 1e5


@dataclass
class Projected:
    """One pool's objects on one seed's map."""

    d: int
    lam: np.ndarray
    axes_old: np.ndarray
    axes_new: np.ndarray
    u_old: np.ndarray
    u_new: np.ndarray
    kern_old: np.ndarray
    kern_new: np.ndarray


def project(name: str, seed: int) -> Projected:
    pool = load_pool(name)
    n = 200 if pool.D_fit.shape[0] >= 800 else 100
    est = LandmarkMDS(n_components=2, n_landmarks=n, random_state=seed).fit(pool.D_fit)
    model = est.model_
    lm = np.array([int(x) for x in model.landmark_ids])
    sp = model.spectrum

    def parts(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        A = rows[:, lm]
        res = model.place(A, errors="mask")
        B, _ = center_cross(np.square(A), sp.row_means, sp.grand_mean)
        return leading_axes(model, A, 64), res.unexplained, B

    ao, uo, ko = parts(pool.old_rows)
    an, un, kn = parts(pool.new_rows)
    return Projected(2, sp.eigenvalues, ao, an, uo, un, ko, kn)


Statistic = Callable[[Projected, np.ndarray, bool], float]


def nystrom(q: int) -> Statistic:
    def f(p: Projected, idx: np.ndarray, new: bool) -> float:
        B = (p.axes_new if new else p.axes_old)[idx, :q]
        return captured_share(B[:, : p.d], p.d, X=B)
    return f


def kernel_axes(q: int) -> Statistic:
    def f(p: Projected, idx: np.ndarray, new: bool) -> float:
        B = (p.axes_new if new else p.axes_old)[idx, :q] * np.sqrt(p.lam[:q])
        return captured_share(B[:, : p.d], p.d, X=B)
    return f


def kernel_rows(p: Projected, idx: np.ndarray, new: bool) -> float:
    K = (p.kern_new if new else p.kern_old)[idx]
    Y = (p.axes_new if new else p.axes_old)[idx, : p.d] * np.sqrt(p.lam[: p.d])
    return captured_share(Y, p.d, X=K)


def hotelling(q: int, base_idx: np.ndarray, p: Projected) -> Statistic:
    X = p.axes_old[base_idx, p.d:q]
    mu, S = X.mean(axis=0), np.cov(X.T)
    Sinv = np.linalg.pinv(S)

    def f(pp: Projected, idx: np.ndarray, new: bool) -> float:
        m = (pp.axes_new if new else pp.axes_old)[idx, p.d:q].mean(axis=0) - mu
        return -float(idx.size * m @ Sinv @ m)
    return f


def _blocks(stat: Statistic, p: Projected, idx: np.ndarray, new: bool, M: int) -> np.ndarray:
    G = idx.size // M
    return np.array([stat(p, idx[g * M:(g + 1) * M], new) for g in range(G)])


def run_block(stat: Statistic, p: Projected, M: int, rng: np.random.Generator, stationary: int) -> tuple[float, float]:
    """(objects from the switch to the alarm (inf: none within HORIZON), false alarms per 10⁶ stationary objects)."""
    base = rng.integers(0, p.u_old.size, BASELINE)
    values = _blocks(stat, p, base, False, M)
    det = BlockDetector(ERT, M, 1.0, 0.95)
    try:
        det.calibrate(values)
    except CalibrationError:
        return math.inf, math.nan
    new = rng.integers(0, p.u_new.size, HORIZON)
    d = det.update(_blocks(stat, p, new, True, M))
    delay = (d.index_in_batch + 1) * M if d.fired and d.index_in_batch is not None else math.inf
    counted = BlockDetector(ERT_COUNTED, M, 1.0, 0.95)
    counted.calibrate(values)
    assert counted.cusum is not None
    stat_values = _blocks(stat, p, rng.integers(0, p.u_old.size, stationary), False, M)
    alarms = counted.cusum.alarm_positions(-stat_values).size
    return delay, alarms / stationary * 1e6


def run_cusum(p: Projected, rng: np.random.Generator, stationary: int) -> tuple[float, float]:
    det = CusumDetector(ERT)
    det.calibrate(p.u_old[rng.integers(0, p.u_old.size, BASELINE)])
    pos = det.alarm_positions(p.u_new[rng.integers(0, p.u_new.size, HORIZON)])
    delay = float(pos[0] + 1) if pos.size else math.inf
    counted = CusumDetector(ERT_COUNTED)
    counted.calibrate(p.u_old[rng.integers(0, p.u_old.size, BASELINE)])
    alarms = counted.alarm_positions(p.u_old[rng.integers(0, p.u_old.size, stationary)]).size
    return delay, alarms / stationary * 1e6


def candidates(p: Projected, rng: np.random.Generator) -> dict[str, tuple[Statistic, int]]:
    base = rng.integers(0, p.u_old.size, BASELINE)
    out: dict[str, tuple[Statistic, int]] = {}
    for q in (16, 32, 64):
        for M in (64, 128):
            out[f"nystrom q={q}, M={M}"] = (nystrom(q), M)
    for q in (16, 32, 64):
        for M in (64, 128):
            out[f"kernel q={q}, M={M}"] = (kernel_axes(q), M)
    out["kernel rows, M=128"] = (kernel_rows, 128)
    out["hotelling q=32, M=128"] = (hotelling(32, base, p), 128)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--stationary", type=int, default=200_000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    names = [x for x in args.pools.split(",") if x]
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {}
    t0 = time.time()
    for name in names:
        for seed in range(args.seeds):
            p = project(name, seed)
            rng = np.random.default_rng(1000 + seed)
            rows.setdefault("cusum (off-map, u)", {}).setdefault(name, []).append(run_cusum(p, rng, args.stationary))
            for label, (stat, M) in candidates(p, rng).items():
                rows.setdefault(label, {}).setdefault(name, []).append(run_block(stat, p, M, rng, args.stationary))
            print(f"{name} seed {seed} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    head = "| statistic | " + " | ".join(f"{n}: delay / false alarms per 10⁶" for n in names) + " |"
    lines = [head, "| --- |" + " --- |" * len(names)]
    for label, per in rows.items():
        cells = []
        for n in names:
            runs = per.get(n, [])
            delays = [r[0] for r in runs]
            fa = [r[1] for r in runs if math.isfinite(r[1])]
            med = float(np.median(delays)) if delays else math.inf
            missed = sum(1 for x in delays if not math.isfinite(x))
            dtxt = "—" if not math.isfinite(med) else f"{med:,.0f}"
            cells.append(f"{dtxt}{f' ({missed} missed)' if missed else ''} / {np.mean(fa) if fa else math.nan:.2f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(f"`python -m benchmarks.drift_statistics --pools {args.pools} --seeds {args.seeds} "
                     f"--stationary {args.stationary}` ({time.time() - t0:.0f} s)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
