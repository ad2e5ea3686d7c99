"""README's commands run as written: the quick start on a fresh install, and "Your own data" verbatim.

The blocks are read from README.md itself, so an edit that breaks a recipe fails here.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.e2e.cli import CHECKOUT, clean_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

README = CHECKOUT / "README.md"
#: Upper bound on ``pip install .`` (builds the C kernels) plus the first batch of ``streamembed run``.
QUICK_START_TIMEOUT = 300.0
RECIPE_TIMEOUT = 240.0


def _sh_blocks(section: str | None = None) -> list[str]:
    """The ```sh blocks of README.md, or of one ``## section`` of it."""
    text = README.read_text()
    if section is not None:
        m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## )", text, flags=re.S | re.M)
        assert m, f"README.md has no section '## {section}'"
        text = m.group(1)
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def _quick_start_command(comment: str) -> str:
    """The command under the quick start's comment line that starts with ``comment``."""
    lines = _sh_blocks()[0].splitlines()
    for i, line in enumerate(lines):
        if line.startswith(comment):
            return lines[i + 1]
    raise AssertionError(f"README's first block has no comment line starting {comment!r}")


def _shim_path(tmp_path: Path) -> str:
    """A PATH whose ``streamembed`` runs this checkout (``python -m streamembed``), before anything installed."""
    bin_dir = tmp_path / "shim-bin"
    bin_dir.mkdir()
    shim = bin_dir / "streamembed"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m streamembed "$@"\n')
    shim.chmod(0o755)
    python = bin_dir / "python"  # the recipe's "python" is this interpreter, with numpy, scipy and pyarrow
    python.symlink_to(sys.executable)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def test_your_own_data_recipe_runs_verbatim(tmp_path: Path) -> None:
    blocks = _sh_blocks("Your own data")
    assert blocks, "README's 'Your own data' has no sh block"
    env = clean_env({"PATH": _shim_path(tmp_path), "STREAMEMBED_METRICS__PORT": "0"})
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=RECIPE_TIMEOUT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    D = np.load(tmp_path / "D.npy")
    landmarks = np.loadtxt(tmp_path / "landmarks.txt", dtype=int)
    rows = np.setdiff1d(np.arange(len(D)), landmarks)
    assert len(set(landmarks.tolist())) == len(landmarks) > 0
    embedded = pq.read_table(tmp_path / "embedded.parquet")
    assert sorted(embedded.column("id").to_pylist()) == sorted(f"obj{r}" for r in rows)
    parts = sorted((tmp_path / "streamembed-out" / "embeddings").glob("part-*.parquet"))
    daemon_ids = [i for p in parts for i in pq.read_table(p).column("id").to_pylist()]
    assert sorted(daemon_ids) == sorted(f"obj{r}" for r in rows)
    assert not list((tmp_path / "streamembed-out").glob("dead-letter/*"))
    # toy data are 5-D Euclidean and the map keeps 2 axes: placements must be finite and carry the residual
    y = np.asarray(embedded.column("y").to_pylist())
    assert y.shape == (len(rows), 2) and np.isfinite(y).all()


def _copy_of_checkout(dest: Path) -> Path:
    """The checkout's sources without build products or run output, as a fresh clone would have them."""
    ignore = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", "*.so", "streamembed-out",
                                    ".pytest_cache", ".hypothesis", ".ruff_cache")
    shutil.copytree(CHECKOUT, dest, ignore=ignore)
    return dest


def test_quick_start_installs_and_runs_the_default_job(tmp_path: Path) -> None:
    command = _quick_start_command("# 1.")
    assert command.startswith("pip install . && streamembed run"), command
    repo = _copy_of_checkout(tmp_path / "repo")
    venv = tmp_path / "venv"
    # a venv that sees this interpreter's packages: pip resolves the dependencies without downloading them
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMEMBED_", "PYTHON", "PIP_"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               STREAMEMBED_METRICS__PORT="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.Popen(["bash", "-c", command], cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, text=True)
    embeddings = repo / "streamembed-out" / "embeddings"
    deadline = time.monotonic() + QUICK_START_TIMEOUT
    try:
        while time.monotonic() < deadline and proc.poll() is None and not list(embeddings.glob("part-*.parquet")):
            time.sleep(0.5)
        assert proc.poll() is None, f"exited early with {proc.returncode}: {proc.stdout.read()[-3000:]}"
        assert list(embeddings.glob("part-*.parquet")), "no output within the time limit"
        installed = subprocess.run([str(venv / "bin" / "python"), "-c", "import streamembed; print(streamembed.__file__)"],
                                   cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert str(venv) in installed.stdout, installed.stdout + installed.stderr  # the run used the fresh install
        os.killpg(proc.pid, signal.SIGINT)  # "Ctrl-C stops it"
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    table = pq.read_table(sorted(embeddings.glob("part-*.parquet"))[0])
    assert table.num_rows > 0 and table.schema.metadata[b"streamembed.schema_version"] == b"1"
