"""Evaluation datasets: real ones shipped inside packages, and synthetic ones.

Nothing is downloaded. Each loader returns a ``Dataset``: a name, either the
full (N, N) dissimilarity matrix or features (N, p) with a scipy metric, and
optional labels (for colouring plots only).

Real data
    * ``digits``, ``iris``, ``wine``, ``breast_cancer``: scikit-learn's bundled
      copies (the optional ``eval`` extra); ``wine`` and ``breast_cancer`` are
      standardised (their columns have incomparable units).
    * ``stdlib_docstrings``: first lines of the docstrings of public functions
      and classes of a fixed list of Python standard-library modules, compared
      with the normalised edit distance. Needs nothing beyond Python; its exact
      content follows the running Python version.
    * ``english_words``: distinct lower-case English words (4–12 letters) of
      the docstrings of ``WORD_MODULES``, Levenshtein distance (not normalised).
    * ``python_identifiers``: public function and class names of
      ``WORD_MODULES``, Levenshtein distance.
    * ``python_attribute_names`` (a loader, not in ``DATASETS``): public names
      of ``STDLIB_MODULES`` and of their classes' attributes, raw Levenshtein
      distance (the ``non_euclidean`` flag's measurement, ``benchmarks/bench_flag_fpr.py``).
    * ``breast_cancer_cityblock``: ``breast_cancer`` with the city-block (L1)
      metric, which no Euclidean configuration reproduces exactly.

Synthetic data (seeded, so every run is reproducible)
    * ``swiss_roll``: the 3-D swiss roll; a 2-D map leaves it off the span.
    * ``gaussian_clusters``: isotropic clusters in R^10.
    * ``plane``: points in a 2-D plane of R^5: with d = 2 every object lies
      in the landmarks' span (all methods must tie, docs/math.md §6).
    * ``plane_offspan``: the same plane plus noise in the 3 other directions;
      the landmarks carry that noise too, so objects are off the 2-D map but
      inside the landmarks' (5-D) span: k0 = 0, only dropped-dimension energy.
    * ``novel_cluster``: clusters in a plane (the landmark pool) plus a new
      cluster off it: objects truly off the landmarks' span (k0 > 0).
    * ``random_strings``: mutated copies of a few random DNA-like prototypes,
      edit distance (non-Euclidean: negative eigenvalues).
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np
import scipy.spatial.distance

from benchmarks.editdistance import levenshtein_matrix, normalized_levenshtein_matrix

__all__ = ["Dataset", "DatasetUnavailable", "DATASETS", "REAL", "SYNTHETIC", "WORD_MODULES", "load_dataset",
           "available_datasets", "english_words", "python_identifiers",
           "python_attribute_names", "breast_cancer_cityblock"]


class DatasetUnavailable(RuntimeError):
    """The dataset needs an optional package that is not installed."""


@dataclass(frozen=True)
class Dataset:
    """One evaluation dataset.

    Attributes:
        name: short identifier.
        D: (N, N) dissimilarities among all objects, or None when given as features.
        X: (N, p) features, or None.
        metric: scipy ``pdist`` metric for X.
        labels: (N,) optional class labels (for plots).
        description: one line saying what the objects and dissimilarities are.
        kind: "real" or "synthetic".
        landmark_pool: (N_pool,) indices of the objects that may become
            landmarks (None: all). Models a map fitted before some objects
            existed (``novel_cluster``).
    """

    name: str
    D: np.ndarray | None = None
    X: np.ndarray | None = None
    metric: str = "euclidean"
    labels: np.ndarray | None = None
    description: str = ""
    kind: str = "synthetic"
    landmark_pool: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_objects(self) -> int:
        return int(self.D.shape[0] if self.D is not None else self.X.shape[0])

    def dissimilarities(self) -> np.ndarray:
        """The full (N, N) float64 dissimilarity matrix (computed once from features)."""
        if self.D is not None:
            return self.D
        if "D" not in self._cache:
            pairs = scipy.spatial.distance.pdist(self.X, metric=self.metric)
            self._cache["D"] = scipy.spatial.distance.squareform(pairs)
        return self._cache["D"]


# --------------------------------------------------------------------------- synthetic


def swiss_roll(n: int = 1000, noise: float = 0.0, seed: int = 0) -> Dataset:
    """Swiss roll in R^3 (the usual parametrisation t ∈ [1.5π, 4.5π], height ∈ [0, 21])."""
    rng = np.random.default_rng(seed)
    t = 1.5 * np.pi * (1.0 + 2.0 * rng.random(n))
    h = 21.0 * rng.random(n)
    X = np.column_stack([t * np.cos(t), h, t * np.sin(t)]) + noise * rng.normal(size=(n, 3))
    labels = np.digitize(t, np.linspace(1.5 * np.pi, 4.5 * np.pi, 6)[1:-1])
    return Dataset("swiss_roll", X=X, labels=labels, description=f"{n} points on a 3-D swiss roll, Euclidean")


def gaussian_clusters(n: int = 800, n_clusters: int = 5, dim: int = 10, spread: float = 4.0, seed: int = 0) -> Dataset:
    """n points from ``n_clusters`` unit-variance Gaussians whose centres are N(0, spread²) in R^dim."""
    rng = np.random.default_rng(seed)
    centres = spread * rng.normal(size=(n_clusters, dim))
    labels = rng.integers(n_clusters, size=n)
    X = centres[labels] + rng.normal(size=(n, dim))
    return Dataset("gaussian_clusters", X=X, labels=labels,
                   description=f"{n} points, {n_clusters} Gaussian clusters in R^{dim}, Euclidean")


def plane(n: int = 600, dim: int = 5, off_span: float = 0.0, seed: int = 0) -> Dataset:
    """n points in a random 2-D plane of R^dim, plus ``off_span`` × N(0, 1) noise orthogonal to it."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    coords = rng.normal(size=(n, 2)) * np.array([3.0, 2.0])
    X = coords @ Q[:, :2].T + off_span * rng.normal(size=(n, dim - 2)) @ Q[:, 2:].T
    name = "plane" if off_span == 0 else "plane_offspan"
    where = "" if off_span == 0 else f" plus off-plane noise sd {off_span}"
    return Dataset(name, X=X, labels=(coords[:, 0] > 0).astype(int),
                   description=f"{n} points in a 2-D plane of R^{dim}{where}, Euclidean")


