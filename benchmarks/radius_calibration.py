"""The placement radius on real data: coverage, size and ranking of the shipped score and of every candidate.

    python -m benchmarks.radius_calibration [--datasets a,b,...] [--seeds 5] [--landmarks 100,200]
                                            [--out docs/radius-benchmark.md] [--max-minutes 30]

For each dataset (real ones: scikit-learn's bundled breast_cancer, digits,
wine and diabetes, Euclidean; stdlib docstrings with Jaccard distances, stdlib
source lines with normalised edit distances and S&P 500 return paths with
DTW, non-Euclidean: ``benchmarks.radius_datasets``), each landmark count and
seed: a random 70 % of the objects is the fit population, the rest is held
out. ``LandmarkMDS(n_landmarks=n)`` fits on the fit population (which
calibrates the radius on its non-landmark objects, docs/math.md §9), then
every held-out object is placed by projection and by restricted
reconstruction. Truth: the held-out object's full-MDS position, i.e. where
the classical MDS of the fit population puts it (Gower's formula onto it,
aligned to the map on the landmarks: the calibration's definition, §9.1).
The second coverage column uses instead a classical MDS of *all* objects
(fit and held out): that full MDS is another sample, and its shift is not
something a radius around the placement can know about (§9.5).

Every candidate score is calibrated by split conformal prediction on the
same calibration objects the shipped calibration kept (``Calibrated.calibrating``)
and scored on the same held-out objects: the subset spread σ, the predicted
error ‖ê‖, √unexplained, √β, the distance to the nearest landmark and a
constant (one radius for all). ``shipped`` is the model's own radius
(√(‖ê‖² + κ²σ²)). Columns: coverage of the 0.9 radius (mean over seeds
[min, max]), median radius as a share of the map's RMS radius, Spearman
correlation of radius and error (median over seeds).

The population switch: the map is fitted on one population (a documented
split of each dataset's labels), then ``core.trust.check.sample_coverage``
checks the radius on a sample of k = 150 held-out objects of the same
population and on k = 150 objects of the other one, each against the exact
classical MDS of the landmarks and that sample.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

COVERAGE = 0.9
CANDIDATES = ("shipped", "spread", "predicted", "unexplained", "norm", "nearest", "constant")
METHODS = ("projection", "restricted")
#: (labels of the fit population, description) per dataset: the population switch.
SWITCHES = {"breast_cancer": ((1,), "benign -> malignant"), "digits": ((0, 1, 2, 3, 4), "digits 0-4 -> 5-9"),
            "code_lines_levenshtein": (tuple(range(11)), "lines of 11 modules -> of the 11 others"),
            "docstring_jaccard": (tuple(range(37)), "docstrings of 37 modules -> of the others"),
            "sp500_dtw": ((0, 1, 2, 3, 4), "AAPL..JNJ -> JPM..XOM")}


@dataclass
class Data:
    name: str
    D: np.ndarray
    labels: np.ndarray | None
    kind: str


def _sklearn(name: str) -> Data:
    import scipy.spatial.distance as ssd
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, f"load_{name}")()
    X = np.asarray(bunch.data, dtype=np.float64)
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)  # digits: std 0 pixels kept at 0
    if name == "digits":
        X = np.asarray(bunch.data, dtype=np.float64)  # raw pixel intensities share one unit
    return Data(name, ssd.squareform(ssd.pdist(X)), np.asarray(bunch.target), "Euclidean features")


def load(name: str) -> Data:
    if name in ("breast_cancer", "digits", "wine", "diabetes"):
        return _sklearn(name)
    from benchmarks.radius_datasets import RADIUS_DATASETS

    ds = RADIUS_DATASETS[name]()
    assert ds.D is not None
    return Data(name, ds.D, ds.labels, ds.description.split(", ")[-1])


DATASETS = ("breast_cancer", "digits", "wine", "diabetes", "docstring_jaccard", "code_lines_levenshtein", "sp500_dtw")


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    import scipy.stats

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(scipy.stats.spearmanr(a, b)[0])


def _scores(model, cal, method: str, A: np.ndarray, res) -> dict[str, np.ndarray]:
    """Every candidate score of objects with landmark rows A (m, n) placed as ``res``."""
    mc = cal.methods[method]
    a2 = np.square(A)
    a2 -= a2.mean(axis=1, keepdims=True)
    return {"shipped": cal.score(A, method), "spread": cal.sensitivity.spread(A),
            "predicted": np.linalg.norm(a2 @ mc.error_weights + mc.error_offsets, axis=1),
            "unexplained": np.sqrt(np.maximum(res.unexplained, 0.0)), "norm": np.sqrt(np.maximum(res.beta, 0.0)),
            "nearest": A.min(axis=1), "constant": np.ones(A.shape[0])}


def one_fit(data: Data, n_landmarks: int, seed: int, truth_sets: str = "halves") -> list[dict] | None:
    """The rows of one fit: per method and candidate, coverage, median radius share and Spearman."""
    from streamembed import LandmarkMDS
    from streamembed.core.trust.calibrate import calibrate_on_matrix
    from streamembed.core.trust.conformal import conformal_quantile
    from streamembed.core.trust.full_mds import FullMap

    D = data.D
    N = D.shape[0]
    perm = np.random.default_rng(seed).permutation(N)
    F, H = perm[: int(0.7 * N)], perm[int(0.7 * N):]
    if F.size - n_landmarks < 20:
        return None
    est = LandmarkMDS(n_landmarks=n_landmarks, random_state=seed).fit(D[np.ix_(F, F)])
    model = est.model_
    idx = est.landmark_indices_
    out = calibrate_on_matrix(model, D[np.ix_(F, F)], idx, coverage=COVERAGE, random_state=seed,
                              truth_sets=truth_sets)
    cal = out.calibration
    if cal is None or out.calibrating is None:
        return None
    model = model.with_radius_calibration(cal)
    L = F[idx]
    rest = np.setdiff1d(np.arange(F.size), idx)
    order = np.concatenate([idx, rest])  # indices into F: the calibration's full MDS (all non-landmark fit objects)
    full = FullMap.fit(D[np.ix_(F[order], F[order])], np.arange(idx.size), model.embedding)
    C = F[out.calibrating]
    if truth_sets == "apart":
        truth_cal = FullMap.fit_apart(D[np.ix_(C, C)], D[np.ix_(L, C)], model.embedding).positions
    else:
        own = np.concatenate([L, C]) if truth_sets == "halves" and out.predicting.size else np.concatenate([L, F[rest]])
        pos = {int(i): k for k, i in enumerate(own)}
        truth_cal = FullMap.fit(D[np.ix_(own, own)], np.arange(idx.size), model.embedding).positions[
            [pos[int(i)] for i in C]]
    truth_h = full.place(D[np.ix_(H, F[order])])
    every = np.concatenate([F[order], H])
    truth_all = FullMap.fit(D[np.ix_(every, every)], np.arange(idx.size), model.embedding).positions[F.size:]
    X = model.embedding
    map_radius = float(np.sqrt(np.mean(np.sum(np.square(X - X.mean(axis=0)), axis=1))))
    A_cal, A_h = D[np.ix_(F[out.calibrating], L)], D[np.ix_(H, L)]
    rows = []
    for method in METHODS:
        res_c, res_h = model.place(A_cal, method=method), model.place(A_h, method=method)
        e_c = np.linalg.norm(res_c.y - truth_cal, axis=1)
        e_h = np.linalg.norm(res_h.y - truth_h, axis=1)
        e_all = np.linalg.norm(res_h.y - truth_all, axis=1)
        s_c, s_h = _scores(model, cal, method, A_cal, res_c), _scores(model, cal, method, A_h, res_h)
        for name in CANDIDATES:
            if name == "predicted" and not out.predicting.size:  # a calibration too small to fit the predictor
                continue
            if name == "shipped":
                r = res_h.radius
            else:
                q = conformal_quantile(e_c / np.maximum(s_c[name], 1e-12 * map_radius), COVERAGE)
                r = q * s_h[name]
            rows.append({"dataset": data.name, "n": n_landmarks, "seed": seed, "method": method, "score": name,
                         "coverage": float(np.mean(e_h <= r)), "coverage_all": float(np.mean(e_all <= r)),
                         "radius": float(np.median(r)) / map_radius, "spearman": _spearman(r, e_h),
                         "calibration_objects": int(out.calibrating.size), "error": float(np.median(e_h)) / map_radius})
    return rows


def switch_runs(data: Data, seeds: int, k: int = 150, n_landmarks: int = 100) -> list[dict]:
    """Coverage of the radius on a sample of the fit population vs a sample of the other population."""
    from streamembed import LandmarkMDS
    from streamembed.core.trust.check import sample_coverage

    if data.name not in SWITCHES or data.labels is None:
        return []
    first, _ = SWITCHES[data.name]
    old = np.flatnonzero(np.isin(data.labels, first))
    new = np.flatnonzero(~np.isin(data.labels, first))
    rows = []
    for seed in range(seeds):
        rng = np.random.default_rng(1000 + seed)
        o = rng.permutation(old)
        held, fit = o[:k], o[k:]
        S2 = rng.choice(new, min(k, new.size), replace=False)
        est = LandmarkMDS(n_landmarks=n_landmarks, random_state=seed).fit(data.D[np.ix_(fit, fit)])
        L = fit[est.landmark_indices_]
        D_LL = data.D[np.ix_(L, L)]
        for label, S in (("stationary", held), ("switched", S2)):
            c = sample_coverage(est.model_, data.D[np.ix_(S, L)], data.D[np.ix_(S, S)], landmark_dissimilarities=D_LL)
            rows.append({"dataset": data.name, "seed": seed, "sample": label, "coverage": c.coverage,
                         "error": float(np.median(c.errors)), "radius": float(np.nanmedian(c.radius))})
    return rows


def _fmt(values: list[float]) -> str:
    v = np.asarray(values, dtype=float)
    return f"{np.mean(v):.3f} [{np.min(v):.2f}, {np.max(v):.2f}]"


def _med(values: list[float]) -> str:
    """The median to 2 decimals; "> 1000" for a degenerate radius (a score that vanishes on calibration
    objects, e.g. √β with β ≤ 0, gives an unbounded quantile)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if not v.size:
        return "–"
    return "> 1000" if np.median(v) > 1000 else f"{np.median(v):.2f}"


