"""The names of the landmark selection strategies (``model.landmark_selection``, ``fit --selection``, the redraws of
``refit.selection``) and the default, apart from the strategies themselves (``core.refit.landmarks``), so that the
option table (``core.options``) can list them without importing the selection code that takes its defaults."""

from __future__ import annotations

__all__ = ["LANDMARK_SELECTIONS", "DEFAULT_LANDMARK_SELECTION"]

#: Strategies of ``core.refit.landmarks.select_landmarks``.
LANDMARK_SELECTIONS = ("max-variance", "random", "rpcholesky", "kmeans++", "kmedoids", "maxmin")
#: The default, chosen by the measurements of docs/landmarks.md.
DEFAULT_LANDMARK_SELECTION = "max-variance"
