"""The metrics: dissimilarities between objects, one registry (``METRICS``), names or ``module:function``.

A :class:`Metric` is a vectorised function ``metric(a, b) -> (len(a), len(b))``
float64 dissimilarities between two collections of objects, with the kind of
objects it takes (``takes``: today ``"vectors"``, (N, p) arrays of numbers, and
``"booleans"``, (N, p) arrays of 0/1 or True/False) and
the check that turns what a caller hands over into those objects
(:meth:`Metric.objects`, which names the metric when it refuses them). Every
place that takes ``metric=`` resolves it here (:func:`resolve_metric`): the
estimator's ``fit_features``, ``LandmarkModel.dissimilarities_to_landmarks``,
landmark selection and refits (``core.inputs.dissimilarities``), ``evaluate``
and ``[model] metric``. A name is a registered metric; ``"package.module:function"``
imports a :class:`Metric` or a plain ``f(a, b)`` of vectors.

Built in: every ``scipy.spatial.distance.cdist`` metric for vectors (scipy is
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

from ..errors import InputError
from ..registry import Registry, resolve_path

__all__ = ["Metric", "METRICS", "OBJECT_KINDS", "DEFAULT_METRIC", "SCIPY_METRICS", "SCIPY_BOOLEAN_METRICS",
           "resolve_metric", "metric_names"]

#: The kinds of objects a metric may take (``Metric.takes``): "vectors", (N, p) arrays of numbers; "booleans",
#: (N, p) arrays of 0/1 or True/False.
OBJECT_KINDS: tuple[str, ...] = ("vectors", "booleans")
#: The metric between feature vectors when none is named (``[model] metric``, ``fit --metric``, ``evaluate``).
DEFAULT_METRIC = "euclidean"
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


def _vectors(X: object, metric: str, what: str) -> np.ndarray:
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise InputError(f"metric {metric!r} takes vectors, a 2-D array (N, p) of numbers; {what} has shape {A.shape}")
    return A


def _booleans(X: object, metric: str, what: str) -> np.ndarray:
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


_CONVERT: dict[str, Callable[[object, str, str], Any]] = {"vectors": _vectors, "booleans": _booleans}


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
    """

    name: str
    between: Between
    takes: str = "vectors"
    doc: str = ""
    within: Callable[[Any], np.ndarray] | None = None

    def objects(self, X: object, what: str = "X") -> Any:
        """``X`` as the objects this metric takes (vectors: float64 (N, p)); InputError naming the metric if not."""
        return _CONVERT[self.takes](X, self.name, what)

    def __call__(self, a: Any, b: Any) -> np.ndarray:
        """(len(a), len(b)) float64 dissimilarities between objects ``a`` and ``b`` (checked by ``objects``)."""
        a, b = self.objects(a, "a"), self.objects(b, "b")
        try:
            out = np.asarray(self.between(a, b), dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise InputError(f"metric {self.name!r} failed on objects of {_shape(a)} and {_shape(b)}: {exc}") from exc
        if out.shape != (len(a), len(b)):
            raise InputError(f"metric {self.name!r} returned shape {out.shape} for {len(a)} x {len(b)} objects; "
                             f"it must return (len(a), len(b))")
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

    return Metric(name, between, takes, f"scipy.spatial.distance.cdist(metric={name!r})", within)


for _name in SCIPY_METRICS:
    METRICS.register(_scipy(_name, "vectors"))
for _name in SCIPY_BOOLEAN_METRICS:
    METRICS.register(_scipy(_name, "booleans"))


def resolve_metric(metric: str | Metric) -> Metric:
    """The metric named ``metric``: a registered name, ``"package.module:function"`` (a ``Metric``, or a plain
    ``f(a, b)`` of vectors), or a ``Metric`` itself.

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
    return Metric(metric, obj, "vectors", f"{metric} (a function of two collections of vectors)")


def metric_names() -> tuple[str, ...]:
    """The registered metrics' names."""
    return METRICS.names()
