"""Quality measures moved to ``streamembed.quality`` (a product module); re-exported here for old imports."""

from __future__ import annotations

from ..quality import (  # noqa: F401
    Fidelity,
    Stress,
    neighbour_ranks,
    pairwise_stress,
    procrustes_fidelity,
    stress_to_reference,
    trustworthiness_continuity,
)

__all__ = ["Stress", "stress_to_reference", "pairwise_stress", "neighbour_ranks", "trustworthiness_continuity",
           "Fidelity", "procrustes_fidelity"]
