"""Every registered metric passes the metric checks (``checks.METRIC_CHECKS``); the built-ins are scipy's."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance

from streamembed.core.errors import InputError
from streamembed.core.inputs.metrics import METRICS, SCIPY_BOOLEAN_METRICS, SCIPY_METRICS, Metric, resolve_metric

from .checks import METRIC_CHECKS, Check


@pytest.mark.parametrize("check", METRIC_CHECKS, ids=lambda c: c.__name__.removeprefix("check_metric_"))
@pytest.mark.parametrize("metric", list(METRICS), ids=lambda m: m.name)
def test_every_metric_passes_the_metric_checks(metric: Metric, check: Check) -> None:
    check(metric)


#: scipy's cdist metrics (its documented list).
DOCUMENTED = {"braycurtis", "canberra", "chebyshev", "cityblock", "correlation", "cosine", "dice", "euclidean",
              "hamming", "jaccard", "jensenshannon", "mahalanobis", "minkowski", "rogerstanimoto", "russellrao",
              "seuclidean", "sokalsneath", "sqeuclidean", "yule"}
#: The ones left out: the checks refuse them (mahalanobis and seuclidean fail check_metric_rows_are_independent,
#: russellrao the zero self-dissimilarity of check_metric_is_a_dissimilarity).
LEFT_OUT = {"mahalanobis", "seuclidean", "russellrao"}


def test_every_scipy_cdist_metric_is_built_in_but_those_the_checks_refuse() -> None:
    assert set(SCIPY_METRICS) | set(SCIPY_BOOLEAN_METRICS) == DOCUMENTED - LEFT_OUT
    assert set(SCIPY_METRICS) | set(SCIPY_BOOLEAN_METRICS) <= set(METRICS.names())
    X = np.random.default_rng(0).integers(0, 2, size=(12, 3)).astype(float) + np.eye(12, 3)
    for name in DOCUMENTED:  # each is one scipy still knows
        scipy.spatial.distance.cdist(X, X, metric=name)


@pytest.mark.parametrize("name", sorted(LEFT_OUT))
def test_a_metric_left_out_is_refused_saying_why(name: str) -> None:
    with pytest.raises(InputError, match=name):
        resolve_metric(name)
