"""Field helpers of the configuration schema: a setting's default, documentation, choices and range as field metadata.

``config.load`` checks values by this metadata alone (type, choices, ``fold_case``, ``words``, range);
``config.render`` prints ``doc``, ``choices`` and the range. Every numeric setting states its whole range here,
both ends (``min``, ``max``): the field is the one statement of it, and ``config.ranges`` reads its table from
the fields. Bounds are what the code can use, not what is wise (a duration of ``1e-320`` s or a row count of
``10**20`` is refused, a merely unusual value is not): durations at most ``MAX_DURATION_SECONDS``, sizes in
bytes at most ``MAX_BYTES``, counts of rows or objects at most ``MAX_ROWS``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from streamembed.core.options import OPTIONS, StrOptions

__all__ = ["MAX_DURATION_SECONDS", "MAX_BYTES", "MAX_ROWS", "MAX_INT32", "setting", "seconds", "milliseconds",
           "option"]

#: The longest duration any setting may name (seconds; ``*_ms`` settings in milliseconds): 23 days, below
#: the 2^31 ms that Kafka's protocol and ``threading`` waits can take.
MAX_DURATION_SECONDS = 2_000_000
#: The largest size in bytes any setting may name (1 TiB).
MAX_BYTES = 1 << 40
#: The largest count of rows or objects any setting may name (10^12).
MAX_ROWS = 10**12
#: Kafka's protocol carries sizes and counts as signed 32-bit integers.
MAX_INT32 = 2**31 - 1


def setting(default: Any, doc: str, *, choices: tuple[Any, ...] | None = None, min: float | None = None,
            max: float | None = None, exclusive_min: bool = False, secret: bool = False, fold_case: bool = False,
            words: tuple[str, ...] = (), off: Any = None, exclusive_max: bool = False) -> Any:
    """A field: its default, documentation, choices, range [min, max] (exclusive_min / exclusive_max: that end
    itself excluded),
    secret (redacted when printed), fold_case (a string choice is matched in any case and stored as the
    choice is spelled), for a ``str | int`` field the words it takes besides integers, and ``off``: the value
    that switches it off (0, "none"), which the core receives as None (``config.core_args``; None: no such
    value)."""
    meta = {"doc": doc, "choices": choices, "min": min, "max": max, "exclusive_min": exclusive_min,
            "exclusive_max": exclusive_max, "secret": secret, "fold_case": fold_case, "words": words, "off": off}
    if isinstance(default, dict):  # a table of free-form settings ([kafka.client])
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


def seconds(default: float, doc: str, *, max: float = MAX_DURATION_SECONDS, **kw: Any) -> Any:
    """A duration in seconds: at most ``MAX_DURATION_SECONDS`` unless a lower ``max`` is given."""
    return setting(default, doc, max=max, **kw)


def milliseconds(default: int, doc: str, *, max: float = MAX_DURATION_SECONDS * 1000, **kw: Any) -> Any:
    """A duration in milliseconds: at most ``MAX_DURATION_SECONDS`` seconds unless a lower ``max`` is given."""
    return setting(default, doc, max=max, **kw)


def option(name: str, doc: str, **kw: Any) -> Any:
    """A field for a ``core.options`` option: its default and (a string option's) choices from the table."""
    opt = OPTIONS[name]
    if isinstance(opt.constraint, StrOptions):
        kw.setdefault("choices", opt.values)
    return setting(opt.default, doc, **kw)
