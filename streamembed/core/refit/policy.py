"""Deciding what a refit changes: keep the map, repair it, or redraw it (docs/math.md §7.5).

A refit is worth installing only if the new map places the *current*
traffic better than the map in service. The recent objects of the reservoir
are split at random into a fitting half F and an evaluation half E; every
candidate map is scored on E, which none of them was chosen from:

* **captured variance** of E: the mean squared distance of E's projections
  to their centroid. Projections are orthogonal in the kernel's feature
  space, so this is the part of E's variance that the map's d-plane holds;
  the best d-plane for E (its own classical MDS) holds the most
  (``best_plane``), and a map whose plane has turned away from the traffic
  holds less.
* **movement** of the old landmarks: the RMS distance between their old
  positions and their placements on the candidate map after the Procrustes
  alignment every refit makes (docs/math.md §5), as a share of the old
  map's RMS radius.

Candidates: *repairs* keep the old landmarks that the recent objects still
visit and replace the least visited ``fraction`` of them by picks among F
(``REPAIR_FRACTIONS``), a *redraw* chooses all landmarks among old ∪ F, and
*recent* chooses them all among F (traffic that left the old map entirely).
Each chooses as ``core.refit.landmarks.select_landmarks("max-variance")`` does:
among ``DEFAULT_CANDIDATES`` random sets of its pool, the one whose map
captures the most variance of F. Then:

each candidate's *net gain* is its relative gain of captured variance over
the current map less its squared movement (both are shares of a variance:
old landmarks displaced by an RMS of m map radii carry m² of the map's
variance in displacement). The candidate with the largest net gain is
installed if that is at least ``min_gain``; otherwise the map is **kept**
and nothing is installed. A stationary stream, a scale change, a shift
within the map's plane, or traffic whose extra dimensions no d-dimensional
map can hold gain little; a candidate that gains a little by moving the map
much (a redraw of a stationary stream) does not pass either. Traffic that
left the map's plane (new classes off its span, a rotation) gains several
times its movement.

Scoring uses the classical MDS of the raw dissimilarities (a model whose
input pipeline transforms them, e.g. Isomap, is scored approximately): the
top d eigenpairs of n landmarks per candidate set, no model fit, each
computed once (``_Scorer``). Only the leading option is chosen among several
sets: every option is first scored on E with its first set (the first that
max-variance draws), and the one with the largest net gain then draws
``LEADING_CANDIDATES`` − 1 more and keeps the best on F, which is scored on E
again and compared with the others' first sets. That is 4 + 3 candidate
maps where choosing every option among 8 sets took 32, for the same
decisions and map quality on the streams of ``benchmarks/refit_policies.py``
(docs/refits.md), and it keeps a refit within 1.5× the cost of selecting and
fitting a fresh map of the same candidates (docs/performance.md).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..fit.cmds import top_spectrum
from ..monitor.captured import best_captured_variance, captured_share, captured_variance, centred_kernel
from ..place.projection import ProjectionKernel
from ..runtime import single_blas_thread
from ..fit.cmds import LandmarkSpectrum
from .landmarks import DEFAULT_CANDIDATES, SCORE_SAMPLE, select_landmarks
from .procrustes import orthogonal_procrustes_align
from .strategies import least_supported, random_select

__all__ = ["REPAIR_FRACTIONS", "DEFAULT_MIN_GAIN", "MIN_RECENT", "RefitPlan",
           "best_plane", "captured_share_of", "plan_refit", "assess"]

#: Shares of the old landmarks a repair candidate replaces.
REPAIR_FRACTIONS = (0.25, 0.5)
#: Net gain (relative gain of captured variance less movement) below which the map is kept.
DEFAULT_MIN_GAIN = 0.05
#: Candidate sets the leading option chooses among (the first of them already scored); the others are scored with
#: their first set only (module docstring). Measured (docs/refits.md): the same decisions and map quality as
#: choosing every option among 8 sets; 4 keeps a refit within 1.5× selecting and fitting a fresh map at 100 landmarks.
LEADING_CANDIDATES = DEFAULT_CANDIDATES // 2
#: Fewest recent objects a refit decides on (both halves need some).
MIN_RECENT = 20


@dataclass
class RefitPlan:
    """What a refit should do, and the figures it decided on.

    Attributes:
        action: "install" or "keep".
        reason: one sentence an operator reads in the log.
        landmarks: sorted candidate indices of the new landmark set (None when kept).
        candidate: "repair-25%", "repair-50%", "redraw", "recent" or None.
        details: captured variance of E by the current map and the chosen candidate
            (``captured_before``, ``captured_after``), the best any d-plane reaches on E
            (``captured_best``), their mean unexplained energy per object (``unexplained_before``,
            ``unexplained_after``, ``unexplained_best``, squared-distance units), ``movement``
            (share of the old map's radius), ``gain``, ``net_gain`` and every candidate's scores.
    """

    action: str
    reason: str
    landmarks: np.ndarray | None = None
    candidate: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


class _Scorer:
    """Scores landmark sets on the recent objects (module docstring); one top-d spectrum per set, computed once."""

    def __init__(self, D: np.ndarray, E: np.ndarray, n_old: int, old_embedding: np.ndarray, d: int):
        self.D, self.E, self.n_old, self.d = D, E, n_old, d
        self.old_embedding = np.asarray(old_embedding, dtype=np.float64)
        centred = self.old_embedding - self.old_embedding.mean(axis=0)
        self.old_radius = float(np.sqrt(np.square(centred).sum(axis=1).mean()))
        self._spectra: dict[bytes, LandmarkSpectrum | None] = {}

    def spectrum(self, L: np.ndarray, block: np.ndarray | None = None) -> LandmarkSpectrum | None:
        """The top-d spectrum of the classical MDS of landmarks L (sorted indices), or None if it has < d axes
        (``block``: their dissimilarities, if the caller has them)."""
        key = L.tobytes()
        if key not in self._spectra:
            self._spectra[key] = top_spectrum(self.D[np.ix_(L, L)] if block is None else block, self.d)
        return self._spectra[key]

    def place(self, L: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
        """Projections (len(rows), d + 1: coordinates, β) of ``rows`` on the map of landmarks L (None: < d axes)."""
        sp = self.spectrum(L)
        if sp is None:
            return None
        Z, _ = ProjectionKernel(sp, self.d, np.dtype(np.float64), n_threads=1)(
            np.ascontiguousarray(self.D[np.ix_(rows, L)]))
        return Z

    def captured(self, L: np.ndarray, rows: np.ndarray) -> float:
        """Captured variance of ``rows`` on the map of L (``strategies.captured_variance``): −inf if it has < d axes."""
        if L.size <= self.d:
            return -np.inf
        Z = self.place(L, rows)
        if Z is None:
            return -np.inf
        return captured_variance(Z[:, : self.d])

    def score(self, L: np.ndarray) -> tuple[float, float, float]:
        """(captured variance of E, mean unexplained energy of E, movement of the old landmarks) for set L."""
        Z = self.place(L, np.concatenate([self.E, np.arange(self.n_old)]))
        if Z is None:
            return -np.inf, np.inf, np.inf
        d, m = self.d, self.E.size
        Y, beta = Z[:m, :d], Z[:m, d]
        captured = captured_variance(Y)
        unexplained = float(np.mean(beta - np.square(Y).sum(axis=1)))
        _, _, rms = orthogonal_procrustes_align(Z[m:, :d], self.old_embedding)
        return captured, unexplained, rms / self.old_radius if self.old_radius > 0 else 0.0


def best_plane(D_E: np.ndarray, d: int) -> tuple[float, float]:
    """(captured variance, mean unexplained energy) of the best d-plane for objects with dissimilarities D_E (m, m).

    The classical MDS of E itself: its top d positive eigenvalues / m are the
    most variance any d-dimensional map holds of E (docs/math.md §1,
    ``core.monitor.captured.best_captured_variance``, the measure the in-map
    drift statistic shares); the rest of E's variance about its own centroid
    (the trace of its centred kernel / m) is the least unexplained energy such
    a map leaves per object.
    """
    K = centred_kernel(D_E)
    top = best_captured_variance(d, K=K)
    return top, float(np.trace(K)) / K.shape[0] - top


def captured_share_of(scorer: _Scorer, L: np.ndarray, D_E: np.ndarray) -> float:
    """The share of the best d-plane's variance of E that the map of landmarks L holds (``captured_share``, the
    in-map drift statistic's measure, docs/math.md §7.7): NaN when it cannot be measured."""
    Z = scorer.place(L, scorer.E)
    if Z is None:
        return float("nan")
    return captured_share(Z[:, : scorer.d], scorer.d, K=centred_kernel(D_E))


def _split(recent: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(F, E): the recent objects split at random into a fitting half and an evaluation half.

    At random, not by age: both halves then come from the same traffic, so a
    candidate's score on E is an honest estimate of how it places that
    traffic (an age split favours the candidates drawn from the older half
    less and measured more noisily; measured: no better on gradual drift).
    """
    shuffled = rng.permutation(recent)
    return np.sort(shuffled[: shuffled.size // 2]), np.sort(shuffled[shuffled.size // 2:])


def _baseline(scorer: _Scorer, D: np.ndarray, E: np.ndarray, d: int) -> dict[str, Any]:
    """The current map's and the best d-plane's figures on E (``captured_share``: the map's share of the best)."""
    cap0, u0, _ = scorer.score(np.arange(scorer.n_old))
    D_E = D[np.ix_(E, E)]
    cap_best, u_best = best_plane(D_E, d)
    return {"recent_objects": int(D.shape[0] - scorer.n_old), "evaluated_on": int(E.size), "captured_before": cap0,
            "captured_best": cap_best, "unexplained_before": u0, "unexplained_best": u_best,
            "captured_share_before": captured_share_of(scorer, np.arange(scorer.n_old), D_E)}


def assess(D: np.ndarray, n_old: int, landmarks: np.ndarray, old_embedding: np.ndarray, n_components: int,
           seed: int = 0) -> dict[str, Any]:
    """The figures of ``plan_refit`` for a landmark set chosen otherwise (any ``refit.selection``).

    On the same evaluation half of the recent objects as ``plan_refit`` with
    this seed: captured variance and mean unexplained energy before and after,
    the best any d-plane reaches, and the old landmarks' movement. Empty when
    there are fewer than ``MIN_RECENT`` recent objects.
    """
    D = np.asarray(D, dtype=np.float64)
    recent = np.arange(n_old, D.shape[0])
    if recent.size < MIN_RECENT:
        return {}
    _, E = _split(recent, np.random.default_rng(seed))
    scorer = _Scorer(D, E, n_old, old_embedding, int(n_components))
    out = _baseline(scorer, D, E, int(n_components))
    cap1, u1, movement = scorer.score(np.asarray(landmarks, dtype=np.int64))
    share1 = cap1 / out["captured_best"] if out["captured_best"] > 0 else float("nan")
    return {**out, "captured_after": cap1, "unexplained_after": u1, "movement": movement,
            "captured_share_after": share1}


def plan_refit(
    D: np.ndarray,
    n_old: int,
    n_select: int,
    old_embedding: np.ndarray,
    n_components: int,
    seed: int = 0,
    min_gain: float = DEFAULT_MIN_GAIN,
) -> RefitPlan:
    """Keep, repair or redraw the landmarks (module docstring).

    Args:
        D: (N, N) dissimilarities of the candidates: the n_old old landmarks
            first (in model order), then the reservoir's recent objects.
        n_old: old landmarks among the candidates.
        n_select: landmarks of the new map.
        old_embedding: (n_old, d) the old landmarks' positions on the map in service.
        n_components: d.
        seed: the split of the reservoir and the random choices.
        min_gain: net gain below which the map is kept.
    Raises:
        InputError: shapes that do not fit.
    """
    with single_blas_thread():  # dozens of small eigenproblems: BLAS threads would only contend (core.runtime)
        return _plan(np.asarray(D, dtype=np.float64), n_old, n_select, old_embedding, int(n_components), seed, min_gain)


def _option_pools(D: np.ndarray, old: np.ndarray, F: np.ndarray, n_select: int) -> dict[str, np.ndarray]:
    """The candidates each option chooses among (module docstring), in order: old landmarks kept first."""
    pools: dict[str, np.ndarray] = {}
    for fraction in REPAIR_FRACTIONS:
        n_drop = min(old.size, max(1, int(round(fraction * old.size))))
        kept = np.setdiff1d(old, least_supported(D[np.ix_(old, F)], n_drop))
        if kept.size + F.size >= n_select:
            pools[f"repair-{round(100 * fraction)}%"] = np.concatenate([kept, F])
    pools["redraw"] = np.concatenate([old, F])
    pools["recent"] = F
    return pools


class _Option:
    """A candidate map's landmarks (module docstring): its pool and generators, one candidate set per generator.

    Set i is the i-th set ``select_landmarks("max-variance")`` draws among the pool (random, a repair's old
    landmarks kept) with the i-th generator: the same draw, taken here without copying the pool's
    dissimilarities; a draw with two objects at dissimilarity 0 is redone by ``select_landmarks`` itself (it
    replaces duplicates).
    """

    def __init__(self, name: str, pool: np.ndarray, n_old: int, n_select: int, d: int,
                 kids: list[np.random.Generator]):
        self.name, self.pool, self.kids, self.d = name, pool, kids, d
        self.n = min(n_select, pool.size)
        self.n_kept = int((pool < n_old).sum()) if name.startswith("repair") else 0
        self.first_scored = n_old if name == "redraw" else self.n_kept

    def draw(self, i: int, scorer: _Scorer) -> np.ndarray:
        """Sorted candidate indices of set i (its spectrum handed to ``scorer``)."""
        r = copy.deepcopy(self.kids[i])  # a duplicate found later redraws from the same state
        picks = random_select(self.n, self.pool.size, r)
        if self.n_kept:
            req = np.arange(min(self.n_kept, self.n))
            picks = np.concatenate([req, np.setdiff1d(picks, req)])[: self.n]
        L = np.sort(self.pool[picks])
        block = scorer.D[np.ix_(L, L)]
        if L.size > 1 and (block[np.triu_indices(L.size, k=1)] <= 0.0).any():
            D_pool = scorer.D[np.ix_(self.pool, self.pool)]
            sel = select_landmarks("max-variance", self.n, D=D_pool, seed=self.kids[i], n_components=self.d,
                                   candidates=1, required=np.arange(min(self.n_kept, self.n)) if self.n_kept else None,
                                   population=np.arange(self.first_scored, self.pool.size))
            L = np.sort(self.pool[sel])
            block = scorer.D[np.ix_(L, L)]
        scorer.spectrum(L, block)
        return L


def _plan(D: np.ndarray, n_old: int, n_select: int, old_embedding: np.ndarray, d: int, seed: int,
          min_gain: float) -> RefitPlan:
    """The body of ``plan_refit``."""
    N = D.shape[0]
    if D.shape != (N, N) or not 0 < n_old <= N or not 1 <= n_select <= N:
        raise InputError(f"plan_refit needs D (N, N) with 0 < n_old ≤ N and 1 ≤ n_select ≤ N, got {D.shape}, "
                         f"n_old={n_old}, n_select={n_select}")
    recent = np.arange(n_old, N)
    if recent.size < MIN_RECENT:
        return RefitPlan("keep", f"only {recent.size} recent objects among the candidates (a refit decides on "
                                 f"at least {MIN_RECENT})")
    rng = np.random.default_rng(seed)
    F, E = _split(recent, rng)
    scorer = _Scorer(D, E, n_old, old_embedding, d)
    old = np.arange(n_old)
    details = _baseline(scorer, D, E, d)
    cap0, cap_best = details["captured_before"], details["captured_best"]
    details["candidates"] = {}
    if not np.isfinite(cap0) or cap_best <= 0:
        return RefitPlan("keep", "the recent objects hold no variance the map could show (all identical, or "
                                 "no positive eigenvalue)", details=details)
    pools = _option_pools(D, old, F, n_select)
    sample = F if F.size <= SCORE_SAMPLE else F[np.unique(np.linspace(0, F.size - 1, SCORE_SAMPLE).round()).astype(
        np.int64)]
    # every option's candidate sets, drawn as select_landmarks("max-variance") draws them (one generator each)
    draws = {name: _Option(name, pool, n_old, n_select, d, rng.spawn(DEFAULT_CANDIDATES))
             for name, pool in pools.items()}
    options = {name: option.draw(0, scorer) for name, option in draws.items()}
    scores = {name: scorer.score(L) for name, L in options.items()}
    net = {name: ((c - cap0) / cap0 if cap0 > 0 else np.inf) - mv * mv for name, (c, _, mv) in scores.items()}
    name = max(net, key=lambda k: net[k])
    # the leading option's landmarks: the one of its candidate sets whose map captures most of F
    sets = [options[name]] + [draws[name].draw(i, scorer) for i in range(1, LEADING_CANDIDATES)]
    options[name] = sets[int(np.argmax([scorer.captured(L, sample) for L in sets]))]
    scores[name] = scorer.score(options[name])
    details["candidates"] = {k: {"captured": c, "unexplained": u, "movement": mv,
                                 "kept_old": int((options[k] < n_old).sum())}
                             for k, (c, u, mv) in scores.items()}
    details["candidate_sets_scored"] = len(options) - 1 + len(sets)
    net[name] = ((scores[name][0] - cap0) / cap0 if cap0 > 0 else np.inf) - scores[name][2] ** 2
    name = max(net, key=lambda k: net[k])
    cap1, u1, movement = scores[name]
    gain = (cap1 - cap0) / cap0 if cap0 > 0 else np.inf
    details.update(gain=gain, net_gain=net[name], best_candidate=name)
    share0 = details["captured_share_before"]
    if not (np.isfinite(net[name]) and net[name] >= min_gain):
        return RefitPlan("keep", f"no candidate map gains {100 * min_gain:.0f}% more of the recent objects' "
                                 f"variance than its movement of the old landmarks costs (best: {name}, gain "
                                 f"{100 * gain:+.1f}%, movement {movement:.2f} of the map radius, cost "
                                 f"{100 * movement ** 2:.1f}%; the current map holds {100 * share0:.0f}% "
                                 f"of what any {d}-dimensional map could)",
                         details=details)
    details.update(captured_after=cap1, unexplained_after=u1, movement=movement, captured_share_after=cap1 / cap_best)
    return RefitPlan("install", f"{name}: the map holds {100 * gain:+.0f}% more of the recent objects' variance "
                                f"({100 * share0:.0f}% → {100 * cap1 / cap_best:.0f}% of the best "
                                f"{d}-dimensional map); old landmarks move {movement:.2f} of the map radius",
                     landmarks=options[name], candidate=name, details=details)
