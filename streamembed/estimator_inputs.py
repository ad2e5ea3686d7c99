"""What ``LandmarkMDS`` does with the X it is given: feature rows or input rows, checked whole; the landmarks kept
among the fit data's objects (``core.refit.landmarks.initial_landmarks``); the projections ``score`` reads.

Functions of the estimator (``est``), kept apart from its class so that ``estimator.py`` holds the scikit-learn
contract only. Shapes: N fit objects, n landmarks, p features, m rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .core.errors import InputError
from .core.inputs import validation
from .core.monitor.residuals import unexplained
from .core.refit.landmarks import initial_landmarks
from .named_columns import column_names, default_ids, in_model_order

if TYPE_CHECKING:
    from .core.model import LandmarkModel
    from .estimator import LandmarkMDS


def _takes_features(est: LandmarkMDS, model: LandmarkModel, X: object) -> bool:
    """Does X hold feature rows (m, p) rather than input rows (m, n)? Only a feature-mode model takes them.

    With ``metric`` set on the estimator, always; else a DataFrame named by the
    fitted feature names, or a width p that is not n (nor n + 1 for a similarity
    model). A width both could be is refused: nothing says which X is.
    """
    if model.features is None:
        return False
    if est.metric != "precomputed":
        return True
    names, fitted = column_names(X), est.__dict__.get("_feature_names")
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


def input_rows(est: LandmarkMDS, model: LandmarkModel, X: object) -> tuple[np.ndarray, np.dtype]:
    """(the input rows (m, n) [or (m, n + 1)] of ``est``'s fitted ``model``, X's float dtype) for X, checked whole
    (as scikit-learn does)."""
    if _takes_features(est, model, X):
        fitted = est.__dict__.get("_feature_names")
        p = int(model.features.shape[1])  # type: ignore[union-attr]
        F = validation.check_array(in_model_order(X, np.asarray([] if fitted is None else fitted, dtype=object),
                                                  named=fitted is not None, width=p, what="feature names"), "X")
        if F.shape[1] != p:
            raise InputError(f"X has {F.shape[1]} features, but LandmarkMDS is expecting {p} features as input "
                             f"(the landmarks' feature vectors have {p})")
        return model.dissimilarities_to_landmarks(F), F.dtype
    A = validation.check_array(in_landmark_order(model, X), "X")
    idx = est.__dict__.get("landmark_indices_")
    if est.__dict__.get("_n_fit_objects") is not None and A.shape[1] == est.n_features_in_:
        A = np.ascontiguousarray(A[:, idx])  # rows to every object fit saw: keep the landmarks' columns
    if A.shape[1] not in (model.n_landmarks, model.input_width):
        raise InputError(f"X has {A.shape[1]} features, but LandmarkMDS is expecting {model.n_landmarks} features "
                         f"as input: one column per landmark, in the model's landmark order"
                         + (" (or one more: k(z, z) last)" if model.input_width > model.n_landmarks else "")
                         + (f", or {model.features.shape[1]} feature columns" if model.features is not None else ""))
    return A, A.dtype


def projections(est: LandmarkMDS, model: LandmarkModel, X: object,
                self_similarity: object) -> tuple[np.ndarray, np.ndarray]:
    """(ŷ (m, d) in the frame of ``est``'s fitted ``model``, unexplained β − ‖ŷ‖² (m,)) of X's rows, on the CMDS
    kernel of any map."""
    A, _ = input_rows(est, model, X)
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


def kept_landmarks(est: LandmarkMDS, M: np.ndarray | None = None, F: np.ndarray | None = None,
                   metric: str = "precomputed") -> np.ndarray | None:
    """Indices of the ``n_landmarks`` kept among the fit data's N objects, or None (all are landmarks).

    M (N, N) dissimilarities, or F (N, p) features with their scipy ``metric``.
    """
    if est.n_landmarks is None:
        return None
    N = (M if M is not None else F).shape[0]  # type: ignore[union-attr]
    if M is not None and M.shape != (N, N):
        raise InputError(f"with n_landmarks, fit takes the (N, N) dissimilarities among all objects; got {M.shape}")
    if est.n_landmarks >= N:
        return None
    if est.input == "similarity" and M is not None:
        from .core.inputs.kernel import landmark_dissimilarities

        M = landmark_dissimilarities(M)  # landmarks are chosen on the equivalent dissimilarities (docs/math.md §2)
    L = initial_landmarks(est.landmark_selection, int(est.n_landmarks), D=M, X=F, metric=metric,
                          random_state=est.random_state, n_components=int(est.n_components))
    if L.size <= int(est.n_components):
        raise InputError(f"only {L.size} distinct objects among the {N} given (the others duplicate them at "
                         f"dissimilarity 0): a map of n_components = {est.n_components} needs at least "
                         f"{int(est.n_components) + 1}")
    return L
