"""The metrics of objects against direct computations on small inputs, and what they refuse.

References: edit and indel distances by the textbook dynamic programme; Jaro–Winkler by the published examples
(Winkler 1990: MARTHA/MARHTA 0.961, DWAYNE/DUANE 0.84, DIXON/DICKSONX 0.813); DTW by its recursion
(Sakoe and Chiba 1978) with squared differences, square-rooted, as dtaidistance defines it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamembed.core import runtime
from streamembed.core.errors import InputError
from streamembed.core.inputs.metrics import POOL_MIN_PAIRS, Metric, MetricError, resolve_metric
from streamembed.core.inputs.object_metrics import dtw_available
from streamembed.core.inputs.objects import object_problems, objects_of_kind, pack_objects, unpack_objects

WORDS = ["kitten", "sitting", "saturday", "sunday", "", "a", "flaw", "lawn", "intention", "execution", "héllo",
         "hello", "日本語", "日本"]


def edit_distance(a: str, b: str, substitution: int = 1) -> int:
    """Levenshtein's distance (substitution cost 1), or the indel distance (substitution cost 2)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (0 if ca == cb else substitution)))
        prev = cur
    return prev[-1]


def dtw_reference(x: np.ndarray, y: np.ndarray) -> float:
    C = np.full((len(x) + 1, len(y) + 1), np.inf)
    C[0, 0] = 0.0
    for i, j in itertools.product(range(1, len(x) + 1), range(1, len(y) + 1)):
        C[i, j] = (x[i - 1] - y[j - 1]) ** 2 + min(C[i - 1, j], C[i, j - 1], C[i - 1, j - 1])
    return float(np.sqrt(C[-1, -1]))


def test_levenshtein_is_the_edit_distance() -> None:
    D = resolve_metric("levenshtein")(WORDS, WORDS[:6])
    want = np.array([[edit_distance(a, b) for b in WORDS[:6]] for a in WORDS])
    np.testing.assert_array_equal(D, want)
    assert D[0, 1] == 3  # kitten -> sitting, the classic example


def test_levenshtein_normalized_is_the_edit_distance_over_the_longer_length() -> None:
    D = resolve_metric("levenshtein-normalized")(WORDS, WORDS)
    want = np.array([[edit_distance(a, b) / max(len(a), len(b), 1) for b in WORDS] for a in WORDS])
    np.testing.assert_allclose(D, want, rtol=1e-12, atol=0)
    assert D.max() <= 1.0 and np.all(np.diagonal(D) == 0)


def test_indel_counts_insertions_and_deletions_only() -> None:
    D = resolve_metric("indel")(WORDS, WORDS)
    np.testing.assert_array_equal(D, [[edit_distance(a, b, substitution=2) for b in WORDS] for a in WORDS])
    N = resolve_metric("indel-normalized")(WORDS, WORDS)
    np.testing.assert_allclose(N, [[edit_distance(a, b, 2) / max(len(a) + len(b), 1) for b in WORDS] for a in WORDS])


@pytest.mark.parametrize(("a", "b", "similarity"), [("MARTHA", "MARHTA", 0.961), ("DWAYNE", "DUANE", 0.840),
                                                     ("DIXON", "DICKSONX", 0.813)])
def test_jaro_winkler_matches_winklers_examples(a: str, b: str, similarity: float) -> None:
    d = resolve_metric("jaro-winkler")([a], [b])[0, 0]
    assert abs((1.0 - d) - similarity) < 5e-4


def test_bytes_are_compared_byte_by_byte() -> None:
    D = resolve_metric("levenshtein")([b"abc", "héllo".encode()], [b"abd", b"hello"])
    assert D[0, 0] == 1 and D[1, 1] == 2  # é is two bytes in UTF-8


@pytest.mark.skipif(not dtw_available(), reason="dtaidistance (the dtw extra) is not installed")
def test_dtw_is_the_warping_recursion() -> None:
    rng = np.random.default_rng(3)
    S = [rng.normal(size=int(rng.integers(1, 25))).cumsum() for _ in range(9)]
    D = resolve_metric("dtw")(S, S[:5])
    np.testing.assert_allclose(D, [[dtw_reference(x, y) for y in S[:5]] for x in S], rtol=1e-10, atol=1e-12)
    assert resolve_metric("dtw")([[0.0, 1.0, 1.0, 2.0]], [[0.0, 1.0, 2.0]])[0, 0] == 0.0  # a repeat costs nothing


