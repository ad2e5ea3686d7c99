"""Run one ``python -m streamembed ...`` command to completion, and read the daemon's JSON log lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

#: Longest any single short-lived command may take (import + work) before the test fails.
CLI_TIMEOUT = 60.0
#: The checkout under test: the root holding the ``streamembed`` package these tests belong to.
CHECKOUT = Path(__file__).resolve().parents[2]
#: Variables every child gets before its own (the broker tests' Kafka client library: tests/kafka/conftest.py).
SESSION_ENV: dict[str, str] = {}


def checkout_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on PYTHONPATH.

    A subprocess started in a temporary directory would otherwise import whichever ``streamembed`` is
    installed (another worktree's editable install, an old wheel), not the code under test.
    """
    rest = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(CHECKOUT) + (os.pathsep + rest if rest else "")
    return env


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ``STREAMEMBED_*`` variables, one BLAS thread, this checkout first on
    PYTHONPATH, plus ``env``."""
    full = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAMEMBED_")}  # names in any case
    full["OPENBLAS_NUM_THREADS"] = "1"
    checkout_path(full)
    full.update(SESSION_ENV)
    full.update(env or {})
    if env and "PYTHONPATH" in env:  # the caller's path after this checkout, not instead of it
        checkout_path(full)
    return full


def cli(*args: str | os.PathLike[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``python -m streamembed ARGS`` in ``cwd``; stdout and stderr captured as text."""
    return subprocess.run([sys.executable, "-m", "streamembed", *map(str, args)], cwd=cwd, env=clean_env(env),
                          capture_output=True, text=True, timeout=timeout)


def log_records(text: str) -> list[dict[str, Any]]:
    """The JSON log lines of a daemon log (``logging.format = json``); other lines are skipped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def no_traceback(text: str) -> bool:
    """True when ``text`` holds no Python traceback."""
    return "Traceback (most recent call last)" not in text


def rows_table(ids: list[str], A: np.ndarray) -> pa.Table:
    """An input table: string ids and a fixed-size float64 'dissimilarities' list column."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    return pa.table({"id": pa.array(ids, pa.string()),
                     "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A.reshape(-1)), A.shape[1])})
