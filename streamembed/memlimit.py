"""How much memory this process may use, and what a file read may take of it.

The limit is the smallest of: the machine's memory (``MemTotal``), the
process's memory cgroup and its ancestors (cgroup v2 ``memory.max``, v1
``memory.limit_in_bytes``; a systemd unit's ``MemoryMax=`` is one), and the
address-space limit (``RLIMIT_AS``, ``ulimit -v``). Whatever cannot be read
is left out; on a system where nothing can, the limit is unknown (None).

:func:`read_budget` is what the file readers may hold of one input file at
once (``stream.readers``: a file up to this size is read into memory whole,
a larger one is streamed a row group or record batch at a time): a
sixteenth of the limit, between 16 MiB and 1 GiB. So the size of a read
follows the memory limit, never the file size: under a 1 GiB limit files
over 64 MiB are streamed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MemoryLimit", "memory_limit", "current_limit", "read_budget", "format_bytes", "READ_BUDGET_MIN",
           "READ_BUDGET_MAX"]

#: The read budget's bounds (bytes).
READ_BUDGET_MIN, READ_BUDGET_MAX = 16 << 20, 1 << 30
#: cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages); anything above this is no limit.
_UNLIMITED = 1 << 60


@dataclass(frozen=True)
class MemoryLimit:
    """``bytes`` the process may use, and ``source``: which limit it is (for messages)."""

    bytes: int
    source: str


def format_bytes(n: float) -> str:
    """``n`` bytes as "1.5 GiB" (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < _UNLIMITED else None


def _mem_total(proc: Path) -> int | None:
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_mounts(proc: Path) -> list[tuple[str, str, str, str]]:
    """(fs type, mount root, mount point, super options) of every cgroup mount."""
    out: list[tuple[str, str, str, str]] = []
    try:
        lines = (proc / "self" / "mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((tail[0], fields[3], fields[4], tail[2]))
    return out


def _cgroup_limit(proc: Path, root: str) -> tuple[int, str] | None:
    """The smallest memory limit of the process's cgroup and its ancestors, with the file that sets it."""
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None
    best: tuple[int, str] | None = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, cgpath = parts
        v2 = controllers == ""
        if not v2 and "memory" not in controllers.split(","):
            continue
        for fstype, mroot, mpoint, opts in _cgroup_mounts(proc):
            if v2 != (fstype == "cgroup2") or (not v2 and "memory" not in opts.split(",")):
                continue
            rel = os.path.relpath(cgpath, mroot) if cgpath.startswith(mroot) else cgpath.lstrip("/")
            top = Path(root + mpoint)
            d = top / ("" if rel == "." else rel)
            name = "memory.max" if v2 else "memory.limit_in_bytes"
            while True:
                value = _read_int(d / name)
                if value is not None and (best is None or value < best[0]):
                    best = (value, f"cgroup {d / name}")
                if d == top or top not in d.parents:
                    break
                d = d.parent
    return best


def memory_limit(proc: str | os.PathLike[str] = "/proc", root: str | os.PathLike[str] = "") -> MemoryLimit | None:
    """The smallest memory limit that applies to this process (see the module doc); None if none is known.

    ``proc`` and ``root`` (a prefix for the cgroup mount points) are for tests.
    """
    proc_path = Path(proc)
    found: list[tuple[int, str]] = []
    total = _mem_total(proc_path)
    if total is not None:
        found.append((total, "the machine's memory (MemTotal)"))
    cg = _cgroup_limit(proc_path, str(root))
    if cg is not None:
        found.append(cg)
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and 0 < soft < _UNLIMITED:
            found.append((int(soft), "the address-space limit (RLIMIT_AS, ulimit -v)"))
    except (ImportError, OSError, ValueError):
        pass
    if not found:
        return None
    value, source = min(found)
    return MemoryLimit(value, source)


#: memory_limit() as last read, and when (monotonic seconds): read at most once a minute.
_CACHE: tuple[float, MemoryLimit | None] | None = None
_CACHE_SECONDS = 60.0


def current_limit() -> MemoryLimit | None:
    """:func:`memory_limit`, read again at most once a minute (the readers ask once per file)."""
    global _CACHE
    now = time.monotonic()
    if _CACHE is None or now - _CACHE[0] > _CACHE_SECONDS:
        _CACHE = (now, memory_limit())
    return _CACHE[1]


def read_budget(limit: MemoryLimit | None = None) -> int:
    """Bytes of one input file the readers may hold at once: limit / 16, within [16 MiB, 1 GiB]."""
    limit = limit if limit is not None else current_limit()
    if limit is None:
        return READ_BUDGET_MAX
    return max(READ_BUDGET_MIN, min(READ_BUDGET_MAX, limit.bytes // 16))
