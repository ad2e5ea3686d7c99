"""``monitors.reservoir.RecentRows`` keeps exactly the last ``capacity`` rows of the stream, oldest first."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.monitors.reservoir import RecentRows


@pytest.mark.parametrize("capacity", [1, 7, 50])
def test_recent_rows_are_the_last_capacity_rows_of_the_stream_in_order(capacity: int) -> None:
    # brute force: the concatenated stream's tail, for batches smaller, equal to and larger than the ring
    rng = np.random.default_rng(capacity)
    ring = RecentRows(capacity)
    ids_all: list[str] = []
    rows_all: list[np.ndarray] = []
    for _ in range(40):
        m = int(rng.choice([1, 3, capacity, capacity + 5, 2 * capacity + 1]))
        ids = np.array([f"o{len(ids_all) + i}" for i in range(m)], dtype=object)
        rows = rng.random((m, 4)).astype(np.float32)
        ring.add(ids, rows)
        ids_all.extend(ids.tolist())
        rows_all.append(rows)
        got = ring.contents()
        want_ids = ids_all[-capacity:]
        assert got.ids.tolist() == want_ids
        assert got.rows is not None
        np.testing.assert_array_equal(got.rows, np.concatenate(rows_all)[-capacity:].astype(np.float64))
        assert len(ring) == len(want_ids)