def novel_cluster(n: int = 800, dim: int = 10, offset: float = 8.0, novel_share: float = 0.2, seed: int = 0) -> Dataset:
    """Four clusters in a 2-D plane of R^dim (the landmark pool) plus a novel cluster off the plane.

    The points are ``streamembed.plots.novel_cluster_points`` (its docstring says how they are drawn; the plot
    demo draws the same stream).
    """
    from streamembed.plots import novel_cluster_points

    X, labels = novel_cluster_points(n, dim, offset, novel_share, seed)
    n_new = int(np.count_nonzero(labels == 4))
    return Dataset(
        "novel_cluster",
        X=X,
        labels=labels,
        description=f"{n - n_new} points in 4 clusters of a 2-D plane of R^{dim} (landmark pool) + {n_new} in a novel "
                    f"cluster {offset:g} off the plane, Euclidean",
        landmark_pool=np.arange(n - n_new),
    )


def random_strings(
    n: int = 300, n_prototypes: int = 4, length: int = 30, mutation: float = 0.25, alphabet: str = "ACGT", seed: int = 0
) -> Dataset:
    """Mutated copies of random prototypes; dissimilarity = Levenshtein distance (non-Euclidean).

    Each copy substitutes, deletes or inserts at each position with total
    probability ``mutation`` (equal shares).
    """
    rng = np.random.default_rng(seed)
    letters = np.array(list(alphabet))
    protos = ["".join(rng.choice(letters, size=length)) for _ in range(n_prototypes)]
    labels = rng.integers(n_prototypes, size=n)
    strings = []
    for lab in labels:
        out = []
        for ch in protos[lab]:
            u = rng.random()
            if u < mutation / 3:
                out.append(str(rng.choice(letters)))  # substitution
            elif u < 2 * mutation / 3:
                continue  # deletion
            elif u < mutation:
                out.extend([ch, str(rng.choice(letters))])  # insertion
            else:
                out.append(ch)
        strings.append("".join(out))
    return Dataset(
        "random_strings",
        D=levenshtein_matrix(strings),
        labels=labels,
        description=f"{n} mutated copies of {n_prototypes} random length-{length} strings, edit distance",
    )


