"""Which landmarks an unversioned row was measured against, once a refit has made more than one version.

A row of dissimilarities that neither states its ``landmark_version`` nor
names its landmarks (a ``landmarks`` list, or the file's
``streamembed.landmarks`` metadata) says nothing about the landmarks it was
measured against. Before any refit there is one version and no doubt; after
one, placing such a row against the new landmarks would put it in the wrong
place with nothing to show for it (its columns follow the old order). So
``decode_batch`` reads it as the version the operator configured
(``refit.unversioned_rows``: by default the version the daemon started with,
the one producers measured against before the refit; the retained model
places it, flagged ``retained_model``), or refuses it as
``ambiguous_landmarks`` when that is ``reject`` or the version is no longer
retained. Rows that carry objects or feature vectors are measured by the
daemon itself and are never ambiguous. Vectorised over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from streamembed.stream.columns import column, null_mask
from streamembed.stream.landmark_order import metadata_order
from streamembed.stream.records import INPUT_LANDMARK_VERSION, INPUT_LANDMARKS, Reason

__all__ = ["UnversionedRule", "apply_unversioned_rule", "START"]

#: ``refit.unversioned_rows`` naming the version the daemon started with (the default).
START = "start"


@dataclass(frozen=True)
class UnversionedRule:
    """After a refit: the version unversioned rows are read as (None: refused), the current one, and why."""

    version: int | None
    current: int
    retain_versions: int = 0

    def refusal(self, accepted: set[int]) -> str | None:
        """Why unversioned rows are refused, or None when they are read as ``version``."""
        if self.version is None:
            return (f"the row states no landmark_version and names no landmarks, and the map has been refitted "
                    f"(version {self.current}): refit.unversioned_rows = 'reject'; measure rows against version "
                    f"{self.current}'s landmarks and tag them landmark_version = {self.current} (docs/objects.md)")
        if self.version not in accepted:
            return (f"the row states no landmark_version and names no landmarks; after the refit to version "
                    f"{self.current} such rows are read as version {self.version} (refit.unversioned_rows), which "
                    f"is no longer served (refit.retain_versions = {self.retain_versions}): measure rows against "
                    f"version {self.current}'s landmarks and tag them landmark_version = {self.current} "
                    f"(docs/objects.md)")
        return None


def apply_unversioned_rule(table: pa.Table | pa.RecordBatch, mark: object, versions: np.ndarray | None,
                           rule: UnversionedRule, accepted: set[int], vector_field: str) -> np.ndarray | None:
    """The rows' versions (m,) with the unversioned ones read as ``rule.version`` (or marked
    ``ambiguous_landmarks`` through ``mark``, ``RowMarks.mark``); ``versions`` as ``landmark_versions`` gave
    them (None: no column, every row the current version)."""
    m = table.num_rows
    if rule.version == rule.current or m == 0:
        return versions
    lv = column(table, INPUT_LANDMARK_VERSION)
    unstated = np.ones(m, dtype=bool) if lv is None or pa.types.is_null(lv.type) else null_mask(lv)
    named = column(table, INPUT_LANDMARKS)
    if named is not None and not pa.types.is_null(named.type):
        unstated &= null_mask(named)
    shared, problem = metadata_order(table.schema, vector_field)
    if shared is not None or problem is not None:  # the file names (or misnames) its order: not ambiguous
        return versions
    if not unstated.any():
        return versions
    why = rule.refusal(accepted)
    if why is not None:
        mark(unstated, Reason.AMBIGUOUS_LANDMARKS, why)  # type: ignore[operator]
        return versions
    out = np.full(m, rule.current, dtype=np.int64) if versions is None else versions.copy()
    out[unstated] = int(rule.version)  # type: ignore[arg-type]
    return out
