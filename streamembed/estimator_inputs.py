"""What ``LandmarkMDS`` does with the X it is given: feature rows or input rows, checked whole; the landmarks kept
among the fit data's objects (``core.refit.landmarks.initial_landmarks``); the projections ``score`` reads.

Functions of explicit arguments — the fitted ``LandmarkModel``, the estimator's ``metric`` parameter and what
``fit`` saw of its X (:class:`FitInputs`) — kept apart from the estimator's class so that ``estimator.py``
holds the scikit-learn contract only (and nothing here imports it). Shapes: N fit objects, n landmarks,
p features, m rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.errors import InputError
from .core.inputs import validation
from .core.model import LandmarkModel
from .core.monitor.residuals import unexplained
from .core.refit.landmarks import initial_landmarks
from .named_columns import column_names, default_ids, in_model_order

__all__ = ["FitInputs", "NO_FIT_INPUTS", "input_rows", "projections", "n_features_in", "in_landmark_order",
           "named_ids", "kept_landmarks"]

#: The estimator's ``metric`` when X holds dissimilarities (or similarities), not feature vectors.
PRECOMPUTED = "precomputed"


@dataclass(frozen=True)
class FitInputs:
    """What ``fit`` saw of its X besides the model it made.

    Attributes:
        feature_names: (p,) a feature model's DataFrame column names, or None.
        landmark_indices: rows of the fit data kept as landmarks (``n_landmarks`` chose them), or None.
        n_fit_objects: N, when ``n_landmarks`` chose among N objects (input rows may then hold all N columns),
            else None.
    """

    feature_names: np.ndarray | None = None
    landmark_indices: np.ndarray | None = None
    n_fit_objects: int | None = None


#: An estimator made from a model (``LandmarkMDS.from_model``, ``load``): fit saw nothing of its own.
NO_FIT_INPUTS = FitInputs()


def n_features_in(model: LandmarkModel, metric: str, fit: FitInputs) -> int:
    """Columns of X seen by fit: the n landmarks, all N objects when ``n_landmarks`` chose among them, or p
    features (``metric`` other than "precomputed")."""
    if model.features is not None and metric != PRECOMPUTED:
        return 1 if model.has_objects else int(model.features.shape[1])  # objects: one per row
    return model.n_landmarks if fit.n_fit_objects is None else int(fit.n_fit_objects)


def _takes_features(model: LandmarkModel, X: object, metric: str, fit: FitInputs) -> bool:
    """Does X hold feature rows (m, p) rather than input rows (m, n)? Only a feature-mode model takes them.

    With ``metric`` set on the estimator, always; else a DataFrame named by the
    fitted feature names, or a width p that is not n (nor n + 1 for a similarity
    model). A width both could be is refused: nothing says which X is.
    """
    if model.features is None:
        return False
    if metric != PRECOMPUTED:
        return True
    if model.has_objects:  # objects (strings, series) unless X is a matrix of input rows
        return not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "biuf")
    names, fitted = column_names(X), fit.feature_names
    if names is not None and fitted is not None:
        return set(names) == set(fitted)
    shape = np.shape(X)  # type: ignore[call-overload]
    width = shape[1] if len(shape) == 2 else None
    p = int(model.features.shape[1])
    if width == p and width in (model.n_landmarks, model.input_width):
        raise InputError(f"X has {width} columns: as many as the model's features and as its landmarks' input row, "
                         f"so it is ambiguous. Set metric={model.metric!r} on the estimator "
                         f"(set_params(metric={model.metric!r})) for transform to take feature rows, or call "
                         f"embed(rows) with dissimilarity rows (dissimilarities_to_landmarks(F) computes them)")
    return width == p


def input_rows(model: LandmarkModel, X: object, metric: str, fit: FitInputs) -> tuple[np.ndarray, np.dtype]:
    """(the input rows (m, n) [or (m, n + 1)] of the fitted ``model``, X's float dtype) for X, checked whole (as
    scikit-learn does); ``metric`` is the estimator's parameter, ``fit`` what its fit saw."""
    if _takes_features(model, X, metric, fit):
        if model.has_objects:
            return model.dissimilarities_to_landmarks(X), np.dtype(np.float64)
        fitted = fit.feature_names
        p = int(model.features.shape[1])  # type: ignore[union-attr]
        F = validation.check_array(in_model_order(X, np.asarray([] if fitted is None else fitted, dtype=object),
                                                  named=fitted is not None, width=p, what="feature names"), "X")
        if F.shape[1] != p:
            raise InputError(f"X has {F.shape[1]} features, but LandmarkMDS is expecting {p} features as input "
                             f"(the landmarks' feature vectors have {p})")
        return model.dissimilarities_to_landmarks(F), F.dtype
    A = validation.check_array(in_landmark_order(model, X), "X")
    if fit.n_fit_objects is not None and A.shape[1] == n_features_in(model, metric, fit):
        # rows to every object fit saw: keep the landmarks' columns
        A = np.ascontiguousarray(A[:, fit.landmark_indices])
    if A.shape[1] not in (model.n_landmarks, model.input_width):
        raise InputError(f"X has {A.shape[1]} features, but LandmarkMDS is expecting {model.n_landmarks} features "
                         f"as input: one column per landmark, in the model's landmark order"
                         + (" (or one more: k(z, z) last)" if model.input_width > model.n_landmarks else "")
                         + (f", or {model.features.shape[1]} feature columns" if model.features is not None else ""))
    return A, A.dtype


