"""RowOrigin: the rows of a batch in its file, sliced as the embedder splits a batch that failed."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from streamembed.stream.codecs import decode_batch
from streamembed.stream.embedder import BatchEmbedder
from streamembed.stream.origin import RowOrigin
from streamembed.stream.sources import SourceBatch


def test_consecutive_rows_from_a_base() -> None:
    o = RowOrigin("f.parquet", None, 10)
    assert o.row(0) == 10 and o.row(3) == 13
    assert o.numbers(3).tolist() == [10, 11, 12]
    assert o.slice(2, 4).numbers(2).tolist() == [12, 13] and o.slice(2, 4).file == "f.parquet"


def test_explicit_rows_win_over_the_base() -> None:
    o = RowOrigin("f", np.array([5, 9, 11]), 100)
    assert [o.row(i) for i in range(3)] == [5, 9, 11]
    assert o.slice(1, 3).numbers(2).tolist() == [9, 11]


def test_it_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RowOrigin().file = "x"  # type: ignore[misc]


@pytest.mark.parametrize("fn", [decode_batch, BatchEmbedder.process, SourceBatch])
def test_no_signature_carries_the_loose_triple(fn: object) -> None:
    params = set(inspect.signature(fn).parameters)  # type: ignore[arg-type]
    assert "origin" in params and not params & {"file", "rows", "row_base"}, params
