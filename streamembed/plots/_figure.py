"""What every figure needs: matplotlib imported on first use, colours, time parsing, record keys."""

from __future__ import annotations

import datetime as _dt
from typing import Any

#: Keys of a drift record that are not statistics.
RECORD_META_KEYS = ("time", "refit", "model_version", "event", "note")


class MatplotlibMissing(ImportError):
    """matplotlib is not installed."""


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MatplotlibMissing(
            "plotting needs matplotlib, an optional extra: pip install 'streamembed[plot]' (or pip install matplotlib)"
        ) from exc
    return Figure


def _colormap(n: int):
    from matplotlib import colormaps

    return colormaps["tab10" if n <= 10 else "tab20"]


def _parse_time(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"record time {value!r} is neither a number nor an ISO 8601 timestamp") from exc
    return value
