"""``set_output`` and ``get_feature_names_out`` for ``LandmarkMDS``: scikit-learn's output protocol, no dependency.

scikit-learn's ``_SetOutputMixin`` semantics, reimplemented so that importing
streamembed imports neither scikit-learn nor pandas:

- ``set_output(transform="default" | "pandas" | "polars")`` stores the choice
  in ``_sklearn_output_config["transform"]`` (the attribute scikit-learn's
  ``clone`` copies and its ``_get_output_config`` reads) and returns the
  estimator; ``None`` leaves it unchanged. An estimator without a choice of its
  own follows scikit-learn's global ``set_config(transform_output=...)`` when
  scikit-learn has been imported (it cannot have been set otherwise).
- ``transform`` and ``fit_transform`` then return a DataFrame whose columns are
  ``get_feature_names_out()`` (``landmarkmds0``, ``landmarkmds1``, ... like
  scikit-learn's class-name-prefixed outputs) and whose index is the input
  DataFrame's (a pandas input keeps its index; anything else gets the default).
  The values keep their dtype (float32 stays float32).
- polars only if it is installed (``set_output(transform="polars")`` says so otherwise).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import numpy as np

__all__ = ["OUTPUT_KINDS", "SetOutputMixin"]

#: What ``set_output(transform=...)`` accepts.
OUTPUT_KINDS = ("default", "pandas", "polars")


def _library(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"Setting output container to '{name}' requires {name} to be installed") from exc


class SetOutputMixin:
    """The output side of the scikit-learn protocol: ``set_output``, ``get_feature_names_out``, wrapping."""

    def set_output(self, *, transform: str | None = None) -> Any:
        """Choose what ``transform`` and ``fit_transform`` return: "default" (arrays), "pandas" or "polars" frames.

        Returns the estimator. ``None`` leaves the choice unchanged.
        """
        if transform is None:
            return self
        if transform not in OUTPUT_KINDS:
            raise ValueError(f"output config must be in {sorted(OUTPUT_KINDS)}, got {transform}")
        if transform != "default":
            _library(transform)
        config: dict[str, str] = getattr(self, "_sklearn_output_config", None) or {}
        config["transform"] = transform
        self._sklearn_output_config = config
        return self

    def _output_kind(self) -> str:
        config: dict[str, str] = getattr(self, "_sklearn_output_config", None) or {}
        if "transform" in config:
            return str(config["transform"])
        sk = sys.modules.get("sklearn")
        if sk is None or not hasattr(sk, "get_config"):
            return "default"
        return str(sk.get_config().get("transform_output", "default"))

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """(d,) object array of the output columns: the lower-case class name and the axis, ``landmarkmds0``, ...

        ``input_features``, if given, must match ``feature_names_in_`` (or have
        ``n_features_in_`` entries when there are no names), as in scikit-learn.
        """
        d = int(self._model().n_components)  # type: ignore[attr-defined]
        if input_features is not None:
            given = [str(x) for x in np.asarray(input_features, dtype=object).ravel()]
            names = getattr(self, "feature_names_in_", None)
            if names is not None and given != [str(x) for x in names]:
                raise ValueError("input_features is not equal to feature_names_in_")
            if names is None and len(given) != self.n_features_in_:  # type: ignore[attr-defined]
                raise ValueError(f"input_features should have length equal to number of features "
                                 f"({self.n_features_in_}), got {len(given)}")  # type: ignore[attr-defined]
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(d)], dtype=object)

    def _wrap_output(self, Y: np.ndarray, X: object) -> Any:
        """Y (m, d) as the configured container, with X's index when X is a pandas frame or series."""
        kind = self._output_kind()
        if kind == "default":
            return Y
        if kind not in OUTPUT_KINDS:
            raise ValueError(f"output config must be in {sorted(OUTPUT_KINDS)}, got {kind}")
        columns = [str(c) for c in self.get_feature_names_out()]
        if kind == "pandas":
            pd = _library("pandas")
            index = X.index if isinstance(X, (pd.DataFrame, pd.Series)) else None
            return pd.DataFrame(Y, index=index, columns=columns, copy=False)
        pl = _library("polars")
        return pl.DataFrame(Y, schema=columns, orient="row")