def render(rows: list[dict], switches: list[dict], header: str) -> str:
    lines = [header, "", "## The shipped radius (coverage 0.9)", "",
             "| dataset | n | method | calibration objects | coverage (fit-population full MDS) | coverage (full MDS "
             "of all objects) | median radius / map radius | median error / map radius | Spearman(radius, error) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    keys = sorted({(r["dataset"], r["n"], r["method"]) for r in rows}, key=lambda k: (DATASETS.index(k[0]), k[1], k[2]))
    spearmans = []
    for ds, n, method in keys:
        sel = [r for r in rows if (r["dataset"], r["n"], r["method"], r["score"]) == (ds, n, method, "shipped")]
        spearmans.append(float(np.median([r["spearman"] for r in sel])))
        lines.append(f"| {ds} | {n} | {method} | {int(np.median([r['calibration_objects'] for r in sel]))} | "
                     f"{_fmt([r['coverage'] for r in sel])} | {_fmt([r['coverage_all'] for r in sel])} | "
                     f"{_med([r['radius'] for r in sel])} | {_med([r['error'] for r in sel])} | "
                     f"{_med([r['spearman'] for r in sel])} |")
    lines += ["", f"Median over the rows of the per-row median Spearman: **{np.nanmedian(spearmans):.2f}**.", "",
              "## Every candidate score, calibrated the same way", "",
              "Each cell: mean coverage / median radius as a share of the map radius / median Spearman(radius, "
              "error), over the seeds. `constant` has no ranking (Spearman undefined).", "",
              "| dataset | n | method | " + " | ".join(CANDIDATES) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in CANDIDATES) + " |"]
    for ds, n, method in keys:
        cells = []
        for name in CANDIDATES:
            sel = [r for r in rows if (r["dataset"], r["n"], r["method"], r["score"]) == (ds, n, method, name)]
            cells.append("–" if not sel else f"{np.mean([r['coverage'] for r in sel]):.2f} / "
                         f"{_med([r['radius'] for r in sel])} / {_med([r['spearman'] for r in sel])}")
        lines.append(f"| {ds} | {n} | {method} | " + " | ".join(cells) + " |")
    overall = []
    for name in CANDIDATES:
        sels = [[r for r in rows if (r["dataset"], r["n"], r["method"], r["score"]) == (*k, name)] for k in keys]
        per = [np.median([r["spearman"] for r in sel]) for sel in sels if sel]
        rad = [np.median([r["radius"] for r in sel]) for sel in sels if sel]
        cov = [np.mean([r["coverage"] for r in sel]) for sel in sels if sel]
        if not sels or not any(sels):
            continue
        rho = "–" if name == "constant" else f"{np.nanmedian(per):.2f}"
        overall.append(f"| {name} | {rho} | {np.median(rad):.3f} | {min(cov):.2f}–{max(cov):.2f} |")
    lines += ["", "Over the rows (each row's median over seeds):", "",
              "| score | median Spearman | median radius / map radius | mean coverage, lowest–highest row |",
              "| --- | --- | --- | --- |", *overall]
    if switches:
        lines += ["", "## A population switch (``core.trust.check.sample_coverage``, k = 150, 100 landmarks)", "",
                  "| dataset | switch | coverage, same population | coverage, new population | median error, "
                  "same / new | median radius, same / new |", "| --- | --- | --- | --- | --- | --- |"]
        for ds in [d for d in DATASETS if any(s["dataset"] == d for s in switches)]:
            st = [s for s in switches if s["dataset"] == ds and s["sample"] == "stationary"]
            sw = [s for s in switches if s["dataset"] == ds and s["sample"] == "switched"]
            lines.append(f"| {ds} | {SWITCHES[ds][1]} | {_fmt([s['coverage'] for s in st])} | "
                         f"{_fmt([s['coverage'] for s in sw])} | {_med([s['error'] for s in st])} / "
                         f"{_med([s['error'] for s in sw])} | {_med([s['radius'] for s in st])} / "
                         f"{_med([s['radius'] for s in sw])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--landmarks", default="100,200")
    p.add_argument("--out", default="", help="write the tables (markdown) here; default: print them")
    p.add_argument("--max-minutes", type=float, default=30.0, help="stop starting new fits after this long")
    p.add_argument("--no-switch", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rows: list[dict] = []
    switches: list[dict] = []
    names = [x for x in args.datasets.split(",") if x]
    load_avg = os.getloadavg()[0]
    for name in names:
        data = load(name)
        print(f"{name}: {data.D.shape[0]} objects ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        for n in [int(x) for x in args.landmarks.split(",")]:
            for seed in range(args.seeds):
                if time.perf_counter() - t0 > 60 * args.max_minutes:
                    break
                got = one_fit(data, n, seed)
                rows.extend(got or [])
        if not args.no_switch:
            switches.extend(switch_runs(data, args.seeds))
    elapsed = time.perf_counter() - t0
    header = (f"# The placement radius on real data\n\nMade by `python -m benchmarks.radius_calibration "
              f"--seeds {args.seeds} --landmarks {args.landmarks}` in {elapsed:.0f} s (load average at start "
              f"{load_avg:.1f} on 2 cores); what each column means: the script's docstring and docs/math.md §9.")
    text = render(rows, switches, header)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text)
    return 0


run: Callable[[list[str] | None], int] = main

if __name__ == "__main__":
    sys.exit(main())
