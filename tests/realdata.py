"""Real dissimilarity matrices shared by the tests, each built once per test session.

digits: scikit-learn's 1797 handwritten digits, Euclidean (its "other dataset"
rows: breast_cancer, standardised). docstrings: 400 stdlib docstring first lines,
normalised edit distance, non-Euclidean (its "other dataset" rows: digits). A test
skips when the dataset's optional package is missing.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from benchmarks.datasets import DatasetUnavailable, load_dataset, stdlib_docstrings
from benchmarks.mixups import MixupSetting, mixup_setting


@cache
def _matrix(name: str) -> np.ndarray | str:
    try:
        return stdlib_docstrings().D if name == "docstrings" else load_dataset(name).dissimilarities()
    except DatasetUnavailable as exc:
        return str(exc)


def matrix(name: str) -> np.ndarray:
    """(N, N) dissimilarities of "digits" or "docstrings" (skips the test when unavailable)."""
    got = _matrix(name)
    if isinstance(got, str):
        pytest.skip(got)
    return got


@cache
def _setting(name: str, n: int, selection: str, seed: int) -> MixupSetting:
    other = matrix("breast_cancer" if name == "digits" else "digits")
    return mixup_setting(matrix(name), n, selection=selection, seed=seed, other=other)


def setting(name: str, n: int = 100, selection: str = "random", seed: int = 0) -> MixupSetting:
    """A model on n landmarks of ``name`` with its arrivals in model order and every mix-up (evaluation.mixups)."""
    return _setting(name, n, selection, seed)
