"""Structured logging: plain text or one JSON object per line, on stderr.

JSON lines carry ``ts`` (ISO 8601 UTC), ``level``, ``logger``, ``msg`` and
every ``extra={...}`` field given to the logging call, e.g.
``log.info("metrics server listening", extra={"port": 9108})``.

Whatever a message or field holds (a file name is chosen by whoever wrote
the file), one log call is one line, and no control character reaches the
terminal raw: JSON escapes them itself (``\n``, ``\u001b``); the text format
writes them as Python escapes (:func:`escape`: ``\n``, ``\x1b``,
``\u2028``), and indents every line of a traceback with ``"  | "``, so
nothing in an exception's message can begin a line of its own.

:class:`RateLimitedLog` reports a flood of one kind of event (refused
connections) in at most one line per interval.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections import Counter
from datetime import datetime, UTC
from typing import Any

__all__ = ["JsonFormatter", "setup_logging", "escape", "RateLimitedLog"]

#: C0 controls but tab, DEL, C1 controls, the Unicode line and paragraph separators, bidi overrides.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escaped(m: re.Match[str]) -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with control characters written as escapes (``\n``, ``\x1b``, ``\u2028``): one line, inert."""
    return _CONTROL.sub(_escaped, text)

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


class _TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message>  key=value ...``, every field escaped (one line per call)."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape(record.getMessage())
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        base = self.formatMessage(record)
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
        if extra:
            base += "  " + " ".join(f"{escape(str(k))}={escape(str(v))}" for k, v in extra.items())
        trace = self.formatException(record.exc_info) if record.exc_info else ""
        if record.stack_info:
            trace = (trace + "\n" if trace else "") + self.formatStack(record.stack_info)
        if trace:
            base += "".join("\n  | " + escape(line) for line in trace.splitlines())
        return base


def setup_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Configure the ``streamembed`` logger (idempotent)."""
    logger = logging.getLogger("streamembed")
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


class RateLimitedLog:
    """At most one line per ``every`` seconds about a flood of events: the first at once, the rest summed.

    ``event(kind, message)`` logs ``message`` when nothing was logged for
    ``every`` seconds, else counts it; ``tick()`` (called regularly) logs the
    counts once ``every`` seconds have passed: "<what>: 57 in the last 10 s
    (slow 40, per_client 17); the last: <message>".
    """

    def __init__(self, logger: logging.Logger, every: float = 10.0, *, what: str = "events",
                 level: int = logging.WARNING) -> None:
        self.logger, self.every, self.what, self.level = logger, float(every), what, level
        self.counts: Counter[str] = Counter()
        self.total: Counter[str] = Counter()  # every event since the start, by kind
        self.lines = 0
        self._last_line = -float("inf")
        self._since = 0.0
        self._example = ""

    def event(self, kind: str, message: str) -> None:
        now = time.monotonic()
        self.total[kind] += 1
        if now - self._last_line >= self.every and not self.counts:
            self._emit(message, {kind: 1}, now)
            return
        if not self.counts:
            self._since = now
        self.counts[kind] += 1
        self._example = message

    def tick(self) -> None:
        now = time.monotonic()
        if self.counts and now - self._last_line >= self.every:
            n = sum(self.counts.values())
            kinds = ", ".join(f"{k} {v}" for k, v in self.counts.most_common())
            self._emit(f"{self.what}: {n} in the last {now - self._since:.0f} s ({kinds}); the last: {self._example}",
                       dict(self.counts), now)
            self.counts.clear()

    def _emit(self, message: str, counts: dict[str, int], now: float) -> None:
        self.logger.log(self.level, "%s", message, extra={"counts": counts})
        self.lines += 1
        self._last_line = self._since = now
