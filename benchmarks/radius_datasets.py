"""Real non-Euclidean datasets of the radius benchmark (``benchmarks/radius_calibration.py``), built here.

Nothing is downloaded: the objects come from the Python standard library and
from a series file that the ``eval`` extra's river package ships.

* ``docstring_jaccard``: whole docstrings of public functions and classes of
  ``datasets.WORD_MODULES``, each the set of its lower-case words (≥ 3
  letters); Jaccard distance between the sets (1 − |A ∩ B| / |A ∪ B|).
* ``code_lines_levenshtein``: distinct stripped source lines (20–72
  characters) of a fixed list of standard-library modules, normalised edit
  distance (edit distance / the longer length).
* ``sp500_dtw``: river's bundled S&P 500 daily returns (10 stocks, 2013–2018):
  every stock's 30-day path of cumulative returns (%), a window every 10
  trading days; dynamic-time-warping distance (absolute differences, no
  window) between the paths. Not text, not Euclidean.
"""

from __future__ import annotations

import gzip
import importlib
import inspect
import os
import re

import numpy as np
import scipy.spatial.distance

from benchmarks.dtw import dtw_matrix
from benchmarks.datasets import WORD_MODULES, Dataset, DatasetUnavailable, _public_members
from benchmarks.editdistance import normalized_levenshtein_matrix

__all__ = ["docstring_jaccard", "code_lines_levenshtein", "stdlib_code_lines", "sp500_dtw", "dtw_matrix",
           "RADIUS_DATASETS"]

_WORDS = re.compile(r"[a-z]{3,}")

#: Modules whose source lines make ``code_lines_levenshtein`` (pure-Python modules of every CPython).
CODE_MODULES = ("argparse", "ast", "calendar", "configparser", "csv", "dataclasses", "difflib", "email.message",
                "fractions", "ftplib", "gettext", "inspect", "logging", "optparse", "pathlib", "pprint",
                "shutil", "string", "tarfile", "textwrap", "typing", "zipfile")


def _evenly(items: list, n: int) -> list:
    keep = np.unique(np.linspace(0, len(items) - 1, min(n, len(items))).round().astype(int))
    return [items[i] for i in keep]


def docstring_jaccard(n: int = 900) -> Dataset:
    """n docstrings (≥ 8 distinct words each) as word sets, Jaccard distance; labels index the module."""
    docs: list[tuple[int, frozenset[str]]] = []
    seen: set[frozenset[str]] = set()
    for label, mod in enumerate(WORD_MODULES):
        for _, doc in _public_members(mod):
            words = frozenset(_WORDS.findall(doc.lower()))
            if len(words) >= 8 and words not in seen:
                seen.add(words)
                docs.append((label, words))
    if len(docs) < 100:
        raise DatasetUnavailable("docstring_jaccard found fewer than 100 docstrings (python -OO strips them)")
    chosen = _evenly(docs, n)
    vocab = sorted(set().union(*(w for _, w in chosen)))
    col = {w: j for j, w in enumerate(vocab)}
    M = np.zeros((len(chosen), len(vocab)), dtype=bool)
    for i, (_, words) in enumerate(chosen):
        M[i, [col[w] for w in words]] = True
    D = scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(M, "jaccard"))
    return Dataset("docstring_jaccard", D=D, labels=np.array([lab for lab, _ in chosen]),
                   description=f"{len(chosen)} stdlib docstrings as word sets, Jaccard distance", kind="real")


def stdlib_code_lines(min_len: int = 20, max_len: int = 72) -> list[tuple[int, str]]:
    """(module index in ``CODE_MODULES``, line) for every distinct stripped source line of those modules whose
    length is in [min_len, max_len] and that is not a comment, in module then line order."""
    lines: list[tuple[int, str]] = []
    seen: set[str] = set()
    for label, name in enumerate(CODE_MODULES):
        try:
            src = inspect.getsource(importlib.import_module(name))
        except (ImportError, OSError, TypeError):  # pragma: no cover - a Python without sources
            continue
        for raw in src.splitlines():
            s = raw.strip()
            if min_len <= len(s) <= max_len and not s.startswith("#") and s not in seen:
                seen.add(s)
                lines.append((label, s))
    return lines


def code_lines_levenshtein(n: int = 900, min_len: int = 20, max_len: int = 72) -> Dataset:
    """n distinct stripped source lines of ``CODE_MODULES``, normalised edit distance; labels index the module."""
    lines = stdlib_code_lines(min_len, max_len)
    if len(lines) < 100:
        raise DatasetUnavailable("code_lines_levenshtein found fewer than 100 source lines")
    chosen = _evenly(lines, n)
    return Dataset("code_lines_levenshtein", D=normalized_levenshtein_matrix([s for _, s in chosen]),
                   labels=np.array([lab for lab, _ in chosen]),
                   description=f"{len(chosen)} stdlib source lines, normalised edit distance", kind="real")


def sp500_dtw(window: int = 30, stride: int = 10) -> Dataset:
    """Paths of cumulative daily returns (%) of 10 stocks over ``window`` days every ``stride`` days, DTW."""
    try:
        river = importlib.import_module("river")
    except ImportError as exc:
        raise DatasetUnavailable("sp500_dtw needs river's bundled series (pip install 'streamembed[eval]')") from exc
    path = os.path.join(os.path.dirname(river.__file__), "datasets", "sp500.csv.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        header = fh.readline().strip().split(",")
        rows = [line.strip().split(",") for line in fh if line.strip()]
    stocks = [h for h in header[1:] if h != "next_day_return"]
    R = np.array([[float(r[header.index(s)]) for s in stocks] for r in rows])  # (days, stocks)
    paths, labels = [], []
    for k in range(len(stocks)):
        for start in range(0, R.shape[0] - window + 1, stride):
            paths.append(np.cumsum(R[start:start + window, k]))
            labels.append(k)
    S = np.array(paths)
    return Dataset("sp500_dtw", D=dtw_matrix(S), labels=np.array(labels),
                   description=f"{S.shape[0]} {window}-day cumulative-return paths of {len(stocks)} S&P 500 "
                               f"stocks (river's bundled series), DTW distance", kind="real")


RADIUS_DATASETS = {"docstring_jaccard": docstring_jaccard, "code_lines_levenshtein": code_lines_levenshtein,
                   "sp500_dtw": sp500_dtw}
