"""``python -m benchmarks drift``: drift detectors and refit landmark selection on streams with a known change.

Two experiments on residual streams of real landmark maps (docs/math.md §7):

**Detectors.** A landmark map (n landmarks by max–min, d = 2, classical MDS)
is fitted on a stationary sample; objects then arrive and are embedded by
projection, giving per object the unexplained energy u = β − ‖ŷ‖², the
relative unexplained energy u/β and the map coordinates y. Scenarios:

* stationary streams, whose alarms are false alarms: Euclidean and L1
  (cityblock) dissimilarities of a Gaussian mixture on a plane in R^10 with
  isotropic noise, and the normalised edit distance between stdlib docstring
  first lines (objects drawn at random from the corpus: the per-object values
  of the corpus are computed once, the stream resamples them);
* streams that change at object τ (Euclidean): a new cluster off the
  landmarks' span, a slow rotation of the mixture's plane out of the span,
  a scale change (every spread ×1.1), and a new cluster *inside* the map's
  plane, which should not need a refit: once among the landmarks (6 units
  from the mixture's centre) and once beyond them (12 units), where the
  error of the map's fitted plane shows in u.

Each detector sees the same stream; its first ``baseline`` objects are its
calibration/warm-up and alarms are counted after them; after an alarm each
detector restarts as it would after a refit. Detectors:

* ``cusum``: ``core.monitor.detector.CusumDetector`` on u (ERT 10⁸ and 10⁶ objects;
  min_shift 0.1 and 0.25), and on u/β for comparison;
* ``rule``: today's ``RefitTrigger`` on the window statistic
  ``relative_unexplained_mean`` (``DriftWindow`` of 50,000 objects,
  statistics every 10,240 objects, the daemon's defaults, no cooldown);
* River's ``ADWIN``, ``KSWIN`` and ``PageHinkley`` on the same statistic,
  standardised by the same baseline and averaged in the same groups of b
  objects (they are per-item Python: per object they would see 256× more
  items and be 256× slower; on group means they see exactly what the CUSUM
  sees). Each at its default setting and at the most sensitive setting of
  a small grid that raises no false alarm on a separate stationary tuning
  stream as long as the Euclidean one (its false-alarm rate is then
  comparable to the CUSUM's at ERT 10⁸);
* ``mmd``: a two-sample test on the embedded coordinates: the biased MMD²
  with scikit-learn's RBF kernel (median-heuristic bandwidth) between a
  reference of the baseline's coordinates and each consecutive window of
  recent ones (every 10th object), its threshold the 1 − α quantile of a
  gamma fitted to bootstrap windows of the baseline (Gretton et al. 2009),
  with α = objects per test / ERT. alibi-detect's ``MMDDriftOnline`` (the
  same idea with an ERT-calibrated bootstrap) is not used: it needs a
  TensorFlow or PyTorch backend and pins numpy < 2.

Reported per detector: false alarms per 10⁶ stationary objects with an exact
Poisson 95 % interval, the median and 90th percentile of the detection delay
in objects over replicates, and misses (no alarm within the horizon).

**Landmark selection.** At a refit point after each change, candidates are
the old landmarks plus a reservoir of the 2,000 most recent objects
(``core.refit.refit.candidate_dissimilarities``, feature mode); ``core.refit.refit.refit``
runs with every ``refit.selection``, and each refit is scored by (a) the
window's mean relative unexplained energy under the new map, (b) fidelity:
RMS distance, after Procrustes alignment, between the new map's placement
of landmarks + window and a full classical MDS of old landmarks + window,
divided by the latter's RMS radius, (c) the alignment RMS of the old
landmarks (how much the map moved), (d) refit seconds.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np
import scipy.spatial.distance
from scipy.stats import chi2, gamma

from streamembed.core.monitor.detector import CusumDetector
from streamembed.core.monitor.drift import DriftWindow, RefitTrigger
from streamembed.core.refit.strategies import maxmin_select
from streamembed.core.refit.procrustes import orthogonal_procrustes_align
from streamembed.core.refit.refit import candidate_dissimilarities, refit

#: The refit selections compared besides "adaptive" (refit.selection values).
SELECTIONS = ("residual", "maxmin", "random", "kmeans++")

__all__ = ["BenchSettings", "MixtureWorld", "Change", "Stream", "DetectorSpec", "run_benchmark",
           "format_detector_table", "format_selection_table", "format_report", "selection_ranking", "main"]


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class BenchSettings:
    """Sizes of one benchmark run (objects unless stated).

    ``stationary_objects`` per stationary stream (three of them, plus a tuning
    stream of the same length); ``replicates`` streams per change scenario,
    each ``change_at`` + ``horizon`` long; ``baseline`` calibration objects at
    the start of every stream; ``group_objects`` b for the CUSUM and the
    group means River's detectors see.
    """

    stationary_objects: int = 10_000_000
    replicates: int = 20
    change_at: int = 100_000
    horizon: int = 400_000
    baseline: int = 20_000
    n_landmarks: int = 100
    group_objects: int = 256
    min_shift: float = 0.1
    expected_run_objects: float = 1e8
    edit_corpus: int = 800
    selection_replicates: int = 3
    selection_window: int = 3000
    reservoir: int = 2000
    seed: int = 0
    peers: bool = True
    mmd_bootstrap: int = 200


# --------------------------------------------------------------------------- the world


@dataclass(frozen=True)
class Change:
    """A change of the stream at object ``at`` (kind "none" never changes).

    Kinds: "new_cluster" (a share of objects from a cluster ``size`` units off
    the plane), "rotation" (the plane turns out of the span by ``size``
    radians per 100,000 objects), "scale" (every spread × ``size``),
    "in_span" (a share of objects from a new cluster inside the plane, ``size``
    units from the mixture's centre).
    """

    kind: str = "none"
    at: int = 0
    size: float = 0.0
    share: float = 0.2


class MixtureWorld:
    """A Gaussian mixture on a q-plane of R^p with isotropic noise, and its changes.

    Units are feature units. ``off`` (p,) is a unit vector orthogonal to the plane.
    """

    def __init__(self, p: int = 10, q: int = 2, clusters: int = 4, spread: float = 5.0, cluster_std: float = 0.5,
                 noise_std: float = 0.3, seed: int = 0) -> None:
        rng = np.random.default_rng([seed, 0xD81F])
        Q, _ = np.linalg.qr(rng.standard_normal((p, q + 1)))
        self.p, self.q = p, q
        self.basis, self.off = Q[:, :q], Q[:, q]
        self.means = spread * rng.standard_normal((clusters, q))
        self.cluster_std, self.noise_std, self.spread = cluster_std, noise_std, spread
        self.in_span_dir = np.eye(q)[0]

    def draw(self, rng: np.random.Generator, start: int, count: int, change: Change = Change()) -> np.ndarray:
        """(count, p) objects with indices start .. start + count − 1."""
        idx = start + np.arange(count)
        after = idx >= change.at if change.kind != "none" else np.zeros(count, dtype=bool)
        comp = rng.integers(0, self.means.shape[0], count)
        scale = np.where(after & (change.kind == "scale"), change.size, 1.0)[:, None]
        latent = self.means[comp] + self.cluster_std * scale * rng.standard_normal((count, self.q))
        if change.kind == "rotation":
            theta = np.where(after, change.size * (idx - change.at) / 1e5, 0.0)
            first = latent[:, :1] * np.cos(theta)[:, None]
            X = first * self.basis[:, 0] + latent[:, 1:] @ self.basis[:, 1:].T
            X += (latent[:, 0] * np.sin(theta))[:, None] * self.off
        else:
            X = latent @ self.basis.T
        X += self.noise_std * scale * rng.standard_normal((count, self.p))
        if change.kind in ("new_cluster", "in_span"):
            new = after & (rng.random(count) < change.share)
            k = int(new.sum())
            if k:
                centre = (change.size * self.off if change.kind == "new_cluster"
                          else (self.means.mean(axis=0) + change.size * self.in_span_dir) @ self.basis.T)
                X[new] = centre + self.cluster_std * rng.standard_normal((k, self.p))
                if change.kind == "in_span":  # in the plane, with the usual noise off it
                    X[new] = (centre + (self.cluster_std * rng.standard_normal((k, self.q))) @ self.basis.T
                              + self.noise_std * rng.standard_normal((k, self.p)))
        return X


def _distances(X: np.ndarray, L: np.ndarray, metric: str) -> np.ndarray:
    if metric == "euclidean":
        sq = (X * X).sum(1)[:, None] + (L * L).sum(1)[None] - 2.0 * X @ L.T
        return np.sqrt(np.maximum(sq, 0.0))
    return scipy.spatial.distance.cdist(X, L, metric=metric)


@dataclass
class Stream:
    """Per-object residual statistics of one stream.

    Attributes:
        u: (T,) unexplained energy β − ‖ŷ‖² (squared-distance units).
        rel: (T,) u/β (float32).
        y: (T // y_every, d) map coordinates of every ``y_every``-th object.
        change_at: τ (None for a stationary stream).
    """

    name: str
    u: np.ndarray
    rel: np.ndarray
    y: np.ndarray
    y_every: int
    change_at: int | None

    @property
    def size(self) -> int:
        return int(self.u.size)


def fit_map(world: MixtureWorld, n_landmarks: int, metric: str, seed: int) -> tuple[Any, np.ndarray]:
    """(LandmarkModel, landmark features (n, p)): max–min landmarks of 3,000 stationary objects, 2-d classical MDS."""
    from streamembed.estimator import LandmarkMDS

    sample = world.draw(np.random.default_rng([seed, 1]), 0, 3000)
    D = scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(sample, metric=metric))
    L = sample[maxmin_select(n_landmarks, D=D, first=0)]
    return LandmarkMDS(n_components=2).fit_features(L, metric=metric).model_, L


def residual_stream(name: str, world: MixtureWorld, est: Any, L: np.ndarray, metric: str, length: int,
                    change: Change, seed: int, y_every: int = 10, chunk: int = 200_000) -> Stream:
    """Embed ``length`` objects by projection and keep their residuals (see ``Stream``)."""
    u = np.empty(length)
    rel = np.empty(length, dtype=np.float32)
    ys = []
    rng = np.random.default_rng([seed, 2])
    for start in range(0, length, chunk):
        m = min(chunk, length - start)
        res = est.place(_distances(world.draw(rng, start, m, change), L, metric), method="projection")
        u[start:start + m] = res.unexplained
        rel[start:start + m] = res.relative_unexplained
        first = (-start) % y_every
        ys.append(res.y[first::y_every])
    return Stream(name, u, rel, np.vstack(ys), y_every, None if change.kind == "none" else change.at)


def edit_stream_pool(n_corpus: int, n_landmarks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The docstring corpus's per-object (u, u/β, y) against max–min landmarks chosen from it."""
    from streamembed.estimator import LandmarkMDS
    from benchmarks.datasets import stdlib_docstrings

    D = stdlib_docstrings(n=n_corpus).dissimilarities()
    L = maxmin_select(min(n_landmarks, D.shape[0] // 4), D=D, first=0)
    rest = np.setdiff1d(np.arange(D.shape[0]), L)
    est = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)])
    res = est.embed(D[np.ix_(rest, L)], method="projection")
    return res.unexplained, res.relative_unexplained, res.y


def resampled_stream(name: str, pool: tuple[np.ndarray, np.ndarray, np.ndarray], length: int, seed: int,
                     y_every: int = 10) -> Stream:
    """A stationary stream of objects drawn uniformly with replacement from a corpus."""
    u, rel, y = pool
    idx = np.random.default_rng([seed, 3]).integers(0, u.size, length)
    return Stream(name, u[idx], rel[idx].astype(np.float32), y[idx[::y_every]], y_every, None)


# --------------------------------------------------------------------------- detectors


@dataclass(frozen=True)
class DetectorSpec:
    """One detector configuration of the table."""

    name: str
    setting: str
    run: Callable[[Stream, BenchSettings], np.ndarray]  # alarm positions (objects, after the baseline)


def _calibrated(stream: Stream, s: BenchSettings, ert: float, values: np.ndarray | None = None,
                min_shift: float | None = None) -> tuple[CusumDetector, np.ndarray]:
    v = stream.u if values is None else values
    det = CusumDetector(ert, s.min_shift if min_shift is None else min_shift, s.group_objects)
    det.calibrate(v[: s.baseline])
    return det, v


def cusum_runner(ert: float, relative: bool = False, min_shift: float | None = None
                 ) -> Callable[[Stream, BenchSettings], np.ndarray]:
    def run(stream: Stream, s: BenchSettings) -> np.ndarray:
        det, v = _calibrated(stream, s, ert, stream.rel.astype(np.float64) if relative else None, min_shift)
        return s.baseline + det.alarm_positions(v[s.baseline:])  # the daemon's own path (clipping, groups)

    return run


def rule_runner(step: int = 10_240, window_objects: int = 50_000) -> Callable[[Stream, BenchSettings], np.ndarray]:
    def run(stream: Stream, s: BenchSettings) -> np.ndarray:
        trig = RefitTrigger(baseline_objects=s.baseline, cooldown_seconds=0.0)
        win = DriftWindow(np.ones(2), 2, s.n_landmarks, max_objects=window_objects)
        alarms = []
        for start in range(0, stream.size - step + 1, step):
            now = float(start + step)
            win.add(now, stream.rel[start:start + step])
            d = trig.observe(now, win.statistics(), step)
            if d.fire:
                if start + step > s.baseline:
                    alarms.append(start + step - 1)
                trig.refitted(now)
                win.clear()
        return np.asarray(alarms, dtype=np.int64)

    return run


def river_runner(make: Callable[[], Any]) -> Callable[[Stream, BenchSettings], np.ndarray]:
    """A River drift detector fed the baseline-standardised group means from the stream's start."""

    def run(stream: Stream, s: BenchSettings) -> np.ndarray:
        det, v = _calibrated(stream, s, s.expected_run_objects)
        x = det.increments(det.group_means(v)) + det.calibration.reference  # what the CUSUM sees
        first = s.baseline // s.group_objects
        d = make()
        alarms = []
        for j, value in enumerate(x.tolist()):
            d.update(value)
            if d.drift_detected and j >= first:
                alarms.append((j + 1) * s.group_objects - 1)
        return np.asarray(alarms, dtype=np.int64)

    return run


class WindowedMMD:
    """Biased MMD² between baseline coordinates and consecutive windows of recent ones (module docstring)."""

    def __init__(self, ert: float, every_objects: int = 5000, reference: int = 500, bootstrap: int = 200,
                 seed: int = 0) -> None:
        self.ert, self.every, self.n_ref, self.n_boot, self.seed = ert, every_objects, reference, bootstrap, seed

    def run(self, stream: Stream, s: BenchSettings) -> np.ndarray:
        from sklearn.metrics.pairwise import rbf_kernel

        rng = np.random.default_rng(self.seed)
        w = self.every // stream.y_every  # coordinates per window
        base = stream.y[: s.baseline // stream.y_every]
        perm = rng.permutation(base.shape[0])
        ref, pool = base[perm[: self.n_ref]], base[perm[self.n_ref:]]
        med = np.median(scipy.spatial.distance.pdist(ref))
        g = 1.0 / (2.0 * med**2)
        kxx = rbf_kernel(ref, ref, gamma=g).mean()

        def mmd(W: np.ndarray) -> float:
            return float(kxx + rbf_kernel(W, W, gamma=g).mean() - 2.0 * rbf_kernel(W, ref, gamma=g).mean())

        null = np.array([mmd(pool[rng.integers(0, pool.shape[0], w)]) for _ in range(self.n_boot)])
        m, var = null.mean(), null.var(ddof=1)
        alpha = self.every / self.ert
        threshold = float(gamma.ppf(1.0 - alpha, m * m / var, scale=var / m))
        alarms = []
        for end in range(s.baseline + self.every, stream.size + 1, self.every):
            W = stream.y[(end - self.every) // stream.y_every: end // stream.y_every]
            if W.shape[0] == w and mmd(W) > threshold:
                alarms.append(end - 1)
        return np.asarray(alarms, dtype=np.int64)


def _river() -> Any:
    try:
        from river import drift
    except ImportError as exc:  # pragma: no cover - the eval extra is missing
        raise ImportError("the drift benchmark's peers need River: pip install 'streamembed[eval]'") from exc
    return drift


#: Peer grids from most to least sensitive (value -> factory); the first entry with no false alarm on
#: the tuning stream is the "tuned" setting.
def peer_grids() -> dict[str, tuple[str, list[tuple[str, Callable[[], Any]]], str]]:
    drift = _river()
    return {
        "ADWIN": ("delta", [(f"{d:g}", (lambda d=d: drift.ADWIN(delta=d))) for d in (0.002, 1e-4, 1e-6, 1e-8, 1e-10)],
                  "0.002"),
        "KSWIN": ("alpha", [(f"{a:g}", (lambda a=a: drift.KSWIN(alpha=a, seed=1)))
                            for a in (0.005, 1e-4, 1e-6, 1e-8, 1e-10)],
                  "0.005"),
        "PageHinkley (mode up)": ("threshold", [(f"{t:g}", (lambda t=t: drift.PageHinkley(threshold=t, mode="up")))
                                                for t in (5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0)], "50"),
    }


# --------------------------------------------------------------------------- scoring


def poisson_interval(count: int, exposure: float, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate from ``count`` events in ``exposure``."""
    a = 1.0 - level
    lo = 0.0 if count == 0 else chi2.ppf(a / 2, 2 * count) / 2
    hi = chi2.ppf(1 - a / 2, 2 * count + 2) / 2
    return lo / exposure, hi / exposure


@dataclass
class DetectorRow:
    """One detector configuration's results (objects; rates per 10⁶ objects)."""

    detector: str
    setting: str
    false_alarms: int
    stationary_objects: int
    fa_per_million: float
    fa_ci_low: float
    fa_ci_high: float
    fa_by_stream: dict = field(default_factory=dict)
    delays: dict = field(default_factory=dict)  # scenario -> {"median", "p90", "misses", "replicates", "pre_change"}
    seconds: float = 0.0


def _delay_summary(firsts: list[int | None], pre: int) -> dict:
    got = np.array([f for f in firsts if f is not None], dtype=np.float64)
    return {"median": float(np.median(got)) if got.size else math.nan,
            "p90": float(np.percentile(got, 90)) if got.size else math.nan,
            "misses": int(len(firsts) - got.size), "replicates": len(firsts), "pre_change": int(pre)}


# --------------------------------------------------------------------------- landmark selection


@dataclass
class SelectionRow:
    """One selection strategy on one scenario (means over replicates)."""

    scenario: str
    selection: str
    unexplained_before: float
    unexplained_after: float
    energy_before: float
    energy_after: float
    fidelity: float
    alignment_rms: float
    seconds: float
    kept_old: float


def selection_comparison(world: MixtureWorld, s: BenchSettings, scenarios: dict[str, tuple[Change, int]],
                         progress: Callable[[str], None] = lambda _: None) -> list[SelectionRow]:
    """Refit with every selection at ``refit_at`` objects into each scenario (module docstring)."""
    from streamembed.estimator import LandmarkMDS

    est, L = fit_map(world, s.n_landmarks, "euclidean", s.seed)
    rows: list[SelectionRow] = []
    for name, (change, refit_at) in scenarios.items():
        rng = np.random.default_rng([s.seed, 7, len(rows)])
        recent = world.draw(rng, refit_at - s.selection_window, s.selection_window, change)
        window, reservoir = recent, recent[-s.reservoir:]
        ids_res = [f"r{i}" for i in range(reservoir.shape[0])]
        cs = candidate_dissimilarities(est.landmark_ids, ids_res, old_features=est.features,
                                       features=reservoir, metric="euclidean")
        both = np.vstack([L, window])
        D_both = scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(both))
        ref = LandmarkMDS(n_components=2).fit(D_both).embedding_
        radius = float(np.sqrt(((ref - ref.mean(0)) ** 2).sum(1).mean()))
        res0 = est.place(_distances(window, L, "euclidean"))
        before, energy0 = float(np.nanmean(res0.relative_unexplained)), float(np.mean(res0.unexplained))
        for selection in ("adaptive", *SELECTIONS):
            acc = []
            reps = 1 if selection == "maxmin" else s.selection_replicates
            for r in range(reps):
                res = refit(est, cs.D, cs.ids, features=cs.features, selection=selection, seed=r)
                model = est if res.model is None else res.model  # kept: the map in service stays
                sel_feats = model.features
                res1 = model.place(_distances(window, sel_feats, "euclidean"))
                after, energy = float(np.nanmean(res1.relative_unexplained)), float(np.mean(res1.unexplained))
                placed = model.place(_distances(both, sel_feats, "euclidean"), method="projection").y
                _, _, rms = orthogonal_procrustes_align(placed, ref)
                acc.append((after, energy, rms / radius, res.alignment_rms, res.duration_seconds,
                            res.details["kept_old"]))
            a = np.mean(np.array(acc), axis=0)
            rows.append(SelectionRow(name, selection, before, float(a[0]), energy0, float(a[1]), float(a[2]),
                                     float(a[3]), float(a[4]), float(a[5])))
        progress(f"selection: {name} done")
    return rows


# --------------------------------------------------------------------------- the run


def change_scenarios(s: BenchSettings) -> dict[str, Change]:
    tau = s.change_at
    return {
        "new cluster off span": Change("new_cluster", tau, 4.0, 0.2),
        "slow rotation out of span": Change("rotation", tau, 0.1),
        "scale x1.1": Change("scale", tau, 1.1),
        "new cluster in span, inside the landmarks": Change("in_span", tau, 6.0, 0.2),
        "new cluster in span, beyond the landmarks": Change("in_span", tau, 12.0, 0.2),
    }


def _peer_detectors(s: BenchSettings, world: MixtureWorld, euclidean_map: tuple[Any, np.ndarray],
                    progress: Callable[[str], None],
                    t_start: float) -> tuple[list[DetectorSpec], dict[str, dict]]:
    """River's detectors (at their defaults and tuned to no false alarm on a tuning stream) and the MMD test."""
    specs: list[DetectorSpec] = []
    tuning_report: dict[str, dict] = {}
    tune = residual_stream("tuning", world, *euclidean_map, "euclidean", s.stationary_objects, Change(),
                           s.seed + 1000)
    progress(f"tuning stream ready ({time.perf_counter() - t_start:.0f} s)")
    for peer, (param, grid, default) in peer_grids().items():
        counts = {}
        chosen = grid[-1][0]
        for value, make in grid:
            counts[value] = int(river_runner(make)(tune, s).size)
        for value, _ in grid:
            if counts[value] == 0:
                chosen = value
                break
        tuning_report[peer] = {"parameter": param, "false_alarms_on_tuning": counts, "tuned": chosen,
                               "tuning_objects": tune.size - s.baseline}
        lookup = dict(grid)
        specs.append(DetectorSpec(peer, f"{param}={default} (default)", river_runner(lookup[default])))
        if chosen != default:
            specs.append(DetectorSpec(peer, f"{param}={chosen} (tuned)", river_runner(lookup[chosen])))
        progress(f"tuned {peer}: {param}={chosen} ({counts})")
    del tune
    specs.append(DetectorSpec("MMD on coordinates", f"ERT {s.expected_run_objects:.0e}, RBF, window 5k",
                              WindowedMMD(s.expected_run_objects, bootstrap=s.mmd_bootstrap, seed=s.seed).run))
    return specs, tuning_report


def run_benchmark(s: BenchSettings = BenchSettings(), progress: Callable[[str], None] = lambda _: None,
                  selection: bool = True) -> dict:
    """Both experiments; returns a JSON-ready report (tables are formatted from it)."""
    t_start = time.perf_counter()
    world = MixtureWorld(seed=s.seed)
    maps = {m: fit_map(world, s.n_landmarks, m, s.seed) for m in ("euclidean", "cityblock")}
    specs: list[DetectorSpec] = [
        DetectorSpec("cusum (ours)", f"ERT {s.expected_run_objects:.0e}, u", cusum_runner(s.expected_run_objects)),
        DetectorSpec("cusum (ours)", "ERT 1e+06, u", cusum_runner(1e6)),
        DetectorSpec("cusum (ours)", f"ERT {s.expected_run_objects:.0e}, u, min_shift 0.25",
                     cusum_runner(s.expected_run_objects, min_shift=0.25)),
        DetectorSpec("cusum (ours)", f"ERT {s.expected_run_objects:.0e}, u/β",
                     cusum_runner(s.expected_run_objects, True)),
        DetectorSpec("rule (today)", "ratio 1.5, margin 0.05, min 20k", rule_runner()),
    ]
    tuning_report: dict[str, dict] = {}
    if s.peers:
        peer_specs, tuning_report = _peer_detectors(s, world, maps["euclidean"], progress, t_start)
        specs += peer_specs
    rows = [DetectorRow(sp.name, sp.setting, 0, 0, 0.0, 0.0, 0.0) for sp in specs]
    seconds = np.zeros(len(specs))

    def feed_stationary(stream: Stream) -> None:
        for i, sp in enumerate(specs):
            t0 = time.perf_counter()
            alarms = sp.run(stream, s)
            seconds[i] += time.perf_counter() - t0
            rows[i].false_alarms += int(alarms.size)
            rows[i].stationary_objects += stream.size - s.baseline
            rows[i].fa_by_stream[stream.name] = int(alarms.size)

    T = s.stationary_objects
    for metric, label in (("euclidean", "Euclidean"), ("cityblock", "L1")):
        feed_stationary(residual_stream(f"stationary {label}", world, *maps[metric], metric, T, Change(), s.seed + 1))
        progress(f"stationary {label} done ({time.perf_counter() - t_start:.0f} s)")
    try:
        pool = edit_stream_pool(s.edit_corpus, s.n_landmarks)
        feed_stationary(resampled_stream("stationary edit distance", pool, T, s.seed + 2))
        progress(f"stationary edit distance done ({time.perf_counter() - t_start:.0f} s)")
    except Exception as exc:  # a Python without docstrings (-OO): say so, go on
        progress(f"edit-distance stream skipped: {exc}")
    for row in rows:
        row.fa_per_million = 1e6 * row.false_alarms / max(row.stationary_objects, 1)
        lo, hi = poisson_interval(row.false_alarms, max(row.stationary_objects, 1))
        row.fa_ci_low, row.fa_ci_high = 1e6 * lo, 1e6 * hi

    for scen, change in change_scenarios(s).items():
        firsts: list[list[int | None]] = [[] for _ in specs]
        pre = np.zeros(len(specs), dtype=np.int64)
        for r in range(s.replicates):
            stream = residual_stream(scen, world, *maps["euclidean"], "euclidean", s.change_at + s.horizon, change,
                                     s.seed + 100 + r)
            for i, sp in enumerate(specs):
                t0 = time.perf_counter()
                alarms = sp.run(stream, s)
                seconds[i] += time.perf_counter() - t0
                after = alarms[alarms >= s.change_at]
                pre[i] += int((alarms < s.change_at).sum())
                firsts[i].append(int(after[0] - s.change_at) if after.size else None)
        for i in range(len(specs)):
            rows[i].delays[scen] = _delay_summary(firsts[i], int(pre[i]))
        progress(f"{scen} done ({time.perf_counter() - t_start:.0f} s)")
    for i, row in enumerate(rows):
        row.seconds = float(seconds[i])

    sel_rows: list[SelectionRow] = []
    if selection:
        tau = s.change_at
        sc = change_scenarios(s)
        sel_rows = selection_comparison(world, s, {
            "stationary": (Change(), tau + 20_000),
            "new cluster off span": (sc["new cluster off span"], tau + 20_000),
            "slow rotation out of span": (sc["slow rotation out of span"], tau + 300_000),
            "scale x1.1": (sc["scale x1.1"], tau + 20_000),
            "new cluster in span, beyond the landmarks": (sc["new cluster in span, beyond the landmarks"],
                                                          tau + 20_000),
        }, progress)
    return {"settings": asdict(s), "detectors": [asdict(r) for r in rows], "tuning": tuning_report,
            "selection": [asdict(r) for r in sel_rows], "seconds": time.perf_counter() - t_start}


# --------------------------------------------------------------------------- tables


def _fmt_delay(d: dict) -> str:
    if d["replicates"] == d["misses"]:
        return f"— ({d['misses']}/{d['replicates']} missed)"
    text = f"{d['median']:,.0f} / {d['p90']:,.0f}"
    return text + (f" ({d['misses']} missed)" if d["misses"] else "")


def format_detector_table(report: dict) -> str:
    """Markdown: false alarms and delays per detector (from ``run_benchmark``'s report)."""
    rows = report["detectors"]
    scen = list(rows[0]["delays"]) if rows else []
    off = [k for k in scen if "in span" not in k]
    inspan = [k for k in scen if "in span" in k]
    head = ("| detector | setting | false alarms / 10⁶ stationary objects (95 % CI) | "
            + " | ".join(f"{k}: delay median / p90" for k in off)
            + "".join(f" | {k}: alarms (should be none)" for k in inspan) + " |")
    lines = [head, "|" + " --- |" * (3 + len(off) + len(inspan))]
    for r in rows:
        fa = (f"{r['fa_per_million']:.3g} [{r['fa_ci_low']:.2g}, {r['fa_ci_high']:.2g}] "
              f"({r['false_alarms']} in {r['stationary_objects']:,})")
        cells = [_fmt_delay(r["delays"][k]) for k in off]
        cells += [f"{r['delays'][k]['replicates'] - r['delays'][k]['misses']}/{r['delays'][k]['replicates']}"
                  for k in inspan]
        lines.append(f"| {r['detector']} | {r['setting']} | {fa} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_selection_table(report: dict) -> str:
    """Markdown: refit landmark selection per scenario."""
    lines = ["| scenario | selection | (a) window mean u/β before → after | (a') window mean u before → after | "
             "(b) fidelity to full CMDS (RMS / radius) | (c) old-landmark alignment RMS | (d) refit seconds | "
             "old landmarks kept |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in report["selection"]:
        lines.append(f"| {r['scenario']} | {r['selection']} | "
                     f"{r['unexplained_before']:.3f} → {r['unexplained_after']:.3f} "
                     f"| {r['energy_before']:.3f} → {r['energy_after']:.3f} "
                     f"| {r['fidelity']:.4f} | {r['alignment_rms']:.4f} | {r['seconds']:.3f} | {r['kept_old']:.0f} |")
    return "\n".join(lines)


#: Criteria of the selection ranking: (a') repair, (b) fidelity, (c) movement; lower is better for each.
RANKED = ("energy_after", "fidelity", "alignment_rms")


def selection_ranking(report: dict) -> list[tuple[str, float]]:
    """Mean rank of each selection over scenarios and the criteria ``RANKED``, best first.

    (a') is the window's mean unexplained energy u rather than u/β: β is
    measured from the landmarks' centroid, so u/β changes with any new
    landmark set even where the map's plane does not (see the stationary
    rows). Values equal to two significant digits tie. (d) seconds is
    reported, not ranked: every strategy refits within a second here.
    """
    from scipy.stats import rankdata

    rows = report["selection"]
    scores: dict[str, list[float]] = {}
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        group = [r for r in rows if r["scenario"] == scen]
        for key in RANKED:
            vals = np.array([float(f"{g[key]:.2g}") for g in group])
            for g, rk in zip(group, rankdata(vals), strict=False):
                scores.setdefault(g["selection"], []).append(float(rk))
    return sorted(((k, float(np.mean(v))) for k, v in scores.items()), key=lambda kv: kv[1])


def format_report(report: dict) -> str:
    s = report["settings"]
    out = [f"### Drift detectors (stationary streams of {s['stationary_objects']:,} objects × 3; "
           f"{s['replicates']} replicates per change at object {s['change_at']:,}, horizon {s['horizon']:,}; "
           f"baseline {s['baseline']:,}; b = {s['group_objects']}, min_shift = {s['min_shift']})", "",
           format_detector_table(report), ""]
    if report.get("tuning"):
        out.append("Peer tuning (false alarms on a stationary tuning stream, most sensitive first): " + "; ".join(
            f"{k} {v['parameter']}: {v['false_alarms_on_tuning']} → {v['tuned']}" for k, v in report["tuning"].items()))
        out.append("")
    if report.get("selection"):
        out += ["### Refit landmark selection", "", format_selection_table(report), "",
                "Mean rank over scenarios and criteria (a'), (b), (c), lower is better: "
                + ", ".join(f"{k} {v:.2f}" for k, v in selection_ranking(report)), ""]
    out.append(f"Total {report['seconds']:.0f} s.")
    return "\n".join(out)


#: ``evaluate --drift --drift-quick``: sizes for a smoke test (seconds, not minutes; claims need the defaults).
QUICK = dict(stationary_objects=150_000, replicates=2, change_at=40_000, horizon=30_000, edit_corpus=120,
             selection_window=600, reservoir=400, selection_replicates=1, mmd_bootstrap=30)


def main(*, objects: int | None = None, replicates: int | None = None, horizon: int | None = None,
         json_path: str | None = None, figure: str | None = None, peers: bool = True, seed: int = 0,
         quick: bool = False) -> int:
    """Run the benchmark and print its tables (the ``evaluate --drift`` entry); returns the exit code."""
    import sys

    kw: dict[str, Any] = {**(QUICK if quick else {}), "peers": peers, "seed": seed}
    for key, value in (("stationary_objects", objects), ("replicates", replicates), ("horizon", horizon)):
        if value is not None:
            kw[key] = value
    s = BenchSettings(**{**asdict(BenchSettings()), **kw})
    if s.stationary_objects <= s.baseline or s.horizon < s.group_objects or s.replicates < 1:
        print(f"python -m benchmarks drift: need more than {s.baseline} stationary objects, a horizon of at least "
              f"{s.group_objects} objects and one replicate", file=sys.stderr)
        return 2
    report = run_benchmark(s, progress=lambda msg: print(f"[drift] {msg}", file=sys.stderr, flush=True))
    print(format_report(report), flush=True)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(_clean(report), fh, indent=1)
    if figure:
        from streamembed.plots import plot_drift_benchmark

        print(plot_drift_benchmark(_clean(report), figure))
    return 0


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# --------------------------------------------------------------------------- a daemon-like history


def demo_history(root: Any, objects: int = 600_000, change_at: int = 250_000, batch: int = 1024,
                 rate: float = 20_000.0, seed: int = 0, start_unix: float = 1_795_000_000.0,
                 reservoir: int = 2000) -> tuple[Any, Any]:
    """Write ``drift-history.jsonl`` and ``model-history.jsonl`` into ``root`` as the daemon would.

    A Euclidean mixture stream (``rate`` objects/s of simulated time from
    ``start_unix``) gains a cluster off the map at ``change_at``; the
    calibrated CUSUM (``core.monitor.trigger.SequentialTrigger``) watches the
    unexplained energy; when it fires, the next ``reservoir`` objects are
    collected (so the candidates show the stream after the change, not
    before it: a fast alarm leaves few changed objects in a reservoir filled
    before it), then a refit with the default selection runs and is installed
    at once. The window statistics are recorded every 10 batches. The files follow the format
    ``streamembed.plots`` reads (its package docstring); the numbers are real, the clock is simulated.
    """
    from pathlib import Path

    from streamembed.core.monitor.trigger import SequentialTrigger

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    world = MixtureWorld(seed=seed)
    est, L = fit_map(world, 100, "euclidean", seed)
    change = Change("new_cluster", change_at, 4.0, 0.2)
    trig = SequentialTrigger(CusumDetector(1e8), baseline_objects=20_000, cooldown_seconds=0.0,
                             fallback=RefitTrigger())
    rng = np.random.default_rng([seed, 9])
    window = DriftWindow(np.ones(2), 2, L.shape[0], max_objects=50_000)
    recent: list[np.ndarray] = []
    drift_lines, model_lines = [], []
    fired_since = False
    refit_at: int | None = None
    reason = ""

    def stamp(unix: float) -> str:
        import datetime as dt

        return dt.datetime.fromtimestamp(unix, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    for i, start in enumerate(range(0, objects, batch)):
        now = start_unix + (start + batch) / rate
        X = world.draw(rng, start, batch, change)
        res = est.place(_distances(X, est.features, "euclidean"), method="projection")
        window.add(now, res.relative_unexplained)
        recent = (recent + [X])[-(reservoir // batch + 1):]
        d = trig.observe(now, None, batch, values=res.unexplained)
        fired_since |= d.fire
        if d.fire and refit_at is None:
            refit_at, reason = start + batch + reservoir, d.reason
        if (i + 1) % 10 == 0 or d.fire:
            st = window.statistics(now)
            drift_lines.append({"time": stamp(now), "unix": now, "model_version": int(est.version),
                                "objects_seen": start + batch, "window": st.as_dict(),
                                "detector": {"kind": trig.kind, "statistic": float(d.value),
                                             "threshold": float(d.threshold),
                                             "expected_run_objects": trig.expected_run_objects,
                                             "fired": bool(fired_since)}})
            fired_since = False
        if refit_at is not None and start + batch >= refit_at:
            refit_at = None
            feats = np.vstack(recent)[-reservoir:]
            cs = candidate_dissimilarities(est.landmark_ids, [f"o{start}-{k}" for k in range(feats.shape[0])],
                                           old_features=est.features, features=feats)
            r = refit(est, cs.D, cs.ids, features=cs.features)
            est = r.model
            model_lines.append({"time": stamp(now + 1.0)[:19] + "Z", "trigger": "auto", "reason": reason,
                                "status": "installed", "model_version": int(est.version),
                                "previous_version": int(est.version) - 1, "alignment_rms": r.alignment_rms,
                                "triggered_after_objects": start + batch})
            trig.refitted(now + 1.0)
            window.clear()
    drift_path, model_path = root / "drift-history.jsonl", root / "model-history.jsonl"
    drift_path.write_text("".join(json.dumps(_clean(x)) + "\n" for x in drift_lines))
    model_path.write_text("".join(json.dumps(_clean(x)) + "\n" for x in model_lines))
    return drift_path, model_path
