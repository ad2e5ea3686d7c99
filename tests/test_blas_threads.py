"""``embed`` runs on one BLAS thread from its first moment; other commands, and a user's own choice, are left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamembed.blas_threads import THREAD_VARIABLES, one_blas_thread_for

TREE = Path(__file__).resolve().parents[1]


def _child(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    """In a fresh interpreter: call the hook as the entry points do, then load numpy and count BLAS threads."""
    probe = ("import json, os, sys\n"
             "from streamembed.blas_threads import one_blas_thread_for\n"
             f"did = one_blas_thread_for({argv!r})\n"
             "import numpy\n"
             "from threadpoolctl import threadpool_info\n"
             "blas = [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
             "print(json.dumps({'did': did, 'var': os.environ.get('OPENBLAS_NUM_THREADS'), 'blas': blas}))\n")
    r = subprocess.run([sys.executable, "-c", probe], cwd=TREE, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def _env_without_thread_counts() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}


def test_embed_loads_blas_with_one_thread() -> None:
    got = _child(["embed", "in.arrows", "-m", "model.npz", "-o", "out.parquet"], _env_without_thread_counts())
    assert got["did"] is True and got["var"] == "1"
    assert got["blas"] and set(got["blas"]) == {1}  # type: ignore[arg-type]


@pytest.mark.parametrize("argv", [["run"], ["fit", "--dissimilarities", "D.npy"], ["refit"], [], ["--help"]])
def test_other_commands_keep_blas_s_default(argv: list[str]) -> None:
    got = _child(argv, _env_without_thread_counts())
    assert got["did"] is False and got["var"] is None


def test_a_users_own_thread_count_is_kept() -> None:
    env = _env_without_thread_counts() | {"OMP_NUM_THREADS": "2"}
    got = _child(["embed"], env)
    assert got["did"] is False and got["var"] is None
    env = _env_without_thread_counts() | {"OPENBLAS_NUM_THREADS": "2"}
    assert _child(["embed"], env)["var"] == "2"


def test_nothing_is_set_once_numpy_is_loaded() -> None:
    """Too late: OpenBLAS read its variables when numpy loaded it."""
    import numpy  # noqa: F401 - loaded, as in any process that imported the package's core

    env: dict[str, str] = {}
    assert not one_blas_thread_for(["embed"], env) and env == {}


def test_both_entry_points_choose_before_the_command_line_is_imported() -> None:
    for name in ("__main__.py", "entry.py"):
        text = (TREE / "streamembed" / name).read_text()
        assert 0 <= text.index("one_blas_thread_for(sys.argv[1:])") < text.index("from streamembed.cli import main")
