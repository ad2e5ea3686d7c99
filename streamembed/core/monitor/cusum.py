"""The arithmetic of a one-sided CUSUM and its calibration (docs/math.md §7): paths and alarms, Siegmund's
average run length and its threshold, the adjustment coefficient θ*, the integrated autocorrelation time φ, the
clipping bounds and the quantiles the detector needs (no scipy.stats: it costs 0.5 s to import mid-stream).

Pure functions of arrays and numbers; ``core.monitor.detector`` builds the detector from them.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from .quantiles import chi2_lower_quantile


def normal_quantile(p: float) -> float:
    """Φ⁻¹(p) of the standard normal: the standard library's (Wichura's AS 241, within 1e-15 of scipy's ndtri).

    The daemon checks its drift settings with it at start; importing
    scipy.special for it cost 0.2-0.7 CPU-s of every ``streamembed run``.
    """
    return statistics.NormalDist().inv_cdf(p)


#: Siegmund's correction for the overshoot of a Gaussian random walk over the
#: threshold, h → h + 2·0.583 (in increment standard deviations).
OVERSHOOT = 1.166


class CalibrationError(ValueError):
    """The detector cannot be calibrated; ``setting`` names the configuration key to change."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


def cusum_path(z: np.ndarray, start: float = 0.0) -> np.ndarray:
    """S_j = max(0, S_{j-1} + z_j) for all j at once: (G,) from increments z (G,) and S_0 = start ≥ 0.

    With partial sums P_j = z_1 + … + z_j, S_j = P_j − min(−S_0, min_{i≤j} P_i):
    one cumulative sum and one running minimum, no Python loop.
    """
    P = np.cumsum(np.asarray(z, dtype=np.float64))
    low = np.minimum.accumulate(np.concatenate(([-float(start)], P)))[1:]
    return P - low


