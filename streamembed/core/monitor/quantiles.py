"""Quantiles of Student's t and of χ² for the drift detector's calibration, without scipy.

The detector calibrates once, mid-stream, when its baseline is full (docs/math.md
§7.3: the margin of the baseline mean is a t quantile, that of its scale a χ²
quantile). ``scipy.special`` (``stdtrit``, ``chdtri``) gave them, but importing
it cost 0.14-0.29 CPU-s of every daemon run, on the loop's thread. These are
the same functions by Newton's method on the regularised incomplete beta and
gamma functions (continued fractions and series as in Press et al., Numerical
Recipes, 2007, §6.2 and §6.4), within 1e-9 (relative) of scipy's for the
degrees of freedom and confidences the detector uses
(tests/core/monitor/test_quantiles.py compares them on a grid).

Plain Python floats: called a few times per calibration, never per object.
"""

from __future__ import annotations

import math
import statistics

__all__ = ["t_quantile", "chi2_lower_quantile"]

_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 100_000
_MAX_STEPS = 100


def _beta_cf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < _EPS:
            break
    return h


def _beta_reg(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function, 0 ≤ x ≤ 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def _log_gamma_front(a: float, x: float) -> float:
    """a·log x - x - log Γ(a), for large a without the cancellation of its three large terms.

    With Stirling's series log Γ(a) = (a - ½)·log a - a + ½·log 2π + 1/(12a) - 1/(360a³) + 1/(1260a⁵)
    (the next term is below 1e-17 for a ≥ 100), it is ½·log(a/2π) - (the series) + a·(log1p(d) - d),
    d = x/a - 1.
    """
    if a < 100.0:
        return a * math.log(x) - x - math.lgamma(a)
    d = (x - a) / a
    series = 1.0 / (12 * a) - 1.0 / (360 * a**3) + 1.0 / (1260 * a**5)
    return 0.5 * math.log(a / (2 * math.pi)) - series + a * (math.log1p(d) - d)


def _gamma_lower_reg(a: float, x: float) -> float:
    """P(a, x), the regularised lower incomplete gamma function, x ≥ 0."""
    if x <= 0.0:
        return 0.0
    front = math.exp(_log_gamma_front(a, x))
    if x < a + 1.0:  # the series
        term = total = 1.0 / a
        ap = a
        for _ in range(_MAX_TERMS):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return front * total
    # the continued fraction of Q(a, x) (modified Lentz)
    b = x + 1.0 - a
    c, d = 1.0 / _TINY, 1.0 / b
    h = d
    for i in range(1, _MAX_TERMS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + an / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < _EPS:
            break
    return 1.0 - front * h


def t_quantile(dof: float, p: float) -> float:
    """The p quantile of Student's t with ``dof`` > 0 degrees of freedom, for 0.5 ≤ p < 1 (scipy's ``stdtrit``).

    Newton's method on t from the Cornish-Fisher expansion around the normal
    quantile; the tail 1 - p is computed as ½·I_{ν/(ν+t²)}(ν/2, ½), so its
    precision does not depend on p being close to 1.
    """
    if not (dof > 0 and 0.5 <= p < 1.0):
        raise ValueError(f"t_quantile needs dof > 0 and 0.5 <= p < 1, got dof={dof!r}, p={p!r}")
    if p == 0.5:
        return 0.0
    nu, tail = float(dof), 1.0 - p
    z = statistics.NormalDist().inv_cdf(p)
    # Cornish-Fisher (Abramowitz and Stegun 26.7.5): its next term is below 1e-16·t for ν ≥ 1e4
    t = z + (z**3 + z) / (4 * nu) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2) \
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * nu**3) \
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * nu**4)
    if nu >= 1e4:
        return t
    if nu < 3 or not math.isfinite(t) or t <= 0:
        t = max(z, 1e-3)
    log_norm = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(nu * math.pi)
    lo, hi = 0.0, math.inf  # a bracket: the tail is decreasing in t
    for _ in range(_MAX_STEPS):
        g = 0.5 * _beta_reg(nu / 2, 0.5, nu / (nu + t * t)) - tail  # > 0: t is too small
        if g > 0:
            lo = t
        else:
            hi = t
        density = math.exp(log_norm - (nu + 1) / 2 * math.log1p(t * t / nu))
        new = t + g / density if density > 0 else math.nan
        if not (lo < new < hi):  # Newton left the bracket: bisect (or double while unbounded)
            new = 2 * lo if math.isinf(hi) else 0.5 * (lo + hi)
        if abs(new - t) <= 4 * _EPS * abs(new):
            return new
        t = new
    return t


def chi2_lower_quantile(dof: float, confidence: float) -> float:
    """The (1 - confidence) quantile of χ² with ``dof`` > 0 degrees of freedom (scipy's ``chdtri(dof, confidence)``).

    Newton's method on x from the Wilson-Hilferty approximation (or, when
    that is not positive, the leading term of the series at 0), on
    P(dof/2, x/2) = 1 - confidence; ``0.5 ≤ confidence < 1``.
    """
    if not (dof > 0 and 0.5 <= confidence < 1.0):
        raise ValueError(f"chi2_lower_quantile needs dof > 0 and 0.5 <= confidence < 1, got dof={dof!r}, "
                         f"confidence={confidence!r}")
    k, q = float(dof), 1.0 - confidence
    a = k / 2
    z = statistics.NormalDist().inv_cdf(q)
    x = k * (1.0 - 2.0 / (9 * k) + z * math.sqrt(2.0 / (9 * k))) ** 3
    if not (x > 0 and math.isfinite(x)):
        x = 2.0 * math.exp((math.log(q) + math.lgamma(a + 1.0)) / a)
    lo, hi = 0.0, math.inf
    for _ in range(_MAX_STEPS):
        g = q - _gamma_lower_reg(a, x / 2)  # > 0: x is too small
        if g > 0:
            lo = x
        else:
            hi = x
        density = math.exp(_log_gamma_front(a, x / 2)) / x  # P's derivative in x: (x/2)^(a-1) e^(-x/2) / (2 Γ(a))
        new = x + g / density if density > 0 else math.nan
        if not (lo < new < hi):
            new = 2 * lo if math.isinf(hi) else 0.5 * (lo + hi)
        if abs(new - x) <= 4 * _EPS * abs(new):
            return new
        x = new
    return x