# --------------------------------------------------------------------------- real


def _sklearn_dataset(loader_name: str, name: str, standardise: bool) -> Dataset:
    try:
        datasets = importlib.import_module("sklearn.datasets")
    except ImportError as exc:
        raise DatasetUnavailable(f"{name} needs scikit-learn (pip install 'streamembed[eval]')") from exc
    bunch = getattr(datasets, loader_name)()
    X = np.asarray(bunch.data, dtype=np.float64)
    how = "raw"
    if standardise:
        sd = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        how = "standardised"
    return Dataset(
        name,
        X=X,
        labels=np.asarray(bunch.target),
        description=f"scikit-learn bundled {name}: {X.shape[0]} x {X.shape[1]} {how} features, Euclidean",
        kind="real",
    )


def digits() -> Dataset:
    """scikit-learn's 1797 8×8 handwritten digits (UCI), 64 pixel features, Euclidean."""
    return _sklearn_dataset("load_digits", "digits", standardise=False)


def iris() -> Dataset:
    """scikit-learn's 150 iris flowers, 4 raw features (all in cm), Euclidean."""
    return _sklearn_dataset("load_iris", "iris", standardise=False)


def wine() -> Dataset:
    """scikit-learn's 178 wines, 13 standardised chemical features, Euclidean."""
    return _sklearn_dataset("load_wine", "wine", standardise=True)


def breast_cancer() -> Dataset:
    """scikit-learn's 569 breast-cancer samples, 30 standardised features, Euclidean."""
    return _sklearn_dataset("load_breast_cancer", "breast_cancer", standardise=True)


#: Modules whose docstrings make the text corpus (labels follow this order).
STDLIB_MODULES = (
    "os", "pathlib", "collections", "itertools", "functools", "logging", "argparse",
    "json", "re", "string", "textwrap", "shutil", "subprocess", "threading",
    "datetime", "decimal", "statistics", "random", "inspect", "unittest",
)  # fmt: skip


def stdlib_docstrings(n: int = 400, min_len: int = 20, max_len: int = 72) -> Dataset:
    """First docstring lines of public stdlib functions/classes, normalised edit distance.

    Collects, for each module of ``STDLIB_MODULES``, the first line of every
    public function's or class's docstring with length in [min_len, max_len],
    drops duplicates, and keeps n lines evenly spaced over the sorted
    (module, line) list. Labels index the module.
    """
    items: list[tuple[int, str]] = []
    seen: set[str] = set()
    for label, modname in enumerate(STDLIB_MODULES):
        try:
            mod = importlib.import_module(modname)
        except ImportError:  # pragma: no cover - a stripped-down Python
            continue
        lines = []
        for attr, obj in sorted(vars(mod).items()):
            if attr.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
                continue
            doc = inspect.getdoc(obj) or ""
            first = doc.strip().splitlines()[0].strip() if doc.strip() else ""
            if min_len <= len(first) <= max_len and first not in seen:
                seen.add(first)
                lines.append(first)
        items.extend((label, line) for line in lines)
    if len(items) < 10:
        raise DatasetUnavailable("stdlib_docstrings found fewer than 10 docstrings (python -OO strips them)")
    keep = np.unique(np.linspace(0, len(items) - 1, min(n, len(items))).round().astype(int))
    chosen = [items[i] for i in keep]
    strings = [s for _, s in chosen]
    return Dataset(
        "stdlib_docstrings",
        D=normalized_levenshtein_matrix(strings),
        labels=np.array([lab for lab, _ in chosen]),
        description=f"{len(strings)} stdlib docstring first lines ({len(STDLIB_MODULES)} modules), "
                    "normalised edit distance",
        kind="real",
    )


