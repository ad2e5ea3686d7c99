"""The drift detector's t and χ² quantiles without scipy (core.monitor.quantiles) against scipy.special.

The detector calibrates mid-stream; importing scipy.special there cost 0.14-0.29 CPU-s of every daemon run
(docs/throughput.md). The last test fails on a tree that still imports it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import chdtri, stdtrit

import streamembed
from streamembed.core.monitor.quantiles import chi2_lower_quantile, t_quantile

#: Degrees of freedom as the detector makes them (N/φ - 1 >= 1, not integers) and confidences from 0.5 to 1 - 1e-6.
DOF = [1.0, 1.3, 2.0, 2.5, 3.0, 4.0, 7.7, 10.0, 30.0, 99.5, 100.0, 300.0, 1e3, 3e3, 9999.0, 1e4, 1e5, 1e6]
P = [0.5, 0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9999, 0.999999]


@pytest.mark.parametrize("dof", DOF)
def test_t_quantile_is_scipys_stdtrit(dof: float) -> None:
    ours = np.array([t_quantile(dof, p) for p in P])
    np.testing.assert_allclose(ours, stdtrit(dof, np.array(P)), rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("dof", DOF)
def test_chi2_lower_quantile_is_scipys_chdtri(dof: float) -> None:
    ours = np.array([chi2_lower_quantile(dof, p) for p in P])
    np.testing.assert_allclose(ours, chdtri(dof, np.array(P)), rtol=1e-9)


def test_outside_the_domain_is_refused() -> None:
    for bad in ((0.0, 0.9), (5.0, 0.4), (5.0, 1.0), (float("nan"), 0.9)):
        with pytest.raises(ValueError):
            t_quantile(*bad)
        with pytest.raises(ValueError):
            chi2_lower_quantile(*bad)


_CALIBRATE = r"""
import sys, numpy as np
from streamembed.core.monitor.detector import CusumDetector
from streamembed.core.monitor.trigger import correlation_note
rng = np.random.default_rng(0)
runs = np.repeat(rng.normal(size=2000), 20) + 0.1 * rng.normal(size=40000)  # correlated: the t quantile of the note
c = CusumDetector(expected_run_objects=1e7, min_shift=0.1, group_objects=64).calibrate(runs)
assert c.variance_inflation > 1.0 and correlation_note(c) is not None
print(",".join(m for m in sys.modules if m == "scipy.special" or m.startswith("scipy.special.")))
"""


def test_calibrating_the_detector_does_not_import_scipy_special() -> None:
    tree = Path(streamembed.__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", _CALIBRATE], cwd=tree, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "", f"scipy.special was imported: {r.stdout.strip()[:200]}"
