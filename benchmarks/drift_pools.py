"""Real population switches for the drift table (``benchmarks/drift_table.py``), built here and cached.

Nothing is downloaded: every object comes from the Python standard library or
from data that scikit-learn, river and matplotlib ship. Each pool is an *old*
population (what the map is fitted on and what a stationary stream keeps
sending) and a *new* one (what a switch sends), under one dissimilarity:

* ``words``: English words of stdlib docstrings (``datasets.english_words``'
  corpus), Levenshtein distance (not normalised): words of 4–7 letters →
  words of 9–12 letters. An edit distance, non-Euclidean.
* ``identifiers``: public function and class names of ``datasets.WORD_MODULES``,
  Levenshtein distance: lower-case names (functions) → capitalised names
  (classes). Non-Euclidean.
* ``sp500_dtw``: river's bundled S&P 500 daily returns: 30-day paths of
  cumulative returns (%) of each stock, one starting every 3 trading days,
  dynamic time warping (``benchmarks.dtw``'s recursion, between two sets): the
  paths of AAPL..JNJ → the paths of JPM..XOM. An alignment distance, non-metric.
* ``eeg_dtw``: matplotlib's sample recordings, 40-sample z-normalised windows,
  DTW: EEG windows (4 channels) → membrane-potential windows. Non-metric.
* ``code_lines``: stripped source lines of ``radius_datasets.CODE_MODULES``,
  normalised edit distance: lines of the first 15 modules → of the next 5
  (the issue's own kind of stream).
* ``code_to_prose``: the same source lines → English prose lines of the
  pydoc topics (``pydoc_data.topics``), normalised edit distance (the issue's
  second stream).
* ``digits``: scikit-learn's 1,797 digits, Euclidean distance between the 64
  pixel features: digits 0–4 → 5–9.

For each pool: ``fit_objects`` old objects (the fit matrix ``D_fit``, what
``streamembed fit --dissimilarities`` reads), the rows of every other old and
every new object against all fit objects (``old_rows``, ``new_rows``: a
landmark set chosen among the fit objects is a column subset), and two
evaluation samples with their mutual dissimilarities (``D_old_eval``,
``D_new_eval``: the full classical MDS a map is compared with). Cached as
``.npz`` (``allow_pickle=False``) under ``$STREAMEMBED_BENCH_CACHE`` (default
``/tmp/streamembed-drift-pools``): the DTW pools take minutes to build.
"""

from __future__ import annotations

import gzip
import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.dtw import dtw_cross
from benchmarks.editdistance import encode_strings, levenshtein_pairs

__all__ = ["DriftPool", "POOLS", "load_pool", "cross_levenshtein", "dtw_cross"]

#: Pool sizes: fit objects (the fit matrix), other old objects, new objects, evaluation samples of each.
FIT_OBJECTS = 1000
OLD_OBJECTS = 1500
NEW_OBJECTS = 1500
EVAL_OBJECTS = 600


@dataclass
class DriftPool:
    """One population switch (module doc). Rows are (objects, FIT_OBJECTS) dissimilarities to the fit objects."""

    name: str
    description: str
    switch: str
    distance: str
    D_fit: np.ndarray
    old_rows: np.ndarray
    new_rows: np.ndarray
    old_eval: np.ndarray  # indices into old_rows
    new_eval: np.ndarray  # indices into new_rows
    D_old_eval: np.ndarray
    D_new_eval: np.ndarray