#: Modules whose docstrings and public names make the word and identifier corpora (a fixed list, so the
#: corpora do not depend on what else happens to be importable).
WORD_MODULES = STDLIB_MODULES + (
    "abc", "ast", "asyncio", "base64", "bisect", "calendar", "codecs", "configparser", "contextlib", "copy",
    "csv", "dataclasses", "difflib", "email", "enum", "fractions", "glob", "gzip", "hashlib", "heapq", "hmac",
    "html", "http.client", "io", "ipaddress", "locale", "math", "mimetypes", "operator", "pickle", "pprint",
    "queue", "secrets", "selectors", "shlex", "socket", "sqlite3", "struct", "tarfile", "tempfile", "time",
    "timeit", "tokenize", "traceback", "types", "typing", "urllib.parse", "uuid", "warnings", "weakref",
    "xml.dom.minidom", "zipfile", "zlib",
)  # fmt: skip

_WORD = re.compile(r"(?<![\w.])[a-z]{4,12}(?![\w.(])")


def _public_members(modname: str) -> list[tuple[str, str]]:
    """(name, docstring) of the module itself, then of its public functions and classes."""
    try:
        mod = importlib.import_module(modname)
    except ImportError:  # pragma: no cover - a stripped-down Python
        return []
    out: list[tuple[str, str]] = [(modname, inspect.getdoc(mod) or "")]
    with warnings.catch_warnings():  # typing.io / typing.re warn when inspected
        warnings.simplefilter("ignore", DeprecationWarning)
        for attr, obj in sorted(vars(mod).items()):
            if not attr.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
                out.append((attr, (inspect.getdoc(obj) or "")))
    return out


def _evenly(items: list[str], n: int) -> list[str]:
    """n items evenly spaced over the sorted list (all of them when there are fewer)."""
    items = sorted(items)
    keep = np.unique(np.linspace(0, len(items) - 1, min(n, len(items))).round().astype(int))
    return [items[i] for i in keep]


def english_words(n: int = 1200) -> Dataset:
    """n English words from stdlib docstrings (4–12 lower-case letters), Levenshtein distance.

    Every distinct word of the docstrings of ``WORD_MODULES`` and their public
    functions and classes (words touching a dot, underscore or parenthesis are
    code and are skipped); n of them evenly spaced in alphabetical order.
    Labels: the word's first letter.
    """
    words: set[str] = set()
    for modname in WORD_MODULES:
        for _, doc in _public_members(modname):
            words.update(_WORD.findall(doc))
    if len(words) < 10:
        raise DatasetUnavailable("english_words found fewer than 10 words (python -OO strips docstrings)")
    chosen = _evenly(list(words), n)
    return Dataset(
        "english_words",
        D=levenshtein_matrix(chosen),
        labels=np.array([ord(w[0]) - ord("a") for w in chosen]),
        description=f"{len(chosen)} English words of stdlib docstrings, Levenshtein distance",
        kind="real",
    )


def python_identifiers(n: int = 1200) -> Dataset:
    """n public function and class names of ``WORD_MODULES``, Levenshtein distance. Labels: capitalised (1) or not."""
    names: dict[str, int] = {}
    for modname in WORD_MODULES:
        for attr, _ in _public_members(modname)[1:]:
            names.setdefault(attr, int(attr[:1].isupper()))
    chosen = _evenly(list(names), n)
    return Dataset(
        "python_identifiers",
        D=levenshtein_matrix(chosen),
        labels=np.array([names[c] for c in chosen]),
        description=f"{len(chosen)} stdlib function and class names, Levenshtein distance",
        kind="real",
    )


