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


@pytest.mark.parametrize("capacity", [1, 5, 8])
def test_ring_write_matches_a_modular_index_at_every_start_and_length(capacity: int) -> None:
    from streamembed.monitors.reservoir import ring_write

    for start in range(capacity):
        for k in range(capacity + 1):
            ring, want = np.full(capacity, -1.0), np.full(capacity, -1.0)
            values = np.arange(1.0, k + 1.0)
            want[(start + np.arange(k)) % capacity] = values
            assert ring_write(ring, start, values) == (start + k) % capacity
            np.testing.assert_array_equal(ring, want)
