"""Shared generators of small, exactly known problems for the core tests."""

from __future__ import annotations

import numpy as np
import pytest


def euclidean(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Euclidean distances between rows of P (a, p) and Q (b, p)."""
    return np.sqrt(np.maximum(((P[:, None, :] - Q[None, :, :]) ** 2).sum(-1), 0.0))


def landmark_problem(rng: np.random.Generator, n: int, p: int, m: int, off_span: float = 0.0):
    """n landmarks in R^p, m objects; objects get `off_span` extra dimensions of noise."""
    L = rng.normal(size=(n, p))
    Z = rng.normal(size=(m, p))
    Lx = np.hstack([L, np.zeros((n, 1))])
    Zx = np.hstack([Z, off_span * rng.normal(size=(m, 1))])
    return euclidean(L, L), euclidean(Zx, Lx), euclidean(Zx, Zx)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
