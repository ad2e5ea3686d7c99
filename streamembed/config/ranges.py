"""The range of every numeric setting as one table, read from the schema's fields and checked at load.

Each numeric field of the schema (``config.schema``, ``config.monitoring``)
states its range where it is declared, both ends (``min=`` and ``max=``, with
``exclusive_min`` / ``exclusive_max`` where an end itself is excluded:
``config.fields``); this module is that statement seen as a table, ``key ->
Range``, built from the fields on first use. A value outside is refused at
start (exit 2) with the range, from a TOML file, the environment and
``--set`` alike (``config.load``); the reference prints it
(``config.render``). Combinations (a heartbeat slower than a third of the
session timeout, a poll interval shorter than a batch may take) are
``config.checks``'.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from streamembed.config.fields import MAX_BYTES, MAX_ROWS

# (``RANGES``, the table ``ranges()`` returns, is also a module attribute, built when first asked for)
__all__ = ["Range", "MAX_BYTES", "MAX_ROWS", "ranges", "range_of", "describe_range"]


class Range(NamedTuple):
    """Allowed values ``lowest <= v <= highest`` (``lowest < v`` when ``exclusive_low``, ``v < highest`` when
    ``exclusive_high``)."""

    lowest: float
    highest: float
    exclusive_low: bool = False
    exclusive_high: bool = False

    def contains(self, value: float) -> bool:
        low_ok = value > self.lowest if self.exclusive_low else value >= self.lowest
        return low_ok and (value < self.highest if self.exclusive_high else value <= self.highest)


@cache
def ranges() -> dict[str, Range]:
    """``section.key`` -> its range, for every field that states one, in the schema's order.

    Raises:
        ValueError: a field states only one end of its range (a schema defect: every range has both ends).
    """
    from streamembed.config.schema import section_keys, sections

    out: dict[str, Range] = {}
    for section, cls in sections().items():
        for name, (_, f) in section_keys(cls).items():
            low, high = f.metadata.get("min"), f.metadata.get("max")
            if low is None and high is None:
                continue
            if low is None or high is None:
                raise ValueError(f"{section}.{name} states only one end of its range (min={low}, max={high})")
            out[f"{section}.{name}"] = Range(low, high, bool(f.metadata.get("exclusive_min")),
                                             bool(f.metadata.get("exclusive_max")))
    return out


def __getattr__(name: str) -> Any:
    if name == "RANGES":  # the table, built from the schema when first asked for (the schema imports this package)
        return ranges()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def range_of(key: str) -> Range | None:
    """The range of ``section.key`` (None: not a numeric setting)."""
    return ranges().get(key)


def describe_range(r: Range) -> str:
    """``">= 1 and <= 100"``, ``"> 0 and <= 1"``: how a refusal and the reference state a range."""
    def num(x: float) -> str:
        if float(x).is_integer() and abs(x) < 1e15:
            return f"{int(x):,}".replace(",", "_") if abs(x) >= 100_000 else str(int(x))
        return f"{x:g}"

    return (f"{'>' if r.exclusive_low else '>='} {num(r.lowest)} and {'<' if r.exclusive_high else '<='} "
            f"{num(r.highest)}")
