"""Per-object flags attached to every embedded object (a uint32 bitmask).

Flags say how far to trust a placement; the streaming layer turns them into
names with :func:`flag_names`.
"""

from __future__ import annotations

import numpy as np

#: RR hard case (docs/math.md §3.2): the component along the smallest kept
#: eigen-direction is determined only up to sign; a deterministic sign was chosen.
#: Stress and L1 (docs/math.md §3.4): another, distinct placement
#: attains the same criterion; the first found was kept.
FLAG_AMBIGUOUS = np.uint32(1)
#: Evidence that the object's dissimilarities are not Euclidean against the
#: landmarks: its negative k0 (or beta < 0) beyond what the landmarks' own negative
#: spectrum explains (docs/math.md §4.3).
FLAG_NON_EUCLIDEAN = np.uint32(2)
#: Embedded with a retained older model and mapped into the current frame.
FLAG_RETAINED_MODEL = np.uint32(4)
#: Embedded as a member of a block (multi-point RR with mutual dissimilarities).
FLAG_BLOCK = np.uint32(8)
#: The secular-equation solver stopped at its iteration limit (never expected);
#: stress and L1: the placement could not be certified as a minimum, or the batch's time
#: budget ended its iterations (docs/math.md §3.4, §4.4); for a block, the trust-region solver's
#: best start did not meet its stopping test.
FLAG_NOT_CONVERGED = np.uint32(16)
#: Stress and L1: the descent from the start stopped at a point that is not a
#: minimum (a saddle or maximum, e.g. a zero-gradient start); the placement is
#: the lowest minimum reached after leaving it (docs/math.md §3.4).
FLAG_ESCAPED = np.uint32(32)
#: Block RR without a certificate of global optimality: the duality bound of
#: docs/math.md §3.3 does not close (the block lies far outside the kept axes), so the
#: best of several starts is returned and it may be a local minimum.
FLAG_UNCERTIFIED = np.uint32(64)
#: Stress and L1 in d ≥ 2: the criterion was seen to have several local minima (the descents from the
#: further starts, or the escapes, reached a higher certified minimum elsewhere); the lowest found is
#: kept, and a lower one may exist (docs/math.md §3.4, where the measured rates are).
FLAG_POSSIBLY_NONGLOBAL = np.uint32(128)
#: Block RR: the block's mutual dissimilarities contradict its rows: the block residual
#: K0 = β − Ŷ_r Ŷ_rᵀ has an eigenvalue below −``INCONSISTENT_RTOL`` times the block's scale,
#: which no Euclidean block has (docs/math.md §4.3).
FLAG_INCONSISTENT_BLOCK = np.uint32(256)
#: The row's scale is far outside the landmarks': its mean squared dissimilarity lies outside the range the fit
#: population spans by more than ``core.monitor.plausibility.SCALE_MARGIN`` (rows in other units: ×10, squared
#: distances; docs/math.md §4.8).
FLAG_IMPLAUSIBLE_SCALE = np.uint32(512)
#: The placement's unexplained energy is negative beyond what the fit population shows (beyond round-off for a
#: population without any): no real object's row gives it (docs/math.md §4.8).
FLAG_NEGATIVE_UNEXPLAINED = np.uint32(1024)

FLAG_NAMES: dict[int, str] = {
    int(FLAG_AMBIGUOUS): "ambiguous_sign",
    int(FLAG_NON_EUCLIDEAN): "non_euclidean",
    int(FLAG_RETAINED_MODEL): "retained_model",
    int(FLAG_BLOCK): "block",
    int(FLAG_NOT_CONVERGED): "not_converged",
    int(FLAG_ESCAPED): "escaped_non_minimum",
    int(FLAG_UNCERTIFIED): "uncertified",
    int(FLAG_POSSIBLY_NONGLOBAL): "possibly_nonglobal",
    int(FLAG_INCONSISTENT_BLOCK): "inconsistent_block",
    int(FLAG_IMPLAUSIBLE_SCALE): "implausible_scale",
    int(FLAG_NEGATIVE_UNEXPLAINED): "negative_unexplained",
}


def flag_names(flags: int) -> list[str]:
    """Names of the bits set in one flags value, in bit order."""
    f = int(flags)
    return [name for bit, name in FLAG_NAMES.items() if f & bit]
