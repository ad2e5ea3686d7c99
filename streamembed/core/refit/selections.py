"""The names of the landmark selection strategies (``model.landmark_selection``, ``fit --selection``, the redraws of
``refit.selection``) and the default, apart from the strategies themselves (``core.refit.landmarks``), so that the
option table (``core.options``) can list them without importing the selection code that takes its defaults."""

from __future__ import annotations

__all__ = ["LANDMARK_SELECTIONS", "DEFAULT_LANDMARK_SELECTION", "SKELETON_SELECTION", "MAP_SELECTIONS",
           "REFIT_SELECTIONS", "DEFAULT_SELECTION"]

#: Strategies of ``core.refit.landmarks.select_landmarks``.
LANDMARK_SELECTIONS = ("max-variance", "random", "rpcholesky", "kmeans++", "kmedoids", "maxmin")
#: The default, chosen by the measurements of docs/landmarks.md.
DEFAULT_LANDMARK_SELECTION = "max-variance"
#: LSDR's skeleton (Roy 2021): the landmarks and the map come from the skeleton
#: (``core.skeleton_model.fit_skeleton_model``).
SKELETON_SELECTION = "skeleton"
#: Every value of the ``landmark_selection`` option: the strategies, and the skeleton.
MAP_SELECTIONS = (*LANDMARK_SELECTIONS, SKELETON_SELECTION)
#: Names accepted by ``core.refit.refit.refit(selection=...)`` (config ``refit.selection``).
REFIT_SELECTIONS = ("adaptive", "residual", *LANDMARK_SELECTIONS)
#: ``refit.selection`` when none is given (measured by benchmarks/refit_policies.py; docs/refits.md).
DEFAULT_SELECTION = "adaptive"