def python_attribute_names(n: int = 400, min_len: int = 4, max_len: int = 24) -> Dataset:
    """Public names of ``STDLIB_MODULES`` and of their classes (ordinary words), Levenshtein distance.

    Collects the public attribute names of each module and of each public
    class in it with length in [min_len, max_len], drops duplicates, sorts
    them and keeps n evenly spaced names (about 1,500 exist). The raw (integer)
    edit distance: non-Euclidean, negative eigenvalues down to −0.1·λ_1.
    """
    names: set[str] = set()
    for modname in STDLIB_MODULES:
        try:
            mod = importlib.import_module(modname)
        except ImportError:  # pragma: no cover - a stripped-down Python
            continue
        for attr in dir(mod):
            if attr.startswith("_"):
                continue
            if min_len <= len(attr) <= max_len:
                names.add(attr)
            obj = getattr(mod, attr, None)
            if inspect.isclass(obj):
                names.update(a for a in vars(obj) if not a.startswith("_") and min_len <= len(a) <= max_len)
    ordered = sorted(names)
    keep = np.unique(np.linspace(0, len(ordered) - 1, min(n, len(ordered))).round().astype(int))
    words = [ordered[i] for i in keep]
    return Dataset(
        "python_attribute_names",
        D=levenshtein_matrix(words).astype(np.float64),
        description=f"{len(words)} public names of {len(STDLIB_MODULES)} stdlib modules and their classes, "
                    f"Levenshtein distance",
        kind="real",
    )


def breast_cancer_cityblock() -> Dataset:
    """scikit-learn's 569 breast-cancer samples, 30 standardised features, city-block (L1) distance."""
    ds = _sklearn_dataset("load_breast_cancer", "breast_cancer", standardise=True)
    return Dataset("breast_cancer_cityblock", X=ds.X, metric="cityblock", labels=ds.labels, kind="real",
                   description=f"scikit-learn bundled breast_cancer: {ds.X.shape[0]} x {ds.X.shape[1]} standardised "
                               "features, city-block (L1) distance")


def eeg_dtw() -> Dataset:
    """Windows of matplotlib's sample EEG and membrane-potential recordings, dynamic time warping between them."""
    from benchmarks.dtw import dtw_matrix, eeg_series

    S = eeg_series()
    return Dataset("eeg_dtw", D=dtw_matrix(S), kind="real",
                   description=f"matplotlib's sample EEG (4 channels) and membrane recordings: {S.shape[0]} "
                               f"z-normalised windows of {S.shape[1]} samples, DTW (non-metric)")


# --------------------------------------------------------------------------- registry

DATASETS: dict[str, Callable[[], Dataset]] = {
    "digits": digits,
    "iris": iris,
    "wine": wine,
    "breast_cancer": breast_cancer,
    "stdlib_docstrings": stdlib_docstrings,
    "english_words": english_words,
    "python_identifiers": python_identifiers,
    "breast_cancer_cityblock": breast_cancer_cityblock,
    "swiss_roll": swiss_roll,
    "gaussian_clusters": gaussian_clusters,
    "plane": plane,
    "plane_offspan": lambda: plane(off_span=1.0),
    "novel_cluster": novel_cluster,
    "random_strings": random_strings,
    "eeg_dtw": eeg_dtw,
}
REAL = ("digits", "iris", "wine", "breast_cancer", "stdlib_docstrings", "english_words", "python_identifiers",
        "breast_cancer_cityblock")
SYNTHETIC = ("swiss_roll", "gaussian_clusters", "plane", "plane_offspan", "novel_cluster", "random_strings")
#: Real dissimilarities that are not metrics (they violate the triangle inequality, as DTW does).
NON_METRIC = ("eeg_dtw",)


def load_dataset(name: str) -> Dataset:
    """The named dataset; raises DatasetUnavailable (optional package missing) or KeyError."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    return DATASETS[name]()


def available_datasets() -> list[str]:
    """Names whose optional dependencies are installed (scikit-learn for its bundled sets)."""
    try:
        importlib.import_module("sklearn.datasets")
        has_sklearn = True
    except ImportError:
        has_sklearn = False
    try:
        importlib.import_module("matplotlib")
        has_matplotlib = True
    except ImportError:
        has_matplotlib = False
    sk = {"digits", "iris", "wine", "breast_cancer", "breast_cancer_cityblock"}
    return [name for name in DATASETS if (has_sklearn or name not in sk) and (has_matplotlib or name != "eeg_dtw")]
