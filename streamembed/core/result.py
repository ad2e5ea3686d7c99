"""What embedding a batch returns: coordinates plus how much to trust them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class EmbeddingResult:
    """Per-object results for a batch of m objects (d = map dimension).

    Attributes:
        y: (m, d) float64 coordinates in the map's frame (NaN for invalid rows).
        beta: (m,) centred self-similarity β = k(z, z) (squared distance units).
        unexplained: (m,) β - ‖ŷ‖², energy the d-dim projection does not explain
            (k0 + dropped-dimension energy, MATH.md §4).
        k0: (m,) exact Nyström residual k0(z, z); NaN where not computed.
        t: (m,) RR multiplier t* (NaN for projection, stress and l1).
        flags: (m,) uint32 bitmask (see ``streamembed.core.flags``).
        valid: (m,) bool; False rows carry a reason and NaN numbers.
        reasons: m entries, None for valid rows, else "label: detail".
        method: "projection", "restricted", "stress", "l1" or "block". For stress and
            l1, beta / unexplained / k0 are still the landmark kernel's (they do not
            depend on where the criterion puts y).
        objective: block RR objective F(Y) (None otherwise).
        block_norm_k0: ‖k0‖₂ of the block's K0 when computed (None otherwise).
    """

    y: np.ndarray
    beta: np.ndarray
    unexplained: np.ndarray
    k0: np.ndarray
    t: np.ndarray
    flags: np.ndarray
    valid: np.ndarray
    reasons: list[str | None] = field(default_factory=list)
    method: str = "projection"
    objective: float | None = None
    block_norm_k0: float | None = None

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def relative_unexplained(self) -> np.ndarray:
        """unexplained / β (0 = on the map, 1 = nothing explained); NaN where β ≤ 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.beta > 0, self.unexplained / self.beta, np.nan)
