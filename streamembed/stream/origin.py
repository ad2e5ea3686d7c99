"""Where a batch's rows come from (:class:`RowOrigin`): what dead letters name as ``file`` and ``row``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RowOrigin", "NO_ORIGIN"]


@dataclass(frozen=True, eq=False)
class RowOrigin:
    """Row i of a batch is row ``rows[i]`` (or ``row_base + i``) of ``file`` (0-based rows; None: no file).

    ``rows`` (int64, shape (m,)) is given when the batch's rows are not
    consecutive in the file (a block reader that skipped rows); else rows are
    ``row_base, row_base + 1, ...``.
    """

    file: str | None = None
    rows: np.ndarray | None = None
    row_base: int = 0

    def row(self, i: int) -> int:
        """The file row of batch row ``i``."""
        return int(self.rows[i]) if self.rows is not None else self.row_base + i

    def numbers(self, m: int) -> np.ndarray:
        """The file rows of the batch's ``m`` rows, shape (m,)."""
        return self.rows if self.rows is not None else self.row_base + np.arange(m)

    def slice(self, lo: int, hi: int) -> RowOrigin:
        """The origin of batch rows ``lo`` .. ``hi - 1``."""
        if self.rows is not None:
            return RowOrigin(self.file, self.rows[lo:hi], self.row_base)
        return RowOrigin(self.file, None, self.row_base + lo)


#: A batch of no file, rows from 0 (the default of those that take an origin).
NO_ORIGIN = RowOrigin()
