"""Start the real CLI as a subprocess and talk to its ops endpoints."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from collections.abc import Callable

import pytest

from .cli import CHECKOUT, clean_env


#: The checkout the tests import (a worktree, or CI's clone): its code is what the children must run.
SOURCE_ROOT = CHECKOUT


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a streamembed child process (``cli.clean_env``: no STREAMEMBED_* variables of
    this process, one BLAS thread, this checkout first on PYTHONPATH), plus ``env``."""
    return clean_env(env)


class Daemon:
    """``python -m streamembed run`` with STREAMEMBED_* variables; stderr goes to a file.

    ``wrap`` turns the command line into another (e.g. ``unprivileged.as_nobody``: the same
    command as user nobody); the process started is still the daemon itself (the wrapper execs).
    """

    def __init__(self, workdir: Path, env: dict[str, str], args: tuple[str, ...] = (),
                 wrap: Callable[[list[str]], list[str]] | None = None) -> None:
        self.workdir = workdir
        self.port_file = workdir / f"port-{time.monotonic_ns()}"
        full = child_env({"STREAMEMBED_METRICS__PORT": "0", "STREAMEMBED_METRICS__PORT_FILE": str(self.port_file),
                          "OPENBLAS_NUM_THREADS": "1"})
        full.update(env)
        self.env = full
        self.log_path = workdir / f"daemon-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - the child's log stays open for its lifetime
        argv = [sys.executable, "-m", "streamembed", "run", *args]
        self.proc = subprocess.Popen(wrap(argv) if wrap is not None else argv, cwd=workdir, env=full,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.port: int | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_port(self, timeout: float = 20.0) -> int:
        wait_for(lambda: self.port_file.exists() and self.port_file.read_text().strip() != "" or self.dead(),
                 timeout, "the metrics port file", self)
        if self.dead():
            pytest.fail(f"daemon exited early ({self.proc.returncode}):\n{self.log()}")
        self.port = int(self.port_file.read_text())
        return self.port

    def get(self, path: str) -> tuple[int, str]:
        assert self.port is not None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except urllib.error.URLError:
            if self.dead():  # the daemon is gone: say how it ended, not only that its port is closed
                pytest.fail(f"GET {path}: the daemon exited ({self.proc.returncode}):\n{self.log()}")
            raise

    def metric(self, name: str, labels: str = "") -> float:
        """The value of one sample (0 if absent)."""
        _, text = self.get("/metrics")
        pat = re.escape(name + (("{" + labels + "}") if labels else "")) + r" ([0-9.e+-]+)$"
        m = re.search(pat, text, flags=re.M)
        return float(m.group(1)) if m else 0.0

    def dead(self) -> bool:
        return self.proc.poll() is not None

    def terminate(self, timeout: float = 20.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def wait(self, timeout: float = 30.0) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"daemon did not exit within {timeout} s:\n{self.log()}")
        self._log.close()
        return rc

    def close(self) -> None:
        if not self.dead():
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def wait_for(pred: Callable[[], bool], timeout: float, what: str, daemon: Daemon | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    extra = f"\n--- daemon log ---\n{daemon.log()}" if daemon is not None else ""
    pytest.fail(f"timed out after {timeout} s waiting for {what}{extra}")


def directory_env(indir: Path, outroot: Path, model: Path, **more: str) -> dict[str, str]:
    env = {
        "STREAMEMBED_SOURCE__KIND": "directory",
        "STREAMEMBED_MODEL__PATH": str(model),
        "STREAMEMBED_DIRECTORY__PATH": str(indir),
        "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0",
        "STREAMEMBED_DIRECTORY__POLL_SECONDS": "0.05",
        "STREAMEMBED_OUTPUT__ROOT": str(outroot),
        "STREAMEMBED_OUTPUT__ROLL_SECONDS": "0.5",
        "STREAMEMBED_SOURCE__BATCH_ROWS": "64",
        "STREAMEMBED_LOGGING__FORMAT": "json",
        # an unfinished tail (truncated Arrow stream, empty file) becomes a dead letter after this long
        "STREAMEMBED_DIRECTORY__INCOMPLETE_SECONDS": "2",
    }
    env.update(more)
    return env
