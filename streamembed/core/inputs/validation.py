"""Input validation in one place (scikit-learn's convention).

Array-level checks raise :class:`~streamembed.core.errors.InputError` with a
message naming the argument, the problem and the offending shape or index.
Row-level checks (:func:`row_problems`) never raise: they return a
:class:`Problem` per bad row (a bounded ``code`` for metrics and dead letters,
the offending ``index`` and a readable ``detail``), which the streaming layer
dead-letters without parsing any text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ..errors import InputError


class ProblemCode(StrEnum):
    """Every ``Problem.code`` the core produces (the streaming layer's dead-letter ``Reason`` includes each)."""

    NON_FINITE = "non_finite"  #: NaN, +-inf (or a null element)
    NEGATIVE = "negative"  #: a negative dissimilarity
    #: finite, but so large that its squares would overflow (or its placement keep too few digits)
    OUT_OF_RANGE = "out_of_range"
    BAD_BLOCK = "bad_block"  #: an invalid block (its ``cross`` matrix, or another member failed)
    REJECTED = "rejected"  #: refused for another reason


#: The codes, in a fixed order.
PROBLEM_CODES: tuple[ProblemCode, ...] = tuple(ProblemCode)


@dataclass(frozen=True)
class Problem:
    """Why one row (or one block) cannot be embedded.

    Attributes:
        code: a :class:`ProblemCode`.
        detail: what was wrong, for people (``"A[17] = -0.5"``).
        index: the offending column (or (row, column)), when there is one.
    """

    code: ProblemCode
    detail: str
    index: int | tuple[int, ...] | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"

_FLOAT_TYPES = (np.float32, np.float64)


def as_float_array(x: object, name: str, ndim: int) -> np.ndarray:
    """Return ``x`` as a float32/float64 array of ``ndim`` dimensions.

    float32 and float64 keep their dtype (the hot path runs in the input's
    precision); anything else numeric becomes float64.
    """
    arr = np.asarray(x)
    if arr.dtype.type not in _FLOAT_TYPES:
        if arr.dtype.kind not in "biuf":
            raise InputError(f"{name} must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
    if arr.ndim != ndim:
        raise InputError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    return arr


def check_array(x: object, name: str = "X") -> np.ndarray:
    """The estimator API's whole-array check (``LandmarkMDS.fit`` / ``transform``): a finite 2-D float array.

    Refuses sparse, complex, non-numeric, non-2-D, empty and non-finite input
    with messages that say which (in scikit-learn's words, so its model
    selection tools recognise them). The streaming layer does not call this:
    its fused kernel finds bad rows in the pass that embeds them.
    """
    if hasattr(x, "toarray") or type(x).__module__.startswith("scipy.sparse"):
        raise InputError(f"{name} is a sparse matrix: sparse input is not supported; pass a dense array")
    arr = np.asarray(x)
    if arr.dtype.kind == "c":
        raise InputError(f"{name}: Complex data not supported (dtype {arr.dtype})")
    if arr.dtype.kind == "O":
        try:
            arr = arr.astype(np.float64)
        except TypeError as exc:
            raise TypeError(f"{name} must be numeric: {exc}") from None
        except ValueError as exc:
            raise InputError(f"{name} must be numeric: {exc}") from None
    if arr.ndim != 2:
        raise InputError(f"{name} must be 2-dimensional, got shape {arr.shape}. Reshape your data with "
                         f"x.reshape(1, -1) for a single object or x.reshape(-1, 1) for a single landmark")
    if arr.shape[0] == 0:
        raise InputError(f"{name} has 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if arr.shape[1] == 0:
        raise InputError(f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    arr = as_float_array(arr, name, 2)
    if not np.isfinite(arr).all():
        idx = _first_index(~np.isfinite(arr))
        raise InputError(f"{name} contains NaN or infinity: {name}{list(idx)} = {arr[idx]}")
    return arr


def _first_index(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def check_finite_nonnegative(arr: np.ndarray, name: str) -> None:
    """Raise if any entry is NaN, infinite or negative, naming the first one."""
    if arr.size and np.isfinite(arr.sum()) and arr.min() >= 0:
        return  # one pass each for the common case; the slow search only on failure
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = _first_index(bad)
        raise InputError(f"{name} has a non-finite entry: {name}{list(idx)} = {arr[idx]}")
    neg = arr < 0
    if neg.any():
        idx = _first_index(neg)
        raise InputError(f"{name} has a negative dissimilarity: {name}{list(idx)} = {arr[idx]}. Negative values in "
                         f"data cannot be dissimilarities")


def check_dissimilarity_matrix(D: object, name: str = "D", rtol: float = 1e-7) -> np.ndarray:
    """Validate a square dissimilarity matrix (docs/math.md §1) and return it as float64.

    Square, finite, non-negative, zero diagonal and symmetric, each up to
    ``rtol`` times the largest entry (float32 inputs round-trip through text
    formats with such errors). Nothing is clipped or symmetrised silently.
    """
    arr = as_float_array(D, name, 2).astype(np.float64, copy=False)
    if arr.shape[0] != arr.shape[1]:
        raise InputError(f"{name} must be square, got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise InputError(f"{name} needs at least 2 objects, got shape {arr.shape} (n_samples = {arr.shape[0]})")
    check_finite_nonnegative(arr, name)
    scale = max(float(arr.max()), np.finfo(np.float64).tiny)
    tol = rtol * scale
    diag = np.abs(np.diagonal(arr))
    if (diag > tol).any():
        i = int(np.argmax(diag))
        raise InputError(f"{name} must have a zero diagonal: {name}[{i}, {i}] = {arr[i, i]}")
    # symmetry, a block of rows at a time (no n×n temporaries for large n)
    step = max(1, 4_000_000 // arr.shape[0])
    for i0 in range(0, arr.shape[0], step):
        asym = np.abs(arr[i0 : i0 + step] - arr[:, i0 : i0 + step].T) > tol
        if asym.any():
            i, j = _first_index(asym)
            i += i0
            raise InputError(
                f"{name} must be symmetric: {name}[{i}, {j}] = {arr[i, j]} but {name}[{j}, {i}] = {arr[j, i]}"
            )
    return arr


def check_rows(A: object, n_landmarks: int, name: str = "A") -> np.ndarray:
    """Validate the shape of an (m, n) block of dissimilarities to the landmarks."""
    arr = as_float_array(A, name, 2)
    if arr.shape[1] != n_landmarks:
        raise InputError(
            f"{name} has {arr.shape[1]} columns but the model has {n_landmarks} landmarks "
            f"(shape {arr.shape}, expected (m, {n_landmarks}))"
        )
    return arr


def row_problems(A: np.ndarray, name: str = "dissimilarities") -> list[Problem | None]:
    """Per-row reasons for rows that are not valid dissimilarities (None = valid).

    One vectorised pass finds the bad rows (the row minimum is NaN for a NaN
    and negative for a negative entry; +inf is caught by ``isfinite`` of the
    row sum); only the bad rows are then inspected one by one for a message.
    """
    m = A.shape[0]
    reasons: list[Problem | None] = [None] * m
    if m == 0 or A.shape[1] == 0:
        return reasons
    bad = ~(A.min(axis=1) >= 0) | ~np.isfinite(A.sum(axis=1))
    for i in np.flatnonzero(bad):
        reasons[int(i)] = describe_bad_row(A[i], name)
    return reasons


def describe_bad_row(row: np.ndarray, name: str = "dissimilarities") -> Problem | None:
    """The problem of one row, or None if it is valid."""
    nonfinite = ~np.isfinite(row)
    if nonfinite.any():
        j = int(np.argmax(nonfinite))
        return Problem(ProblemCode.NON_FINITE, f"{name}[{j}] = {row[j]}", j)
    neg = row < 0
    if neg.any():
        j = int(np.argmax(neg))
        return Problem(ProblemCode.NEGATIVE, f"{name}[{j}] = {row[j]}", j)
    with np.errstate(over="ignore"):
        if not np.isfinite(np.square(row, dtype=np.float64).sum()):
            return Problem(ProblemCode.OUT_OF_RANGE, f"the squared {name} overflow")
    return None


def check_cross(C: object, m: int, rtol: float = 1e-7, name: str = "C") -> np.ndarray:
    """Validate the (m, m) mutual dissimilarities of a block; returns float64."""
    arr = as_float_array(C, name, 2)
    if arr.shape != (m, m):
        raise InputError(f"{name} must have shape ({m}, {m}) to match A's {m} rows, got {arr.shape}")
    if m == 1:
        arr64 = arr.astype(np.float64)
        check_finite_nonnegative(arr64, name)
        if abs(arr64[0, 0]) > 0:
            raise InputError(f"{name} must have a zero diagonal: {name}[0, 0] = {arr64[0, 0]}")
        return arr64
    return check_dissimilarity_matrix(arr, name=name, rtol=rtol)
