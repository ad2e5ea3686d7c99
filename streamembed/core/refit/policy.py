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
All choose by ``core.refit.landmarks.select_landmarks("max-variance")`` scored on
F. Then:

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
input pipeline transforms them, e.g. Isomap, is scored approximately), so it
costs one eigendecomposition of n landmarks per candidate, no model fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..fit.cmds import top_spectrum
from ..fit.eigen import top_eigenpairs
from ..inputs.dissimilarities import Dissimilarities
from ..place.projection import ProjectionKernel
from ..runtime import single_blas_thread
from .landmarks import select_landmarks
from .procrustes import orthogonal_procrustes_align
from .strategies import least_supported

__all__ = ["REPAIR_FRACTIONS", "DEFAULT_MIN_GAIN", "MIN_RECENT", "RefitPlan",
           "best_plane", "plan_refit", "assess"]

#: Shares of the old landmarks a repair candidate replaces.
REPAIR_FRACTIONS = (0.25, 0.5)
#: Net gain (relative gain of captured variance less movement) below which the map is kept.
DEFAULT_MIN_GAIN = 0.05
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
    """Scores landmark sets on the evaluation objects E (module docstring)."""

    def __init__(self, dis: Dissimilarities, E: np.ndarray, n_old: int, old_embedding: np.ndarray, d: int):
        self.dis, self.E, self.n_old, self.d = dis, E, n_old, d
        self.old_embedding = np.asarray(old_embedding, dtype=np.float64)
        centred = self.old_embedding - self.old_embedding.mean(axis=0)
        self.old_radius = float(np.sqrt(np.square(centred).sum(axis=1).mean()))

    def place(self, L: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
        """Projections (len(rows), d) of ``rows`` on the classical MDS map of landmarks L; None if it has < d axes.

        Only the map's top d eigenpairs are computed (``cmds.top_spectrum``).
        """
        sp = top_spectrum(self.dis.block(L, L), self.d)
        if sp is None:
            return None
        Z, _ = ProjectionKernel(sp, self.d, np.dtype(np.float64), n_threads=1)(
            np.ascontiguousarray(self.dis.block(rows, L)))
        return Z

    def score(self, L: np.ndarray) -> tuple[float, float, float]:
        """(captured variance of E, mean unexplained energy of E, movement of the old landmarks) for set L."""
        Z = self.place(L, np.concatenate([self.E, np.arange(self.n_old)]))
        if Z is None:
            return -np.inf, np.inf, np.inf
        d, m = self.d, self.E.size
        Y, beta = Z[:m, :d], Z[:m, d]
        captured = float(np.square(Y - Y.mean(axis=0)).sum(axis=1).mean())
        unexplained = float(np.mean(beta - np.square(Y).sum(axis=1)))
        _, _, rms = orthogonal_procrustes_align(Z[m:, :d], self.old_embedding)
        return captured, unexplained, rms / self.old_radius if self.old_radius > 0 else 0.0


def best_plane(D_E: np.ndarray, d: int) -> tuple[float, float]:
    """(captured variance, mean unexplained energy) of the best d-plane for objects with dissimilarities D_E (m, m).

    The classical MDS of E itself: its top d positive eigenvalues / m are the
    most variance any d-dimensional map holds of E (docs/math.md §1); the
    rest of E's variance about its own centroid (the trace of its centred
    kernel / m) is the least unexplained energy such a map leaves per object.
    """
    D2 = np.square(np.asarray(D_E, dtype=np.float64))
    m = D2.shape[0]
    r = D2.mean(axis=1)
    K = -0.5 * (D2 - r[:, None] - r[None, :] + r.mean())
    w, _ = top_eigenpairs(K, min(d, m))
    top = float(np.maximum(w, 0.0).sum()) / m
    return top, float(np.trace(K)) / m - top


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
    """The current map's and the best d-plane's figures on E."""
    cap0, u0, _ = scorer.score(np.arange(scorer.n_old))
    cap_best, u_best = best_plane(D[np.ix_(E, E)], d)
    return {"recent_objects": int(D.shape[0] - scorer.n_old), "evaluated_on": int(E.size), "captured_before": cap0,
            "captured_best": cap_best, "unexplained_before": u0, "unexplained_best": u_best}


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
    scorer = _Scorer(Dissimilarities(D), E, n_old, old_embedding, int(n_components))
    out = _baseline(scorer, D, E, int(n_components))
    cap1, u1, movement = scorer.score(np.asarray(landmarks, dtype=np.int64))
    return {**out, "captured_after": cap1, "unexplained_after": u1, "movement": movement}


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
    scorer = _Scorer(Dissimilarities(D), E, n_old, old_embedding, d)
    old = np.arange(n_old)
    details = _baseline(scorer, D, E, d)
    cap0, cap_best = details["captured_before"], details["captured_best"]
    details["candidates"] = {}
    if not np.isfinite(cap0) or cap_best <= 0:
        return RefitPlan("keep", "the recent objects hold no variance the map could show (all identical, or "
                                 "no positive eigenvalue)", details=details)
    options: dict[str, np.ndarray] = {}
    for fraction in REPAIR_FRACTIONS:
        n_drop = min(n_old, max(1, int(round(fraction * n_old))))
        drop = least_supported(D[np.ix_(old, F)], n_drop)
        kept = np.setdiff1d(old, drop)
        pool = np.concatenate([kept, F])
        if pool.size < n_select:
            continue
        sel = select_landmarks("max-variance", n_select, D=D[np.ix_(pool, pool)], seed=rng, n_components=d,
                               required=np.arange(min(kept.size, n_select)), population=np.arange(kept.size, pool.size))
        options[f"repair-{round(100 * fraction)}%"] = np.sort(pool[sel])
    for name, pool in (("redraw", np.concatenate([old, F])), ("recent", F)):
        k = n_old if name == "redraw" else 0
        sel = select_landmarks("max-variance", min(n_select, pool.size), D=D[np.ix_(pool, pool)], seed=rng,
                               n_components=d, population=np.arange(k, pool.size))
        options[name] = np.sort(pool[sel])
    scores = {name: scorer.score(L) for name, L in options.items()}
    details["candidates"] = {name: {"captured": c, "unexplained": u, "movement": mv,
                                    "kept_old": int((options[name] < n_old).sum())}
                             for name, (c, u, mv) in scores.items()}
    net = {name: ((c - cap0) / cap0 if cap0 > 0 else np.inf) - mv * mv for name, (c, _, mv) in scores.items()}
    name = max(net, key=lambda k: net[k])
    cap1, u1, movement = scores[name]
    gain = (cap1 - cap0) / cap0 if cap0 > 0 else np.inf
    details.update(gain=gain, net_gain=net[name], best_candidate=name)
    if not (np.isfinite(net[name]) and net[name] >= min_gain):
        return RefitPlan("keep", f"no candidate map gains {100 * min_gain:.0f}% more of the recent objects' "
                                 f"variance than its movement of the old landmarks costs (best: {name}, gain "
                                 f"{100 * gain:+.1f}%, movement {movement:.2f} of the map radius, cost "
                                 f"{100 * movement ** 2:.1f}%; the current map holds {100 * cap0 / cap_best:.0f}% "
                                 f"of what any {d}-dimensional map could)",
                         details=details)
    details.update(captured_after=cap1, unexplained_after=u1, movement=movement)
    return RefitPlan("install", f"{name}: the map holds {100 * gain:+.0f}% more of the recent objects' variance "
                                f"({100 * cap0 / cap_best:.0f}% → {100 * cap1 / cap_best:.0f}% of the best "
                                f"{d}-dimensional map); old landmarks move {movement:.2f} of the map radius",
                     landmarks=options[name], candidate=name, details=details)
