"""DataFrame columns named by landmark id: checked and put in model order, like scikit-learn's ``feature_names_in_``.

A ``LandmarkMDS`` fitted with landmark ids (``fit(D, landmark_ids=...)``, a
DataFrame whose columns name the landmarks, or a model file whose ids are
not the defaults: the row numbers 0, 1, ..., or L0, L1, ... in older files) knows which landmark each column of X stands
for. A DataFrame handed to ``transform``/``embed`` with string column names
is then checked against those ids: a permutation of them is applied by one
gather (the values are moved, not recomputed, so the placements are
bit-identical to those of the same rows in model order); any other set of
names raises a ``ValueError`` in scikit-learn's words ("The feature names
should match those that were passed during fit. ..."). Arrays without
names are taken in model order, as ever. pandas is not imported: any object
with ``columns`` and ``to_numpy`` is a frame here.
"""

from __future__ import annotations

import warnings
from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np

from streamembed.core.errors import InputError

__all__ = ["column_names", "default_ids", "in_model_order", "SELF_SIMILARITY_COLUMN"]

#: The column of a similarity model's frame that holds k(z, z) (it goes last).
SELF_SIMILARITY_COLUMN = "self_similarity"


def column_names(X: object) -> np.ndarray | None:
    """(k,) object array of a frame's column names when they are all strings, else None (scikit-learn's rule)."""
    cols = getattr(X, "columns", None)
    if cols is None or not hasattr(X, "to_numpy"):
        return None
    names = list(cols)
    if not names or not all(isinstance(c, str) for c in names):
        return None
    return np.asarray(names, dtype=object)


def default_ids(ids: Iterable[Any]) -> bool:
    """True for the ids a model gets when none are given: it was not fitted with names.

    The default ids are the row numbers of the fit data, "0", "1", ... (the API
    and ``streamembed fit`` alike); models saved before that convention have
    "L0", "L1", ..., which count as defaults too.
    """
    strs = [str(x) for x in ids]
    return all(x == str(i) for i, x in enumerate(strs)) or all(x == f"L{i}" for i, x in enumerate(strs))


def _listed(names: Sequence[str]) -> str:
    out = ""
    for i, name in enumerate(names):
        if i >= 5:
            return out + "- ...\n"
        out += f"- {name}\n"
    return out


def in_model_order(X: object, ids: np.ndarray, *, named: bool, width: int, what: str = "landmark ids") -> object:
    """``X`` with its columns in the model's landmark order (a frame becomes an array); raises on foreign names.

    Args:
        X: the input; returned unchanged unless it is a frame with string column names.
        ids: (n,) the model's landmark ids in model order (or a feature model's feature names).
        named: the model was fitted with landmark ids (else names are ignored, with a warning).
        width: columns of an input row (n, or n + 1 with k(z, z) last for a similarity model).
        what: what the names are, for the messages ("landmark ids" or "feature names").
    """
    names = column_names(X)
    if names is None:
        return X
    if not named:
        taken = "the model's landmark order" if what == "landmark ids" else "the order of fit"
        warnings.warn(f"X has feature names, but LandmarkMDS was fitted without {what}; its columns are taken "
                      f"in {taken}", UserWarning, stacklevel=3)
        return X
    ids_list = [str(x) for x in ids]
    cols = [str(c) for c in names]
    extra = width > len(ids_list) and SELF_SIMILARITY_COLUMN in cols and SELF_SIMILARITY_COLUMN not in ids_list
    landmark_cols = [c for c in cols if not (extra and c == SELF_SIMILARITY_COLUMN)]
    seen, fitted = set(landmark_cols), set(ids_list)
    unseen = sorted(seen - fitted)
    missing = sorted(fitted - seen)
    twice = sorted({c for c in landmark_cols if landmark_cols.count(c) > 1}) if len(seen) < len(landmark_cols) else []
    if unseen or missing or twice:
        msg = "The feature names should match those that were passed during fit.\n"
        if unseen:
            msg += "Feature names unseen at fit time:\n" + _listed(unseen)
        if missing:
            msg += "Feature names seen at fit time, yet now missing:\n" + _listed(missing)
        if twice:
            msg += "Feature names repeated:\n" + _listed(twice)
        msg += (f"(LandmarkMDS: the columns are the model's {what}; any order of them is accepted and put in "
                "model order, nothing else)")
        raise InputError(msg)
    where = {c: j for j, c in enumerate(cols)}
    order = [where[x] for x in ids_list] + ([where[SELF_SIMILARITY_COLUMN]] if extra else [])
    arr: Any = X.to_numpy()  # type: ignore[attr-defined]
    if order == list(range(arr.shape[1])):
        return arr
    return np.take(arr, np.asarray(order, dtype=np.intp), axis=1)
