"""The vectorised Levenshtein distance equals the textbook dynamic programme."""

from __future__ import annotations

import random

import numpy as np

from benchmarks.editdistance import levenshtein_matrix, normalized_levenshtein_matrix


def textbook(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_matches_textbook_on_random_and_edge_strings() -> None:
    rng = random.Random(0)
    strings = ["".join(rng.choice("abc") for _ in range(rng.randint(0, 11))) for _ in range(40)]
    strings += ["", "kitten", "sitting", "flaw", "lawn", "naïve ☃", "naive"]
    D = levenshtein_matrix(strings, chunk=97)  # a small chunk exercises the chunking
    ref = np.array([[textbook(a, b) for b in strings] for a in strings])
    np.testing.assert_array_equal(D, ref)
    assert D[strings.index("kitten"), strings.index("sitting")] == 3


def test_normalised_distance_is_in_unit_interval() -> None:
    D = normalized_levenshtein_matrix(["", "", "ab", "abcd", "xyz"])
    assert D[0, 1] == 0 and D[0, 2] == 1 and D[2, 3] == 0.5
    assert (D >= 0).all() and (D <= 1).all() and np.allclose(D, D.T)
