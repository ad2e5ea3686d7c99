"""README's commands run as written: the quick start in a fresh venv, then "Your own data" verbatim in that venv.

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from streamembed.stream.output import y_matrix

from tests.e2e.cli import CHECKOUT


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
    """The command under the quick start's comment line that starts with ``comment`` (after its comment lines)."""
    lines = _sh_blocks()[0].splitlines()
    for i, line in enumerate(lines):
        if line.startswith(comment):
            return next(ln for ln in lines[i + 1:] if not ln.startswith("#"))
    raise AssertionError(f"README's first block has no comment line starting {comment!r}")


def _extras_with(package: str) -> set[str]:
    """The optional-dependency groups of pyproject.toml that bring ``package``."""
    import tomllib

    extras = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {name for name, reqs in extras.items() if name != "test" and any(r.startswith(package) for r in reqs)}


def test_the_quick_start_installs_what_each_step_runs_in_the_order_given() -> None:
    """Issue 35: step 3 (``plot map``) failed right after step 1 on a fresh machine: ``pip install .`` does not bring
    matplotlib. Whatever a step runs is installed by it or by a step before it (step 2 is the test suite's install,
    which a user following 1 then 3 has not run). The venv of the tests below sees this interpreter's packages, so
    only this check can see a missing install."""
    plot = _extras_with("matplotlib")
    assert plot, "no extra brings matplotlib"
    installed = " ".join(_quick_start_command(step) for step in ("# 1.", "# 3."))
    assert any(f"'.[{extra}]'" in installed or f".[{extra}]" in installed for extra in plot), installed
    step3 = _quick_start_command("# 3.")
    assert step3.index("pip install") < step3.index("plot map"), step3


def _copy_of_checkout(dest: Path) -> Path:
    """The checkout's sources without build products or run output, as a fresh clone would have them."""
    ignore = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", "*.so", "streamembed-out",
                                    ".pytest_cache", ".hypothesis", ".ruff_cache")
    shutil.copytree(CHECKOUT, dest, ignore=ignore)
    return dest


@dataclass
class QuickStart:
    venv: Path
    repo: Path
    returncode: int
    output: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> QuickStart:
    """README's first command, verbatim, in a copy of the checkout with a fresh venv active; Ctrl-C once the
    first Parquet file is out."""
    command = _quick_start_command("# 1.")
    assert command.startswith("pip install . && streamembed run"), command
    tmp = tmp_path_factory.mktemp("quick-start")
    repo = _copy_of_checkout(tmp / "repo")
    venv = tmp / "venv"
    # a venv that sees this interpreter's packages: pip resolves the dependencies without downloading them
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMEMBED_", "PYTHON", "PIP_"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               STREAMEMBED_METRICS__PORT="0", PIP_DISABLE_PIP_VERSION_CHECK="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(["bash", "-c", command], cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, text=True)
    embeddings = repo / "streamembed-out" / "embeddings"
    deadline = time.monotonic() + QUICK_START_TIMEOUT
    try:
        while time.monotonic() < deadline and proc.poll() is None and not list(embeddings.glob("part-*.parquet")):
            time.sleep(0.5)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # "Ctrl-C stops it"
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return QuickStart(venv, repo, proc.returncode, out, env)


@pytest.mark.e2e
@pytest.mark.slow
def test_quick_start_installs_and_runs_the_default_job(quick_start: QuickStart, tmp_path: Path) -> None:
    embeddings = quick_start.repo / "streamembed-out" / "embeddings"
    parts = sorted(embeddings.glob("part-*.parquet"))
    assert parts, f"no output within {QUICK_START_TIMEOUT:.0f} s: {quick_start.output[-3000:]}"
    assert quick_start.returncode == 0, quick_start.output[-3000:]
    installed = subprocess.run([str(quick_start.venv / "bin" / "python"), "-c",
                                "import streamembed; print(streamembed.__file__)"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert str(quick_start.venv) in installed.stdout, installed.stdout + installed.stderr  # the fresh install ran
    table = pq.read_table(parts[0])
    assert table.num_rows > 0 and table.schema.metadata[b"streamembed.schema_version"] == b"2"  # the default


@pytest.mark.e2e
@pytest.mark.slow
def test_the_quick_start_run_keeps_its_model_for_model_info_and_plot_map(quick_start: QuickStart) -> None:
    """README's third quick-start command, verbatim, on the first one's run: its own model and its output."""
    command = _quick_start_command("# 3.")
    assert "streamembed-out/model.npz" in command and "plot map" in command, command
    (quick_start.repo / "map.png").unlink(missing_ok=True)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", command], check=False, cwd=quick_start.repo,
                       env=quick_start.env, capture_output=True, text=True, timeout=RECIPE_TIMEOUT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "landmarks" in r.stdout and "lineage" in r.stdout
    assert (quick_start.repo / "map.png").stat().st_size > 1000


@pytest.mark.e2e
@pytest.mark.slow
def test_your_own_data_recipe_runs_verbatim_in_the_fresh_venv(quick_start: QuickStart, tmp_path: Path) -> None:
    blocks = _sh_blocks("Your own data")
    assert blocks, "README's 'Your own data' has no sh block"
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=tmp_path, env=quick_start.env,
                       capture_output=True, text=True, timeout=RECIPE_TIMEOUT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    lines = (tmp_path / "objects.txt").read_text().splitlines()
    ids = sorted(f"obj{i}" for i in range(len(lines)))
    assert len(lines) > 1000
    landmarks = pq.read_table(tmp_path / "landmarks.parquet")
    assert landmarks.schema.names == ["id", "object"] and landmarks.num_rows == 200
    assert set(landmarks.column("object").to_pylist()) <= set(lines)
    embedded = pq.read_table(tmp_path / "embedded.parquet")
    assert sorted(embedded.column("id").to_pylist()) == ids
    parts = sorted((tmp_path / "streamembed-out" / "embeddings").glob("part-*.parquet"))
    daemon_ids = [i for p in parts for i in pq.read_table(p).column("id").to_pylist()]
    assert sorted(daemon_ids) == ids
    assert not list((tmp_path / "streamembed-out").glob("dead-letter/*"))
    rows = pq.read_table(tmp_path / "incoming" / "objects.parquet")
    assert set(rows.column("landmark_version").to_pylist()) == {1}  # the kit tags every row
    y = y_matrix(embedded)
    assert y.shape == (len(lines), 2) and np.isfinite(y).all()