def cusum_alarms(z: np.ndarray, h: float, start: float = 0.0) -> tuple[np.ndarray, float, float]:
    """Alarm positions of a CUSUM that restarts at 0 after each alarm.

    Args:
        z: (G,) increments x_j − k.
        h: threshold.
        start: S before z_1.
    Returns:
        (alarm indices into z (a,), S after the last increment, largest S reached).
        Vectorised over windows that double while no alarm falls in them and
        halve after one, so the cost stays O(G) whether alarms are rare or
        every few increments.
    """
    z = np.asarray(z, dtype=np.float64)
    alarms: list[int] = []
    peak = float(start)
    pos, s, width = 0, float(start), 1024
    while pos < z.size:
        end = min(z.size, pos + width)
        S = cusum_path(z[pos:end], s)
        over = np.flatnonzero(h < S)
        if over.size == 0:
            peak = max(peak, float(S.max()))
            pos, s, width = end, float(S[-1]), 2 * width
            continue
        j = pos + int(over[0])
        peak = max(peak, float(S[: over[0] + 1].max()))
        alarms.append(j)
        pos, s, width = j + 1, 0.0, max(64, width // 2)
    return np.asarray(alarms, dtype=np.int64), s, peak


def siegmund_arl(h: float, theta: float, drift: float, overshoot: float = OVERSHOOT) -> float:
    """Average run length (in increments) of a CUSUM whose increments have mean −drift < 0.

    Siegmund (1985): ARL ≈ (e^{θ(h+ρ)} − 1 − θ(h+ρ)) / (θ·drift), θ the positive root
    of the increments' cumulant generating function, ρ the overshoot correction.
    For N(−k, 1) increments θ = 2k and this is the familiar (e^{2k(h+1.166)} − 2k(h+1.166) − 1)/(2k²).
    """
    u = theta * (h + overshoot)
    return float(math.expm1(u) - u) / (theta * drift) if u < 700 else math.inf


def siegmund_threshold(arl: float, theta: float, drift: float, overshoot: float = OVERSHOOT) -> float:
    """The h with ``siegmund_arl(h, θ, drift) = arl`` (h ≥ 0; 0 when even h = 0 exceeds ``arl``)."""
    c = arl * theta * drift + 1.0  # solve e^u − u = c for u > 0
    u = math.log(c) if c > 1 else 0.0
    for _ in range(60):
        nxt = math.log(c + u)
        if abs(nxt - u) < 1e-13 * max(1.0, u):
            u = nxt
            break
        u = nxt
    return max(u / theta - overshoot, 0.0)


def _cgf_and_slope(y: np.ndarray, t: float) -> tuple[float, float]:
    """(K_y(t), K_y'(t)) of the empirical CGF K_y(t) = log mean exp(t·y) of values y (N,), from one exponential pass."""
    ty = t * y
    m = float(ty.max())
    w = np.exp(ty - m)
    total = float(w.sum())
    return m + math.log(total / y.size), float(w @ y) / total


def adjustment_coefficient(y: np.ndarray, b_eff: float, scale: float, drift: float) -> float:
    """θ* > 0 with ψ(θ) = −θ·drift + b_eff·K_y(θ·scale/√b_eff) = 0 (K_y the empirical CGF of y).

    The increments are scale·ξ − drift with ξ a standardised mean of b_eff
    independent copies of y (mean 0, variance 1): K_ξ(θ) = b_eff·K_y(θ/√b_eff).
    ψ is convex with ψ(0) = 0 and ψ'(0) = −drift < 0, so Newton's method
    started where ψ > 0 descends monotonically to the root (a handful of
    passes over y).
    """
    c = scale / math.sqrt(b_eff)

    def psi(theta: float) -> tuple[float, float]:
        k, slope = _cgf_and_slope(y, theta * c)
        return -theta * drift + b_eff * k, -drift + b_eff * c * slope

    theta = 2.0 * drift / scale**2  # the Gaussian root
    for _ in range(200):
        if psi(theta)[0] > 0:
            break
        theta *= 2.0
    else:  # pragma: no cover - the CGF of a non-degenerate sample grows at least quadratically
        raise CalibrationError("the baseline's cumulant generating function has no positive root",
                               "drift.baseline_objects")
    for _ in range(100):
        f, slope = psi(theta)
        step = f / slope
        theta -= step
        if step < 1e-13 * theta:
            break
    return theta


def integrated_autocorrelation_time(y: np.ndarray) -> float:
    """φ = 1 + 2·Σ_{ℓ≥1} ρ_ℓ of a stationary series y (N,): Var(ȳ_N) ≈ φ·Var(y)/N (docs/math.md §7.2).

    Geyer's (1992) initial monotone sequence estimator: autocovariances γ_ℓ
    (divisor N) from one FFT; the sums of adjacent pairs Γ_m = γ_{2m} + γ_{2m+1}
    are kept up to the first that is not positive and made non-increasing;
    φ = (2·Σ_m Γ_m − γ_0)/γ_0, at least 1 (anticorrelated values are treated
    as independent ones, which is conservative). O(N log N), no Python loop.
    """
    y = np.asarray(y, dtype=np.float64).ravel()
    N = y.size
    if N < 4:
        return 1.0
    d = y - y.mean()
    size = 1 << int(2 * N - 1).bit_length()
    f = np.fft.rfft(d, size)
    gamma = np.fft.irfft(f.real**2 + f.imag**2, size)[:N] / N
    if not gamma[0] > 0:
        return 1.0
    m = N // 2
    pairs = gamma[0:2 * m:2] + gamma[1:2 * m:2]
    stop = np.flatnonzero(pairs <= 0)
    pairs = np.minimum.accumulate(pairs[: stop[0] if stop.size else pairs.size])
    return max(float((2.0 * pairs.sum() - gamma[0]) / gamma[0]), 1.0)


def clip_bounds(v: np.ndarray, q: float) -> tuple[float, float]:
    """(low, high): the 1 − q and q quantiles of baseline values v (N,), where every value is clipped (§7.2).

    (−inf, inf) when q = 1 (no clipping).
    """
    if q >= 1.0:
        return -math.inf, math.inf
    lo, hi = np.quantile(v, (1.0 - q, q))
    return float(lo), float(hi)


def chi2_lower(dof: float, confidence: float) -> float:
    """The (1 − confidence) quantile of χ²_dof (``quantiles``: scipy.special costs 0.14-0.29 CPU-s to import, in the
    middle of the stream)."""
    return chi2_lower_quantile(dof, confidence)


def round_up(x: float) -> int:
    """x rounded up to two significant digits (a setting a person would type)."""
    if x <= 100:
        return int(math.ceil(x))
    step = 10 ** (int(math.floor(math.log10(x))) - 1)
    return int(math.ceil(x / step) * step)
