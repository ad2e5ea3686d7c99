"""The pandas-free Arrow builders equal ``pa.array`` / ``pa.scalar`` / ``to_numpy`` on the same values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamembed.stream.arrow_build import (booleans, numeric, optional_ints, optional_texts, pylist, rows, scalar,
                                            strings, timestamps, to_numpy)

NUMERIC = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8, np.uint32, np.intp]


def _same(built: pa.Array, reference: pa.Array) -> None:
    built.validate(full=True)
    assert built.type == reference.type
    assert built.null_count == reference.null_count
    if pa.types.is_floating(built.type):  # NaN != NaN for Array.equals: compare values and validity
        got, want = built.to_numpy(zero_copy_only=False), reference.to_numpy(zero_copy_only=False)
        assert np.array_equal(got, want, equal_nan=True) and np.signbit(got).tolist() == np.signbit(want).tolist()
        assert built.is_null().equals(reference.is_null())
    else:
        assert built.equals(reference)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("m", [0, 1, 7, 9, 64])
def test_numeric_equals_pa_array(dtype: type, m: int) -> None:
    x = (np.arange(m) * 3 - 5).astype(dtype)
    _same(numeric(x), pa.array(x))


def test_numeric_non_contiguous_and_nan() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((11, 6))
    X[2, 1] = np.nan
    X[4, 1] = np.inf
    for col in (X[:, 1], X[::3, 2], X.T[1], X[::-1, 1], X.astype(np.float32)[::-2, 1], -np.zeros(3)):
        built = numeric(col)
        _same(built, pa.array(col))
        assert np.array_equal(to_numpy(built), col, equal_nan=True)


def test_numeric_rejects_2d_and_keeps_a_given_type() -> None:
    with pytest.raises(ValueError, match="1-D"):
        numeric(np.zeros((2, 2)))
    us = np.array([0, 1_700_000_000_000_000], np.int64)
    t = pa.timestamp("us", tz="UTC")
    _same(timestamps(us, t), pa.array(us).cast(t))
    _same(timestamps(np.empty(0, np.int64), t), pa.array([], t))


@pytest.mark.parametrize("m", [0, 1, 7, 8, 9, 100])
def test_booleans_equal_pa_array(m: int) -> None:
    mask = np.random.default_rng(m).random(m) < 0.5
    _same(booleans(mask), pa.array(mask))
    _same(numeric(mask), pa.array(mask))
    _same(booleans(mask[::2]), pa.array(mask[::2]))


@pytest.mark.parametrize("values", [[], [""], ["projection", "restricted"], ["é", "日本語", "", "a\x00b", "🙂" * 40]])
def test_strings_equal_pa_array(values: list[str]) -> None:
    _same(strings(values), pa.array(values, pa.string()))
    _same(strings(tuple(values)), pa.array(values, pa.string()))


@given(st.lists(st.text(), max_size=20))
def test_strings_equal_pa_array_on_any_text(values: list[str]) -> None:
    _same(strings(values), pa.array(values, pa.string()))


@pytest.mark.parametrize("values", [[], [None], ["a", None, ""], ["é", None, "日本語", "a\x00b"], [None, None, "x"]])
def test_optional_texts_equal_pa_array(values: list[str | None]) -> None:
    _same(optional_texts(values, pa.string()), pa.array(values, pa.string()))
    raw = [None if v is None else v.encode("utf-8") for v in values]
    _same(optional_texts(raw, pa.binary()), pa.array(raw, pa.binary()))


@given(st.lists(st.one_of(st.none(), st.text()), max_size=20), st.lists(st.one_of(st.none(),
       st.integers(-2**63, 2**63 - 1)), max_size=20))
def test_optional_builders_equal_pa_array_on_any_values(texts: list[str | None], ints: list[int | None]) -> None:
    _same(optional_texts(texts, pa.string()), pa.array(texts, pa.string()))
    _same(optional_ints(ints), pa.array(ints, pa.int64()))


@pytest.mark.parametrize(("value", "type"), [(0, pa.int32()), (-1, pa.int64()), (2.5, pa.float32()), (7, pa.uint8())])
def test_scalar_equals_pa_scalar(value: float, type: pa.DataType) -> None:
    s = scalar(value, type)
    assert s.type == type and s.is_valid
    assert s.equals(pa.scalar(value, type))


def _reference(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False) if isinstance(arr, pa.Array) else arr.to_numpy()


@pytest.mark.parametrize(
    "arr",
    [
        pa.array(np.arange(10, dtype=np.float32)),
        pa.array(np.arange(10, dtype=np.float64)).slice(3, 4),
        pa.array(np.arange(10, dtype=np.int32)).slice(9),
        pa.array([], pa.float64()),
        pa.array([1.5, None, 3.0], pa.float32()),
        pa.array([1, None, 3, None], pa.int64()).slice(1),
        pa.array([None, None], pa.int64()),
        pa.nulls(3, pa.int64()),
        pa.array([True, False, True] * 5).slice(2, 11),
        pa.array([], pa.bool_()),
        pa.array(np.array([0, 5], "datetime64[us]")).cast(pa.timestamp("us", tz="UTC")),
        pa.array(["a", None, "c"]),
        pa.chunked_array([pa.array([1.0, 2.0]), pa.array([3.0])]),
        pa.chunked_array([pa.array([1, 2], pa.int32())]),
        pa.chunked_array([], pa.float64()),
    ],
    ids=lambda a: str(a.type),
)
def test_to_numpy_equals_pyarrow(arr: pa.Array | pa.ChunkedArray) -> None:
    got, want = to_numpy(arr), _reference(arr)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    if want.dtype.kind in "fc":
        assert np.array_equal(got, want, equal_nan=True)
    else:
        assert list(got) == list(want)


_ZONED = [pa.timestamp(u, tz=tz) for u in ("s", "ms", "us") for tz in ("UTC", "Europe/Paris", "+05:30", "-01:00")]


@pytest.mark.parametrize("type", _ZONED + [pa.timestamp("us"), pa.timestamp("ns", tz="UTC"), pa.int64()])
def test_pylist_equals_to_pylist(type: pa.DataType) -> None:
    """Zoned timestamps as pyarrow gives them (same datetimes, same tzinfo), nulls and slices included."""
    values = [0, None, 1_700_000_000_123_000, -86_400_000_001_000, 253_402_300_799_000_000, None, 1_000]
    if pa.types.is_timestamp(type) and type.unit == "s":
        values = [None if v is None else v // 1_000_000 for v in values]
    elif pa.types.is_timestamp(type) and type.unit == "ms":
        values = [None if v is None else v // 1_000 for v in values]
    arr = pa.array(values, pa.int64()).cast(type)
    for a in (arr, arr.slice(1, 4), pa.chunked_array([arr, arr.slice(3)]), arr.slice(0, 0)):
        try:
            want = a.to_pylist()
        except OverflowError:  # year 9999 moved east of UTC: pyarrow cannot either
            with pytest.raises(OverflowError):
                pylist(a)
            continue
        got = pylist(a)
        assert got == want
        assert [repr(v) for v in got] == [repr(v) for v in want]
        assert [str(v) for v in got] == [str(v) for v in want]


def test_rows_equal_to_pylist() -> None:
    t = pa.table({"id": ["a", None, "c"], "y": pa.array([[1.0, 2.0], [3.0, 4.0], None], pa.list_(pa.float64(), 2)),
                  "t": pa.array([1, None, 3], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                  "m": pa.array(["p", "p", "q"]).dictionary_encode()})
    for data in (t, t.slice(1), t.to_batches()[0], pa.concat_tables([t, t]), t.select([]), t.slice(0, 0)):
        assert rows(data) == data.to_pylist()
    dup = pa.table([pa.array([1, 2]), pa.array([3, 4])], names=["a", "a"])
    assert rows(dup) == dup.to_pylist()
