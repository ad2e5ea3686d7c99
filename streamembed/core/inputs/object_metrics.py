"""The built-in metrics between strings and between series: rapidfuzz's edit distances, dtaidistance's DTW.

Each is a vectorised ``f(a, b) -> (len(a), len(b))`` float64 over two 1-D
object arrays (``core.inputs.objects``), one C call per chunk of rows: the
library's own loop over the pairs, never one in Python. ``core.inputs.metrics``
registers them and splits a large call over the worker pool (both libraries
release the GIL), so they run with ``workers=1`` / ``parallel=False`` here.

* ``levenshtein``: the edit distance (insertions, deletions, substitutions, each 1);
  ``levenshtein-normalized``: that over the longer length (0 between equal
  objects, at most 1), rapidfuzz's ``Levenshtein.normalized_distance``.
* ``indel``: insertions and deletions only (the longest-common-subsequence
  distance); ``indel-normalized``: over the sum of the lengths.
* ``jaro-winkler``: 1 − the Jaro–Winkler similarity (prefix weight 0.1).
* ``dtw``: dynamic time warping between 1-D series, the square root of the
  least sum of squared differences along a warping path (no window),
  dtaidistance's ``distance_matrix_fast``; the optional extra ``dtw``
  (``pip install 'streamembed[dtw]'``), an InputError saying so without it.

Imported lazily (rapidfuzz and dtaidistance load at a metric's first call).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["STRING_METRICS", "levenshtein", "levenshtein_normalized", "indel", "indel_normalized",
           "jaro_winkler", "dtw", "dtw_available"]


def _cdist(scorer_name: str, a: Any, b: Any) -> np.ndarray:
    from rapidfuzz import distance
    from rapidfuzz.process import cdist

    family, _, what = scorer_name.partition(".")
    scorer = getattr(getattr(distance, family), what)
    return np.asarray(cdist(a, b, scorer=scorer, dtype=np.float64, workers=1), dtype=np.float64)


def levenshtein(a: Any, b: Any) -> np.ndarray:
    """Edit distances (m, k) between strings ``a`` (m,) and ``b`` (k,)."""
    return _cdist("Levenshtein.distance", a, b)


def levenshtein_normalized(a: Any, b: Any) -> np.ndarray:
    """Edit distance / the longer length (m, k), in [0, 1]."""
    return _cdist("Levenshtein.normalized_distance", a, b)


def indel(a: Any, b: Any) -> np.ndarray:
    """Insertions + deletions (m, k) turning each of ``a`` into each of ``b``."""
    return _cdist("Indel.distance", a, b)


def indel_normalized(a: Any, b: Any) -> np.ndarray:
    """Indel distance / the sum of the two lengths (m, k), in [0, 1]."""
    return _cdist("Indel.normalized_distance", a, b)


def jaro_winkler(a: Any, b: Any) -> np.ndarray:
    """1 − Jaro–Winkler similarity (m, k), in [0, 1]."""
    return _cdist("JaroWinkler.distance", a, b)


#: name -> (function, one line for the documentation tables).
STRING_METRICS: dict[str, tuple[Any, str]] = {
    "levenshtein": (levenshtein, "edit distance (rapidfuzz Levenshtein.distance)"),
    "levenshtein-normalized": (levenshtein_normalized, "edit distance / the longer length, in [0, 1] "
                               "(rapidfuzz Levenshtein.normalized_distance)"),
    "indel": (indel, "insertions and deletions only (rapidfuzz Indel.distance)"),
    "indel-normalized": (indel_normalized, "indel distance / the sum of the lengths (rapidfuzz "
                         "Indel.normalized_distance)"),
    "jaro-winkler": (jaro_winkler, "1 - Jaro-Winkler similarity (rapidfuzz JaroWinkler.distance)"),
}


def dtw_available() -> bool:
    """Whether dtaidistance (the ``dtw`` extra) with its C library can be imported."""
    try:
        from dtaidistance import dtw_cc  # noqa: F401
    except ImportError:
        return False
    return True


def dtw(a: Any, b: Any) -> np.ndarray:
    """DTW distances (m, k) between series ``a`` (m,) and ``b`` (k,) (1-D float64 arrays): dtaidistance's
    C ``distance_matrix_fast`` on the block of rows ``a`` and columns ``b``."""
    try:
        from dtaidistance import dtw as dtw_module
    except ImportError:
        raise InputError("metric 'dtw' needs dtaidistance: pip install 'streamembed[dtw]'") from None
    m, k = len(a), len(b)
    if m == 0 or k == 0:
        return np.zeros((m, k))
    series = [np.ascontiguousarray(x, dtype=np.float64) for x in a] + [np.ascontiguousarray(x, dtype=np.float64)
                                                                        for x in b]
    M = dtw_module.distance_matrix_fast(series, block=((0, m), (m, m + k)), parallel=False, compact=False,
                                        only_triu=False)
    return np.asarray(M[:m, m:], dtype=np.float64)
