"""Stopping a child process the tests started (the broker, Chromium, Prometheus)."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM ``proc``, SIGKILL it if it has not exited after ``timeout`` seconds, and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    else:
        proc.wait()
