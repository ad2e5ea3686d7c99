"""Run a command as the real unprivileged user ``nobody`` (the tests run as root, whom ``chmod 000`` does not stop).

The interpreter and the checkout may sit below directories that only root may
enter (``/root/.pyenv``, pytest's ``/tmp/pytest-of-root``). The command runs in
a private mount namespace of its own where each such directory on the way to
the paths it needs is shown as a tmpfs holding just the entries on those ways
(bind mounts of the real ones); the host's mounts and permissions are never
changed, and the namespace ends with the process. Then ``setpriv`` drops to
nobody:nogroup and execs the command, so the process started is the command
itself (its pid is the daemon's).
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from collections.abc import Iterable

__all__ = ["NOBODY", "unavailable", "Nobody"]


def _ids() -> tuple[int, int]:
    uid = pwd.getpwnam("nobody").pw_uid
    for group in ("nogroup", "nobody"):
        try:
            return uid, grp.getgrnam(group).gr_gid
        except KeyError:
            continue
    return uid, pwd.getpwnam("nobody").pw_gid


NOBODY = _ids()


def unavailable() -> str | None:
    """Why commands cannot be run as nobody here (None: they can)."""
    if os.geteuid() != 0:
        return "the tests do not run as root (they cannot switch to nobody)"
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) is not installed"
    return None


def _closed(d: Path) -> bool:
    return not (os.stat(d).st_mode & 0o001)


class Nobody:
    """``wrap(argv)``: argv as nobody, able to reach ``reachable`` (directories) and this interpreter.

    Use as a context manager (it removes its scratch directory).
    """

    def __init__(self, reachable: Iterable[Path]) -> None:
        self.stash = Path(tempfile.mkdtemp(prefix="streamembed-nobody-", dir="/tmp"))
        need = [Path(sys.prefix).resolve(), Path(sys.executable).resolve().parent, *(Path(p).resolve()
                                                                                     for p in reachable)]
        plan: dict[Path, set[str]] = {}
        for p in need:
            parts = p.parts
            for i in range(1, len(parts)):
                d = Path(*parts[:i])
                if _closed(d):
                    plan.setdefault(d, set()).add(parts[i])
        lines = ["set -e"]
        for n, d in enumerate(sorted(plan, key=lambda x: len(x.parts))):
            s = self.stash / str(n)
            lines += [f"mkdir -p {shlex.quote(str(s))}", f"mount --bind {shlex.quote(str(d))} {shlex.quote(str(s))}",
                      f"mount -t tmpfs -o mode=0755,size=64k streamembed-test {shlex.quote(str(d))}"]
            for c in sorted(plan[d]):
                lines += [f"mkdir {shlex.quote(str(d / c))}",
                          f"mount --bind {shlex.quote(str(s / c))} {shlex.quote(str(d / c))}"]
        uid, gid = NOBODY
        lines.append(f'exec setpriv --reuid={uid} --regid={gid} --clear-groups --no-new-privs -- "$@"')
        self.script = "\n".join(lines)

    def wrap(self, argv: list[str]) -> list[str]:
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", self.script, "sh", *argv]

    def give(self, *paths: Path) -> None:
        """Make ``paths`` (created as root) nobody's."""
        uid, gid = NOBODY
        for p in paths:
            os.chown(p, uid, gid)

    def close(self) -> None:
        shutil.rmtree(self.stash, ignore_errors=True)

    def __enter__(self) -> Nobody:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