def test_a_large_call_is_split_over_the_worker_pool_with_the_same_numbers() -> None:
    rng = np.random.default_rng(4)
    letters = np.array(list("abcdefgh"))
    a = ["".join(rng.choice(letters, size=int(rng.integers(3, 12)))) for _ in range(400)]
    b = a[:80]
    assert len(a) * len(b) >= POOL_MIN_PAIRS
    metric = resolve_metric("levenshtein")
    whole = metric(a, b)
    parts = np.vstack([metric(a[i:i + 7], b) for i in range(0, len(a), 7)])  # small calls: no pool
    np.testing.assert_array_equal(whole, parts)
    seen = []
    spy = Metric("spy", lambda x, y: seen.append(runtime.in_worker()) or metric.between(x, y), "strings",
                 threads=True)
    np.testing.assert_array_equal(spy(a, b), whole)
    assert seen and all(seen), "the chunks ran on the worker pool's threads"


def test_a_users_function_gets_lists_of_objects() -> None:
    got: list[tuple[type, type]] = []

    def lengths(xs: list, ys: list) -> np.ndarray:  # type: ignore[type-arg]
        got.append((type(xs), type(xs[0])))
        return np.abs(np.subtract.outer([len(x) for x in xs], [len(y) for y in ys])).astype(float)

    m = Metric("lengths", lengths, "objects")
    np.testing.assert_array_equal(m(["ab", "abcd"], ["a"]), [[1.0], [3.0]])
    m([[1.0, 2.0], [3.0]], [[1.0]])
    assert got == [(list, str), (list, np.ndarray)]


@pytest.mark.parametrize(("returned", "said"), [
    (lambda a, b: np.zeros((len(a), len(b) + 1)), "returned shape"),
    (lambda a, b: np.full((len(a), len(b)), np.nan), "must be finite"),
    (lambda a, b: -np.ones((len(a), len(b))), "must not be negative"),
    (lambda a, b: 1 / 0, "ZeroDivisionError"),
], ids=["shape", "nan", "negative", "raises"])
def test_a_metric_that_misbehaves_raises_a_metric_error_naming_it(returned: object, said: str) -> None:
    m = Metric("broken", returned, "objects")  # type: ignore[arg-type]
    with pytest.raises(MetricError, match=f"broken.*{said}|{said}.*broken"):
        m(["a", "b"], ["c"])


def test_an_unknown_name_lists_the_known_ones_and_a_bad_path_says_why() -> None:
    with pytest.raises(InputError, match="levenshtein-normalized") as info:
        resolve_metric("levenstein")
    assert "dtw" in str(info.value) and "package.module:function" in str(info.value)
    with pytest.raises(InputError, match="cannot import"):
        resolve_metric("no_such_module_here:f")


def test_object_problems_name_the_object_and_why() -> None:
    objs = np.array(["fine", "x" * 11, None, 3.5], dtype=object)
    assert object_problems(objs, "strings", max_length=10) == {
        1: "the object is too long: 11 characters, the metric's limit is 10",
        2: "the object is null", 3: "the object is a float, not a string (text or bytes)"}
    s = np.empty(4, dtype=object)
    s[:] = [np.array([1.0, 2.0]), np.array([1.0, np.nan]), np.array([]), "abc"]
    assert object_problems(s, "series") == {1: "value 1 of the series is nan (not finite)", 2: "the series is empty",
                                            3: "the object is a str, not a series (a list of numbers)"}
    with pytest.raises(InputError, match="metric 'dtw' cannot take X\\[1\\]"):
        objects_of_kind([[1.0], [np.inf]], "series", "dtw")


@pytest.mark.parametrize("objects", [["", "héllo", "日本語", "a\ud800b"], [b"\x00\xff", b""],
                                     [np.array([1.5, -2.0]), np.array([]), np.arange(5.0)]],
                         ids=["strings", "bytes", "series"])
def test_objects_pack_into_fixed_arrays_and_back(objects: list) -> None:  # type: ignore[type-arg]
    arr = np.empty(len(objects), dtype=object)
    arr[:] = objects
    kind, values, offsets = pack_objects(arr)
    assert values.dtype in (np.uint8, np.float64) and offsets.dtype == np.int64 and offsets.shape == (len(objects) + 1,)
    back = unpack_objects(kind, values, offsets)
    assert back.dtype == object and len(back) == len(objects)
    for x, y in zip(back, objects, strict=True):
        assert (np.array_equal(x, y) if isinstance(y, np.ndarray) else x == y)
    with pytest.raises(ValueError, match="offsets"):
        unpack_objects(kind, values, offsets[::-1])
