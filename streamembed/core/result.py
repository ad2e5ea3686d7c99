"""What embedding a batch returns: coordinates plus how much to trust them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .inputs.validation import Problem


@dataclass
class EmbeddingResult:
    """Per-object results for a batch of m objects (d = map dimension).

    Attributes:
        y: (m, d) float64 coordinates in the map's frame (NaN for invalid rows).
        beta: (m,) centred self-similarity β = k(z, z) (squared distance units).
        unexplained: (m,) β - ‖ŷ‖², energy the d-dim *projection* ŷ does not explain
            (k0 + dropped-dimension energy, docs/math.md §4), whatever the method:
            the quantity drift monitoring watches.
        unexplained_placed: (m,) β - ‖y‖² of the placement y itself (in the model's
            own frame): for RR -t (RR matches ‖y‖² to β where it can), for a block
            member β_pp - ‖y_p‖², for stress and L1 the placed point's; None for
            projection, where it is ``unexplained`` (docs/math.md §4).
        k0: (m,) exact Nyström residual k0(z, z); NaN where not computed.
        t: (m,) RR multiplier t* (NaN for projection, stress and l1).
        flags: (m,) uint32 bitmask (see ``streamembed.core.flags``).
        valid: (m,) bool; False rows carry a reason and NaN numbers.
        reasons: m entries, None for valid rows, else a ``Problem`` (code, detail,
            index; ``str()`` gives "code: detail").
        method: "projection", "restricted", "stress", "l1" or "block". For stress and
            l1, beta / unexplained / k0 are still the landmark kernel's (they do not
            depend on where the criterion puts y).
        objective: block RR objective F(Y) (None otherwise).
        block_norm_k0: ‖k0‖₂ of the block's K0 when computed (None otherwise).
        residual_rows: (s,) indices of the rows whose exact k0 was computed
            (None when none was), and residual_coords (s, r) their projections
            on every monitored eigenpair, in the model's own eigenbasis
            (docs/math.md §4): what drift monitoring needs, computed once.
        blocks: for block RR, per block: "sizes" (rows), "objective" (F(Y*),
            NaN for a refused block) and "certified" (globally optimal by the
            duality bound, docs/math.md §3).
        radius: (m,) map units: the distance from y within which the object's
            full-MDS position lies with the model's stated coverage (docs/math.md §9);
            NaN where the model has no radius calibration for the method (blocks,
            stress, l1, uncalibrated models) and for invalid rows; 0 at a landmark.
    """

    y: np.ndarray
    beta: np.ndarray
    unexplained: np.ndarray
    k0: np.ndarray
    t: np.ndarray
    flags: np.ndarray
    valid: np.ndarray
    reasons: list[Problem | None] = field(default_factory=list)
    method: str = "projection"
    objective: float | None = None
    block_norm_k0: float | None = None
    residual_rows: np.ndarray | None = None
    residual_coords: np.ndarray | None = None
    blocks: dict[str, Any] | None = None
    unexplained_placed: np.ndarray | None = None
    radius: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def take(self, idx: np.ndarray) -> EmbeddingResult:
        """The rows ``idx`` (an index array) of this result, as a new result."""
        idx = np.asarray(idx, dtype=np.int64)
        rows, coords = self.residual_rows, self.residual_coords
        if rows is not None and coords is not None:
            where = np.full(len(self), -1, dtype=np.int64)
            where[idx] = np.arange(idx.size)
            keep = where[rows] >= 0
            rows, coords = where[rows][keep], coords[keep]
        placed = None if self.unexplained_placed is None else self.unexplained_placed[idx]
        radius = None if self.radius is None else self.radius[idx]
        return replace(self, y=self.y[idx], beta=self.beta[idx], unexplained=self.unexplained[idx], k0=self.k0[idx],
                       t=self.t[idx], radius=radius, flags=self.flags[idx], valid=self.valid[idx],
                       reasons=[self.reasons[i] for i in idx.tolist()], residual_rows=rows, residual_coords=coords,
                       unexplained_placed=placed)

    @property
    def relative_unexplained(self) -> np.ndarray:
        """unexplained / β (0 = on the map, 1 = nothing explained); NaN where β ≤ 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.beta > 0, self.unexplained / self.beta, np.nan)
