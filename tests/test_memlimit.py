"""The process's memory limit (machine, cgroup v1/v2, RLIMIT_AS) and the read budget that follows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamembed import memlimit
from streamembed.memlimit import MemoryLimit, format_bytes, memory_limit, read_budget

GIB = 1 << 30


def _fake(tmp_path: Path, cgroup: str, mountinfo: str, files: dict[str, str], mem_total_kib: int) -> tuple[Path, Path]:
    proc, root = tmp_path / "proc", tmp_path / "root"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal:       {mem_total_kib} kB\nMemFree: 1 kB\n")
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "self" / "mountinfo").write_text(mountinfo)
    for rel, text in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return proc, root


def test_cgroup_v1_limit_of_the_group_or_an_ancestor(tmp_path: Path) -> None:
    proc, root = _fake(
        tmp_path, "4:memory:/outer/inner\n1:cpu:/\n",
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n",
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",
         "/sys/fs/cgroup/memory/outer/memory.limit_in_bytes": str(GIB),
         "/sys/fs/cgroup/memory/outer/inner/memory.limit_in_bytes": "9223372036854771712"},
        mem_total_kib=16 * 1024 * 1024)
    limit = memory_limit(proc, root)
    assert limit is not None and limit.bytes == GIB and "outer/memory.limit_in_bytes" in limit.source
    assert read_budget(limit) == 64 << 20  # a sixteenth


def test_cgroup_v2_memory_max_and_the_machine(tmp_path: Path) -> None:
    proc, root = _fake(
        tmp_path, "0::/system.slice/streamembed.service\n",
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
        {"/sys/fs/cgroup/system.slice/streamembed.service/memory.max": str(2 * GIB),
         "/sys/fs/cgroup/system.slice/memory.max": "max"},
        mem_total_kib=64 * 1024 * 1024)
    limit = memory_limit(proc, root)
    assert limit is not None and limit.bytes == 2 * GIB and "streamembed.service/memory.max" in limit.source
    # no cgroup limit: the machine's memory
    (root / "sys/fs/cgroup/system.slice/streamembed.service/memory.max").write_text("max\n")
    limit = memory_limit(proc, root)
    assert limit is not None and limit.bytes == 64 * GIB and "MemTotal" in limit.source
    assert read_budget(limit) == memlimit.READ_BUDGET_MAX  # at most 1 GiB
    assert read_budget(MemoryLimit(100 << 20, "x")) == memlimit.READ_BUDGET_MIN  # at least 16 MiB


def test_nothing_readable_means_no_known_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda what: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert memory_limit(tmp_path / "none", tmp_path) is None
    assert read_budget(None) in (memlimit.READ_BUDGET_MAX, read_budget())  # falls back to the largest read


def test_rlimit_as_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda what: (3 * GIB, resource.RLIM_INFINITY))
    proc, root = _fake(tmp_path, "", "", {}, mem_total_kib=64 * 1024 * 1024)
    limit = memory_limit(proc, root)
    assert limit is not None and limit.bytes == 3 * GIB and "RLIMIT_AS" in limit.source


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B" and format_bytes(1536) == "1.5 KiB" and format_bytes(7.28 * 2**40) == "7.3 TiB"