def projections(model: LandmarkModel, X: object, self_similarity: object, metric: str,
                fit: FitInputs) -> tuple[np.ndarray, np.ndarray]:
    """(ŷ (m, d) in the frame of the fitted ``model``, unexplained β − ‖ŷ‖² (m,)) of X's rows, on the CMDS
    kernel of any map."""
    A, _ = input_rows(model, X, metric, fit)
    core, _ = model.core_dissimilarities(A, None, self_similarity)
    y_r, beta = model.project_r(core)
    y = y_r[:, : int(model.n_components)]
    return y, unexplained(beta, y)


def in_landmark_order(model: LandmarkModel, A: object) -> object:
    """A DataFrame named by landmark id in ``model``'s landmark order (checked); anything else as it is."""
    return in_model_order(A, model.landmark_ids, named=not default_ids(model.landmark_ids), width=model.input_width)


def named_ids(landmark_ids: object, M: np.ndarray) -> np.ndarray:
    """(N,) the fit data's object ids as an object array, checked against M's N rows."""
    ids = np.asarray(landmark_ids, dtype=object).ravel()
    if ids.size != M.shape[0]:
        raise InputError(f"landmark_ids has {ids.size} entries for {M.shape[0]} objects")
    return ids


def kept_landmarks(n_landmarks: int | None, *, selection: str, input: str, random_state: int, n_components: int,
                   M: np.ndarray | None = None, F: np.ndarray | None = None,
                   metric: str = PRECOMPUTED) -> np.ndarray | None:
    """Indices of the ``n_landmarks`` kept among the fit data's N objects by ``selection``, or None (all are
    landmarks): the estimator's parameters of the same names.

    M (N, N) dissimilarities (similarities for ``input="similarity"``), or F (N, p) features with their
    ``metric``.
    """
    if n_landmarks is None:
        return None
    N = (M if M is not None else F).shape[0]  # type: ignore[union-attr]
    if M is not None and M.shape != (N, N):
        raise InputError(f"with n_landmarks, fit takes the (N, N) dissimilarities among all objects; got {M.shape}")
    if n_landmarks >= N:
        return None
    if input == "similarity" and M is not None:
        from .core.inputs.kernel import landmark_dissimilarities

        M = landmark_dissimilarities(M)  # landmarks are chosen on the equivalent dissimilarities (docs/math.md §2)
    d = int(n_components)
    L = initial_landmarks(selection, int(n_landmarks), D=M, X=F, metric=metric, random_state=random_state,
                          n_components=d)
    if L.size <= d:
        raise InputError(f"only {L.size} distinct objects among the {N} given (the others duplicate them at "
                         f"dissimilarity 0): a map of n_components = {n_components} needs at least {d + 1}")
    return L
