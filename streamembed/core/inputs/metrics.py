"""The metrics: dissimilarities between objects, one registry (``METRICS``), names or ``module:function``.

A :class:`Metric` is a vectorised function ``metric(a, b) -> (len(a), len(b))``
float64 dissimilarities between two collections of objects, with the kind of
objects it takes (``takes``: ``"vectors"``, (N, p) arrays of numbers;
``"booleans"``, (N, p) arrays of 0/1 or True/False; ``"strings"``, text or
bytes; ``"series"``, 1-D lists of numbers of any length; ``"objects"``, any of
the last three, as a user's function gets them, ``core.inputs.objects``) and
the check that turns what a caller hands over into those objects
(:meth:`Metric.objects`, which names the metric when it refuses them). Every
place that takes ``metric=`` resolves it here (:func:`resolve_metric`): the
estimator's ``fit_features``, ``LandmarkModel.dissimilarities_to_landmarks``,
landmark selection and refits (``core.inputs.dissimilarities``), ``evaluate``,
``[model] metric`` and ``[metric] name``. A name is a registered metric;
``"package.module:function"`` imports a :class:`Metric` or a plain
``f(objects_a, objects_b)``: it gets (N, p) arrays for feature vectors, lists
for objects (str, bytes or 1-D float64 arrays).

Calls with many pairs are split by rows over the worker pool
(``core.runtime.worker_pool``) for the metrics marked ``threads`` (the
built-ins: scipy, rapidfuzz and dtaidistance release the GIL; a user's function
runs whole, on the caller's thread). A metric of objects is checked for what it
returns (the shape, then no NaN, infinity or negative value): a function that
breaks that, or raises, raises :class:`MetricError` naming it, which the
streaming layer turns into dead letters of the batch's rows (``metric_failed``).

Built in: the string metrics of ``core.inputs.object_metrics`` (rapidfuzz:
``levenshtein``, ``levenshtein-normalized``, ``indel``, ``indel-normalized``,
``jaro-winkler``) and DTW between series (``dtw``, dtaidistance, the ``dtw``
extra); every ``scipy.spatial.distance.cdist`` metric for vectors (scipy is
imported at the first call, not here: ``streamembed embed`` and ``run`` start
without it); scipy's boolean ones (``dice``, ``rogerstanimoto``,
``sokalsneath``, ``yule``) take boolean vectors and refuse others (on other
numbers scipy's formulas give negative "dissimilarities"). Left out, with the
reason their name is refused by: the two whose default parameters are
estimated from the rows compared (``mahalanobis``' VI, ``seuclidean``'s V),
which would give a streamed object distances that depend on its batch, and
``russellrao``, which is not zero between an object and itself.

A new metric is one file (a function of two collections) and one
``METRICS.register(Metric(...))`` line (docs/extending.md); the registry
refuses a name taken twice, a ``takes`` it does not know, a function that is
not callable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import runtime
from ..errors import InputError
from ..registry import Registry, resolve_path
from . import object_metrics
from .objects import objects_of_kind

__all__ = ["Metric", "MetricError", "METRICS", "OBJECT_KINDS", "OBJECT_METRIC_KINDS", "DEFAULT_METRIC",
           "SCIPY_METRICS", "SCIPY_BOOLEAN_METRICS", "POOL_MIN_PAIRS", "resolve_metric", "metric_names"]

#: The kinds of objects a metric may take (``Metric.takes``): "vectors", (N, p) arrays of numbers; "booleans",
#: (N, p) arrays of 0/1 or True/False; "strings", text or bytes; "series", 1-D lists of numbers (any length);
#: "objects", any of strings, bytes and series (a user's ``package.module:function``).
OBJECT_KINDS: tuple[str, ...] = ("vectors", "booleans", "strings", "series", "objects")
#: The kinds that are objects rather than feature vectors (the ``object`` column; ``core.inputs.objects``).
OBJECT_METRIC_KINDS: tuple[str, ...] = ("strings", "series", "objects")
#: The metric between feature vectors when none is named (``[model] metric``, ``fit --metric``, ``evaluate``).
DEFAULT_METRIC = "euclidean"
#: A call with at least this many pairs is split by rows over the worker pool (metrics marked ``threads``).
POOL_MIN_PAIRS = 20_000
#: The scipy ``cdist`` metrics of vectors registered (their scipy names).
SCIPY_METRICS: tuple[str, ...] = (
    "braycurtis", "canberra", "chebyshev", "cityblock", "correlation", "cosine", "euclidean", "hamming", "jaccard",
    "jensenshannon", "minkowski", "sqeuclidean")
#: The scipy ``cdist`` metrics of boolean vectors registered.
SCIPY_BOOLEAN_METRICS: tuple[str, ...] = ("dice", "rogerstanimoto", "sokalsneath", "yule")
#: scipy metrics left out, and why (the message that refuses them).
_REFUSED = {**{name: (f"scipy's {name!r} estimates its {what} from the rows it compares, so a streamed object's "
                      f"distances would depend on the batch it arrives in; give a metric with a fixed {what} as "
                      f"'package.module:function'")
               for name, what in (("mahalanobis", "inverse covariance VI"), ("seuclidean", "variances V"))},
            "russellrao": "scipy's 'russellrao' is not zero between an object and itself (it is 1 - the share of "
                          "ones both have), so an object equal to a landmark would not be placed on it; 'dice' or "
                          "'jaccard' compare boolean vectors"}

#: (a, b) -> (len(a), len(b)) float64 dissimilarities; (a) -> (len(a), len(a)) for ``pairwise``.
Between = Callable[[Any, Any], np.ndarray]


class MetricError(InputError):
    """The metric itself failed on objects it accepted: it raised, or returned the wrong shape, a NaN, an
    infinity or a negative value (the message names the metric and what it did)."""


def _vectors(X: object, metric: str, what: str, max_length: int | None = None) -> np.ndarray:
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise InputError(f"metric {metric!r} takes vectors, a 2-D array (N, p) of numbers; {what} has shape {A.shape}")
    return A


def _booleans(X: object, metric: str, what: str, max_length: int | None = None) -> np.ndarray:
    A = np.asarray(X)
    if A.ndim != 2:
        raise InputError(f"metric {metric!r} takes boolean vectors, a 2-D array (N, p) of 0/1 or True/False; {what} "
                         f"has shape {A.shape}")
    if A.dtype != np.bool_:
        if A.dtype.kind not in "biuf" or not np.isin(A, (0, 1)).all():
            raise InputError(f"metric {metric!r} takes boolean vectors (0/1 or True/False); {what} holds other "
                             f"values (a metric of numbers, e.g. 'jaccard' or 'cityblock', compares those)")
        A = A != 0
    return A


def _of_kind(kind: str) -> Callable[[object, str, str, int | None], Any]:
    def convert(X: object, metric: str, what: str, max_length: int | None = None) -> Any:
        return objects_of_kind(X, kind, metric, what, max_length)

    return convert


def _any(X: object, metric: str, what: str, max_length: int | None = None) -> Any:
    """A user's function: feature vectors stay an (N, p) array, anything else is a collection of objects."""
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "biuf":
        return np.asarray(X, dtype=np.float64)
    return objects_of_kind(X, "objects", metric, what, max_length)


