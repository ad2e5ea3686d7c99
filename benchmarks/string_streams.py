"""Real strings and series for streams of objects: lines of Python's standard library, its docstrings' prose, and
windows of real recordings (issue 34's demonstrations, benchmarks/bench_objects.py).

* ``code_lines(n)``: distinct stripped source lines (20–80 characters) of the stdlib modules of
  ``benchmarks.datasets.STDLIB_MODULES``, the code a repository holds;
* ``prose_lines(n)``: distinct lines (20–80 characters) of the docstrings of the same modules and their public
  members, English prose: the population switch of the demonstrations (the same characters, other strings);
* ``recording_windows(n)``: z-normalised windows of 40–80 samples of the EEG and membrane-potential recordings
  matplotlib ships (``benchmarks.dtw.eeg_series``' sources), of varying lengths: series for DTW.

Each is a deterministic function of ``n`` and ``seed`` on a given Python (the sources are those of the running
interpreter), sampled evenly at random without replacement.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import warnings
from functools import cache

import numpy as np

from benchmarks.datasets import STDLIB_MODULES, WORD_MODULES

__all__ = ["code_lines", "prose_lines", "recording_windows", "sample"]


@cache
def _code() -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for name in sorted(set(WORD_MODULES)):
        try:
            src = inspect.getsource(importlib.import_module(name))
            tree = ast.parse(src)
        except (ImportError, OSError, TypeError, SyntaxError):
            continue
        strings = set()  # lines of string statements (docstrings): prose, not code
        for node in ast.walk(tree):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value,
                                                                                                str):
                strings.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        for no, line in enumerate(src.splitlines(), 1):
            s = line.strip()
            if no not in strings and 20 <= len(s) <= 80 and not s.startswith(("#", '"', "'")):
                seen.setdefault(s)
    return tuple(seen)


@cache
def _prose() -> tuple[str, ...]:
    seen: dict[str, None] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in sorted(set(WORD_MODULES)):
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            docs = [inspect.getdoc(mod) or ""] + [inspect.getdoc(o) or "" for a, o in sorted(vars(mod).items())
                                                  if not a.startswith("_") and (inspect.isfunction(o)
                                                                                or inspect.isclass(o))]
            for doc in docs:
                for line in doc.splitlines():
                    s = line.strip()
                    if 20 <= len(s) <= 80 and " " in s and not s.startswith((">>>", "...")):
                        seen.setdefault(s)
    return tuple(seen)


def sample(items: tuple[str, ...], n: int, seed: int) -> list[str]:
    """n distinct items drawn at random (all of them, shuffled, when there are fewer)."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(items))[: min(n, len(items))]
    return [items[i] for i in idx.tolist()]


def code_lines(n: int = 20_000, seed: int = 0) -> list[str]:
    """n distinct source lines of the stdlib (see the module doc)."""
    return sample(_code(), n, seed)


def prose_lines(n: int = 4_000, seed: int = 0) -> list[str]:
    """n distinct docstring lines of the stdlib (see the module doc)."""
    return sample(_prose(), n, seed)


def recording_windows(n: int = 2_000, seed: int = 0, source: str = "eeg") -> list[np.ndarray]:
    """n z-normalised windows (40–80 samples) of matplotlib's sample recordings: ``source`` "eeg" (the 4 channels of
    the EEG recording, 800 samples each) or "membrane" (the membrane-potential recording)."""
    import os

    import matplotlib

    data = os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "sample_data")
    if source == "eeg":
        signals = np.fromfile(os.path.join(data, "eeg.dat"), dtype=np.float64).reshape(800, 4).T
    else:
        signals = np.fromfile(os.path.join(data, "membrane.dat"), dtype="<f4").astype(np.float64)[None, :]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s = signals[int(rng.integers(signals.shape[0]))]
        L = int(rng.integers(40, 81))
        start = int(rng.integers(0, s.size - L))
        w = s[start:start + L]
        out.append((w - w.mean()) / (w.std() + 1e-12))
    return out


_ = STDLIB_MODULES  # the module list the corpora come from (WORD_MODULES extends it)