# --------------------------------------------------------------------------- dissimilarities between two sets
def cross_levenshtein(a: Sequence[str], b: Sequence[str], normalised: bool = False, chunk: int = 4096) -> np.ndarray:
    """(len(a), len(b)) edit distances (divided by the longer length when ``normalised``)."""
    ca, la = encode_strings(a)
    cb, lb = encode_strings(b)
    out = np.empty((len(a), len(b)))
    for i0 in range(0, len(a), max(1, 200_000 // max(1, len(b)))):
        i1 = min(len(a), i0 + max(1, 200_000 // max(1, len(b))))
        P, Q = np.meshgrid(np.arange(i0, i1), np.arange(len(b)), indexing="ij")
        P, Q = P.ravel(), Q.ravel()
        swap = la[P] > lb[Q]  # the shorter string in the row loop
        first_c = np.where(swap[:, None], _pad(cb, ca.shape[1])[Q], _pad(ca, cb.shape[1])[P])
        second_c = np.where(swap[:, None], _pad(ca, cb.shape[1])[P], _pad(cb, ca.shape[1])[Q])
        first_l, second_l = np.where(swap, lb[Q], la[P]), np.where(swap, la[P], lb[Q])
        order = np.argsort(first_l, kind="stable")
        d = np.empty(P.size)
        d[order] = levenshtein_pairs(first_c[order], first_l[order], second_c[order], second_l[order], chunk)
        if normalised:
            den = np.maximum(la[P], lb[Q]).astype(np.float64)
            d = np.divide(d, den, out=np.zeros_like(d), where=den > 0)
        out[i0:i1] = d.reshape(i1 - i0, len(b))
    return out


def _pad(codes: np.ndarray, width: int) -> np.ndarray:
    if codes.shape[1] >= width:
        return codes
    return np.pad(codes, ((0, 0), (0, width - codes.shape[1])), constant_values=-1)


# --------------------------------------------------------------------------- the objects
def _words() -> tuple[list[str], list[str]]:
    from benchmarks.datasets import _WORD, WORD_MODULES, _public_members

    words: set[str] = set()
    for modname in WORD_MODULES:
        for _, doc in _public_members(modname):
            words.update(_WORD.findall(doc))
    ordered = sorted(words)
    return [w for w in ordered if 4 <= len(w) <= 7], [w for w in ordered if 9 <= len(w) <= 12]


def _identifiers() -> tuple[list[str], list[str]]:
    from benchmarks.datasets import WORD_MODULES, _public_members

    names: set[str] = set()
    for modname in WORD_MODULES:
        names.update(attr for attr, _ in _public_members(modname)[1:])
    ordered = sorted(names)
    return [s for s in ordered if s[:1].islower()], [s for s in ordered if s[:1].isupper()]


def _code_lines() -> tuple[list[str], list[str]]:
    from benchmarks.radius_datasets import stdlib_code_lines

    lines = stdlib_code_lines(20, 72)
    return [s for lab, s in lines if lab < 15], [s for lab, s in lines if 15 <= lab < 20]


def _code_to_prose() -> tuple[list[str], list[str]]:
    from pydoc_data.topics import topics

    prose: set[str] = set()
    for text in topics.values():
        for raw in text.splitlines():
            line = raw.strip()
            if 20 <= len(line) <= 72 and not line.startswith((">>>", "...")):
                prose.add(line)
    return _code_lines()[0], sorted(prose)


def _sp500_paths(window: int = 30, stride: int = 3) -> tuple[np.ndarray, np.ndarray]:
    river = importlib.import_module("river")
    path = os.path.join(os.path.dirname(river.__file__), "datasets", "sp500.csv.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        header = fh.readline().strip().split(",")
        rows = [line.strip().split(",") for line in fh if line.strip()]
    stocks = [h for h in header[1:] if h != "next_day_return"]
    R = np.array([[float(r[header.index(s)]) for s in stocks] for r in rows])
    paths = [[np.cumsum(R[t:t + window, k]) for t in range(0, R.shape[0] - window + 1, stride)]
             for k in range(len(stocks))]
    half = len(stocks) // 2
    return np.array([p for k in range(half) for p in paths[k]]), np.array([p for k in range(half, len(stocks))
                                                                              for p in paths[k]])


def _eeg_windows(length: int = 40) -> tuple[np.ndarray, np.ndarray]:
    import matplotlib

    data = os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "sample_data")
    eeg = np.fromfile(os.path.join(data, "eeg.dat"), dtype=np.float64).reshape(800, 4).T
    membrane = np.fromfile(os.path.join(data, "membrane.dat"), dtype="<f4").astype(np.float64)

    def z(W: np.ndarray) -> np.ndarray:
        return (W - W.mean(axis=1, keepdims=True)) / (W.std(axis=1, keepdims=True) + 1e-12)

    old = z(np.array([ch[s:s + length] for ch in eeg for s in range(0, ch.size - length, 1)]))
    new = z(np.array([membrane[s:s + length] for s in range(0, membrane.size - length, 4)]))
    return old, new


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X[y <= 4].astype(np.float64), X[y >= 5].astype(np.float64)


def _euclidean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import scipy.spatial.distance

    return scipy.spatial.distance.cdist(a, b)


#: name -> (objects, distance between two sets, description, switch, distance name)
POOLS: dict[str, tuple[Callable[[], tuple], Callable[[object, object], np.ndarray], str, str, str]] = {
    "words": (_words, lambda a, b: cross_levenshtein(a, b), "English words of stdlib docstrings",
              "4-7 letters -> 9-12 letters", "Levenshtein"),
    "identifiers": (_identifiers, lambda a, b: cross_levenshtein(a, b), "stdlib function and class names",
                    "lower-case names -> capitalised names", "Levenshtein"),
    "sp500_dtw": (_sp500_paths, dtw_cross, "30-day cumulative-return paths of 10 S&P 500 stocks (river)",
                  "AAPL..JNJ -> JPM..XOM", "DTW"),
    "eeg_dtw": (_eeg_windows, dtw_cross, "40-sample windows of matplotlib's sample recordings",
                "EEG -> membrane potential", "DTW"),
    "code_lines": (_code_lines, lambda a, b: cross_levenshtein(a, b, normalised=True),
                   "stripped stdlib source lines", "15 modules -> 5 others", "normalised Levenshtein"),
    "code_to_prose": (_code_to_prose, lambda a, b: cross_levenshtein(a, b, normalised=True),
                      "stripped stdlib source lines, then pydoc topics' prose lines", "code -> English prose",
                      "normalised Levenshtein"),
    "digits": (_digits, _euclidean, "scikit-learn's digits, 64 pixel features", "0-4 -> 5-9", "Euclidean"),
}


def _take(objects: object, idx: np.ndarray) -> object:
    if isinstance(objects, np.ndarray):
        return objects[idx]
    return [objects[int(i)] for i in idx]  # type: ignore[index]


def cache_dir() -> Path:
    return Path(os.environ.get("STREAMEMBED_BENCH_CACHE", "/tmp/streamembed-drift-pools"))


def load_pool(name: str, *, seed: int = 0, progress: Callable[[str], None] = lambda _: None) -> DriftPool:
    """The pool ``name`` (module doc), built once per seed and cached."""
    make, dist, description, switch, distance = POOLS[name]
    path = cache_dir() / f"{name}-s{seed}-f{FIT_OBJECTS}-o{OLD_OBJECTS}-n{NEW_OBJECTS}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=False)
        return DriftPool(name, description, switch, distance, **{k: z[k] for k in z.files})
    old, new = make()
    rng = np.random.default_rng(seed)
    po, pn = rng.permutation(len(old)), rng.permutation(len(new))
    n_fit = min(FIT_OBJECTS, len(old) // 2)
    fit = _take(old, po[:n_fit])
    old_rest = _take(old, po[n_fit:n_fit + OLD_OBJECTS])
    new_rest = _take(new, pn[:NEW_OBJECTS])
    n_old, n_new = len(old_rest), len(new_rest)  # type: ignore[arg-type]
    progress(f"{name}: building {n_fit} fit, {n_old} old and {n_new} new objects")
    D_fit = dist(fit, fit)
    D_fit = 0.5 * (D_fit + D_fit.T)
    np.fill_diagonal(D_fit, 0.0)
    old_rows, new_rows = dist(old_rest, fit), dist(new_rest, fit)
    old_eval = np.sort(rng.choice(n_old, min(EVAL_OBJECTS, n_old), replace=False))
    new_eval = np.sort(rng.choice(n_new, min(EVAL_OBJECTS, n_new), replace=False))
    D_old_eval, D_new_eval = dist(_take(old_rest, old_eval), _take(old_rest, old_eval)), dist(
        _take(new_rest, new_eval), _take(new_rest, new_eval))
    pool = DriftPool(name, description, switch, distance, D_fit=D_fit, old_rows=old_rows, new_rows=new_rows,
                     old_eval=old_eval, new_eval=new_eval, D_old_eval=0.5 * (D_old_eval + D_old_eval.T),
                     D_new_eval=0.5 * (D_new_eval + D_new_eval.T))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **{k: getattr(pool, k) for k in ("D_fit", "old_rows", "new_rows", "old_eval", "new_eval",
                                                      "D_old_eval", "D_new_eval")})
    tmp.replace(path)
    return pool
