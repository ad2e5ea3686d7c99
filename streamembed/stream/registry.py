"""The models a daemon serves: the current one and the last K retained versions.

After a refit, inputs computed against an older landmark order (their
``landmark_version``) are still embedded, with the retained model of that
version. Every model's outputs are in the same frame, because each refit is
aligned by Procrustes to its predecessor's outputs (``core.refit.refit``), so the
retained model's coordinates need no further mapping; such rows carry the
``retained_model`` flag. A registry never goes back: installing a version
older than or equal to the current one is refused.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

__all__ = ["ModelRegistry", "StaleModelError"]


class StaleModelError(ValueError):
    """A model older than (or as old as) the current one was offered."""


class ModelRegistry:
    """Current model plus up to ``retain`` older versions, by ``LandmarkModel.version``."""

    def __init__(self, model: Any, retain: int = 3) -> None:
        self.retain = int(retain)
        self._lock = threading.Lock()
        self._models: OrderedDict[int, Any] = OrderedDict()
        self._models[int(model.version)] = model
        self._installed: dict[int, float] = {int(model.version): time.time()}

    @property
    def current(self) -> Any:
        with self._lock:
            return next(reversed(self._models.values()))

    @property
    def current_version(self) -> int:
        with self._lock:
            return next(reversed(self._models))

    def versions(self) -> list[int]:
        with self._lock:
            return list(self._models)

    def get(self, version: int) -> Any | None:
        with self._lock:
            return self._models.get(int(version))

    def installed_at(self, version: int) -> float | None:
        """Unix time at which ``version`` was installed (or the registry made with it); None: not retained."""
        with self._lock:
            return self._installed.get(int(version))

    def install(self, model: Any) -> None:
        """Make ``model`` current; keep the previous ones up to ``retain``."""
        v = int(model.version)
        with self._lock:
            newest = next(reversed(self._models))
            if v <= newest:
                raise StaleModelError(f"model version {v} is not newer than the current version {newest}")
            self._models[v] = model
            self._installed[v] = time.time()
            while len(self._models) > self.retain + 1:
                old, _ = self._models.popitem(last=False)
                self._installed.pop(old, None)
