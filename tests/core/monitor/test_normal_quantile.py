"""The drift detector's normal quantile without scipy (core.monitor.detector._normal_quantile)."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from streamembed.core.monitor.detector import _normal_quantile


def test_the_normal_quantile_is_scipys_ndtri_to_rounding() -> None:
    p = np.concatenate([np.logspace(-15, -1, 60), np.linspace(0.01, 0.99, 99), 1.0 - np.logspace(-15, -1, 60)])
    ours = np.array([_normal_quantile(float(x)) for x in p])
    np.testing.assert_allclose(ours, ndtri(p), rtol=1e-14, atol=1e-14)