_CONVERT: dict[str, Callable[[object, str, str, int | None], Any]] = {
    "vectors": _vectors, "booleans": _booleans, "strings": _of_kind("strings"), "series": _of_kind("series"),
    "objects": _any}


@dataclass(frozen=True)
class Metric:
    """One metric.

    Attributes:
        name: what ``metric=`` calls it.
        between: ``f(a, b) -> (len(a), len(b))`` float64, vectorised over both collections.
        takes: the kind of objects, one of ``OBJECT_KINDS``.
        doc: one line for the documentation tables.
        within: ``f(a) -> (len(a), len(a))``, the symmetric matrix with an exact zero diagonal among one
            collection (None: ``between(a, a)``).
        threads: whether ``between`` may run on the worker pool's threads, a chunk of rows each (it is
            thread-safe and releases the GIL).
        max_length: the longest object it takes (characters, bytes or series values; None: the default of
            ``core.inputs.objects``; objects kinds only).
    """

    name: str
    between: Between
    takes: str = "vectors"
    doc: str = ""
    within: Callable[[Any], np.ndarray] | None = None
    threads: bool = False
    max_length: int | None = None

    @property
    def of_objects(self) -> bool:
        """Whether it compares objects (strings, bytes, series) rather than feature vectors."""
        return self.takes in OBJECT_METRIC_KINDS

    def objects(self, X: object, what: str = "X") -> Any:
        """``X`` as the objects this metric takes (vectors: float64 (N, p); strings, series: a 1-D object array);
        InputError naming the metric if not."""
        return _CONVERT[self.takes](X, self.name, what, self.max_length)

    def __call__(self, a: Any, b: Any) -> np.ndarray:
        """(len(a), len(b)) float64 dissimilarities between objects ``a`` and ``b`` (checked by ``objects``).

        Raises MetricError when the function fails on them (and, for objects, returns NaN, infinity or
        negative values)."""
        a, b = self.objects(a, "a"), self.objects(b, "b")
        if self.threads and len(a) * len(b) >= POOL_MIN_PAIRS and len(a) > 1 and not runtime.in_worker():
            out = self._on_pool(a, b)
        else:
            out = self._call_between(a, b)
        return self._checked(out, len(a), len(b), _is_objects(a))

    def _call_between(self, a: Any, b: Any) -> np.ndarray:
        args = (a, b) if self.threads or not self.of_objects else (_listed(a), _listed(b))
        try:
            return np.asarray(self.between(*args), dtype=np.float64)
        except InputError:
            raise
        except Exception as exc:  # the user's function: whatever it raises fails this call, named
            raise MetricError(f"metric {self.name!r} failed on objects of {_shape(a)} and {_shape(b)}: "
                              f"{type(exc).__name__}: {exc}") from exc

    def _on_pool(self, a: Any, b: Any) -> np.ndarray:
        """Rows of ``a`` in chunks over the worker pool, one ``between`` call per chunk."""
        workers = runtime.default_threads()
        bounds = np.linspace(0, len(a), min(len(a), 2 * workers) + 1).astype(np.int64)
        pool = runtime.worker_pool(workers)
        spans = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
        parts = list(pool.map(lambda span: self._call_between(a[span[0]:span[1]], b), spans))
        return np.vstack(parts) if parts else np.zeros((0, len(b)))

    def _checked(self, out: np.ndarray, m: int, k: int, objects: bool) -> np.ndarray:
        if out.shape != (m, k):
            raise MetricError(f"metric {self.name!r} returned shape {out.shape} for {m} x {k} objects; it must "
                              f"return (len(a), len(b))")
        if objects and out.size:  # feature vectors keep a NaN row's NaN: the core refuses that row alone
            if not np.isfinite(out).all():
                i, j = np.argwhere(~np.isfinite(out))[0]
                raise MetricError(f"metric {self.name!r} returned {out[i, j]} at ({i}, {j}): dissimilarities must "
                                  f"be finite")
            if (out < 0).any():
                i, j = np.argwhere(out < 0)[0]
                raise MetricError(f"metric {self.name!r} returned {out[i, j]:.6g} at ({i}, {j}): dissimilarities "
                                  f"must not be negative")
        return out

    def pairwise(self, a: Any) -> np.ndarray:
        """(len(a), len(a)) float64 dissimilarities among objects ``a`` (checked by ``objects``)."""
        if self.within is None:
            return self(a, a)
        a = self.objects(a, "a")
        try:
            return np.asarray(self.within(a), dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise InputError(f"metric {self.name!r} failed on objects of {_shape(a)}: {exc}") from exc


def _is_objects(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == object


def _listed(objs: Any) -> Any:
    """What a user's function of objects gets: a list (of str, bytes or 1-D float64 arrays)."""
    return objs.tolist() if isinstance(objs, np.ndarray) and objs.dtype == object else objs


def _shape(a: Any) -> str:
    shape = getattr(a, "shape", None)
    return f"shape {shape}" if shape is not None else f"length {len(a)}"


def _check(metric: Metric, registry: Registry[Metric]) -> None:
    if not isinstance(metric, Metric):
        raise TypeError(f"a metric is a core.inputs.metrics.Metric, got {type(metric).__name__}")
    if ":" in metric.name:
        raise ValueError("a registered name has no ':' (that spells 'package.module:function')")
    if not callable(metric.between) or (metric.within is not None and not callable(metric.within)):
        raise TypeError("its between (and within, when given) must be callable")
    if metric.takes not in OBJECT_KINDS:
        raise ValueError(f"takes must be one of {OBJECT_KINDS}, got {metric.takes!r}")


#: Every metric by name.
METRICS: Registry[Metric] = Registry("metric", _check)


def _scipy(name: str, takes: str) -> Metric:
    """A scipy ``cdist`` metric: ``cdist`` between two collections, ``squareform(pdist)`` among one."""

    def between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        import scipy.spatial.distance  # lazily: keeps `streamembed embed`'s start-up short

        return scipy.spatial.distance.cdist(a, b, metric=name)

    def within(a: np.ndarray) -> np.ndarray:
        import scipy.spatial.distance

        return scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(a, metric=name))

    return Metric(name, between, takes, f"scipy.spatial.distance.cdist(metric={name!r})", within, threads=True)


for _name in SCIPY_METRICS:
    METRICS.register(_scipy(_name, "vectors"))
for _name in SCIPY_BOOLEAN_METRICS:
    METRICS.register(_scipy(_name, "booleans"))
for _name, (_between, _doc) in object_metrics.STRING_METRICS.items():
    METRICS.register(Metric(_name, _between, "strings", _doc, threads=True))
METRICS.register(Metric("dtw", object_metrics.dtw, "series", "dynamic time warping between 1-D series (dtaidistance "
                        "distance_matrix_fast; the dtw extra)", threads=True))


def resolve_metric(metric: str | Metric) -> Metric:
    """The metric named ``metric``: a registered name, ``"package.module:function"`` (a ``Metric``, or a plain
    ``f(objects_a, objects_b)``: (N, p) arrays for feature vectors, lists for objects), or a ``Metric`` itself.

    Raises:
        InputError: an unknown name (the message lists the known ones), a path that does not import, or an
            object that is neither a Metric nor callable.
    """
    if isinstance(metric, Metric):
        return metric
    if not isinstance(metric, str):
        raise InputError(f"metric must be a name or 'package.module:function', got {metric!r}")
    found = METRICS.get(metric)
    if found is not None:
        return found
    if ":" not in metric:
        why = _REFUSED.get(metric)
        if why is not None:
            raise InputError(why)
        raise InputError(f"unknown metric {metric!r}; known: {', '.join(METRICS.names())}, or "
                         f"'package.module:function'")
    obj = resolve_path(metric, "metric")
    if isinstance(obj, Metric):
        return obj
    if not callable(obj):
        raise InputError(f"metric {metric!r} is neither a Metric nor a function f(a, b)")
    return Metric(metric, obj, "objects", f"{metric} (a function of two collections of objects)")


def metric_names() -> tuple[str, ...]:
    """The registered metrics' names."""
    return METRICS.names()
