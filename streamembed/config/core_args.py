"""The one boundary from configuration values to core arguments: a setting's "off" value becomes None here.

A setting that can be switched off says so in its field (``off=`` of
``config.fields.setting``: 0 for ``model.geodesic_neighbors``,
``drift.threshold``, ``drift.window_seconds``, ``refit.n_landmarks``; "none" for
``model.k0_rows``), because a configuration file and an environment variable
spell "off" as a value, while the core's arguments spell it None. Every
component that hands a section's settings to the core converts them here, so
neither the core nor its callers translate a sentinel of their own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["core_args", "core_value", "k0_rows_value"]


def _fields(section: object) -> dict[str, dataclasses.Field[Any]]:
    if not dataclasses.is_dataclass(section) or isinstance(section, type):
        raise TypeError(f"a configuration section instance is needed, got {section!r}")
    return {f.name: f for f in dataclasses.fields(section)}


def core_value(section: object, name: str) -> Any:
    """``section.name`` as the core's argument: None when it holds the field's "off" value, else the value."""
    f = _fields(section)[name]
    value = getattr(section, name)
    off = f.metadata.get("off")
    return None if off is not None and value == off else value


def core_args(section: object) -> dict[str, Any]:
    """Every setting of ``section`` by name, as the core's arguments (``core_value`` of each)."""
    return {name: core_value(section, name) for name in _fields(section)}


def k0_rows_value(value: str | int) -> None | str | int:
    """Config ``model.k0_rows`` -> the core's ``k0_rows`` argument (None, "all" or a count)."""
    if isinstance(value, str):
        return None if value == "none" else "all"
    return int(value)
