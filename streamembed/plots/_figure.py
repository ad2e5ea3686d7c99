"""What every figure needs: matplotlib imported on first use, colours, time parsing, record keys."""

from __future__ import annotations

import datetime as _dt
from typing import Any

#: Keys of a drift record that are not statistics.
RECORD_META_KEYS = ("time", "refit", "model_version", "event", "note")


class MatplotlibMissing(ImportError):
    """matplotlib is not installed."""


def figure_class() -> Any:
    """matplotlib's ``Figure`` class (imported here, on first use), or ``MatplotlibMissing`` saying how to get it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MatplotlibMissing(
            "plotting needs matplotlib, an optional extra: pip install 'streamembed[plot]' (or pip install matplotlib)"
        ) from exc
    return Figure


def colormap(n: int) -> Any:
    """A qualitative matplotlib colormap for ``n`` series (tab10 up to 10, tab20 beyond)."""
    from matplotlib import colormaps

    return colormaps["tab10" if n <= 10 else "tab20"]


def parse_time(value: Any) -> Any:
    """A record's ``time``: an ISO 8601 string as a ``datetime``; a number (Unix seconds) as it is."""
    if isinstance(value, str):
        try:
            return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"record time {value!r} is neither a number nor an ISO 8601 timestamp") from exc
    return value
