"""Start-up cost by construction: what ``embed`` and ``run`` import before their first row.

A whole ``embed`` process of 300,000 rows spent about half its CPU importing
(docs/throughput.md, "Start-up"): scipy.linalg, scipy.stats, scipy.optimize and
scipy.spatial came with the estimator and the core's eigensolvers, 0.4-0.9
CPU-s that the one-shot path never uses. Each command runs here in a fresh
interpreter on a tiny input, and the modules it loaded are listed at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamembed

TREE = Path(streamembed.__file__).resolve().parents[1]

#: Never needed to embed rows with a fitted model, nor by the directory daemon without metrics (the drift
#: detector's calibration takes its t and χ² quantiles from core.quantiles: tests/core/test_quantiles.py).
HEAVY = ("scipy.linalg", "scipy.stats", "scipy.optimize", "scipy.spatial", "scipy.sparse", "scipy.special", "sklearn",
         "kafka", "matplotlib", "dask", "distributed")

#: Runs the CLI in this interpreter and writes the loaded module names to argv[1] at exit.
_PROBE = r"""
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["streamembed", *sys.argv[2:]]
runpy.run_module("streamembed", run_name="__main__")
"""


def _loaded(tmp_path: Path, *args: str, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> set[str]:
    out = tmp_path / "modules.json"
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    full["PYTHONPATH"] = os.pathsep.join([str(TREE), full.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    full.update(env or {})
    r = subprocess.run([sys.executable, "-c", _PROBE, str(out), *args], env=full, cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode in ok, r.stderr[-2000:]
    return set(json.loads(out.read_text()))


def _heavy(modules: set[str], names: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in names))


@pytest.fixture(scope="module")
def model_and_input(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from streamembed import LandmarkMDS

    base = tmp_path_factory.mktemp("imports")
    rng = np.random.default_rng(0)
    L = rng.standard_normal((12, 3))
    D = np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1))
    model = base / "model.npz"
    LandmarkMDS(n_components=2).fit(D).save(model)
    X = rng.standard_normal((50, 3))
    A = np.sqrt(((X[:, None] - L[None]) ** 2).sum(-1)).astype(np.float32)
    table = pa.table({"id": [f"o{i}" for i in range(50)],
                      "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A.ravel()), 12)})
    src = base / "in.arrows"
    with pa.OSFile(str(src), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return model, src


def test_import_streamembed_is_light(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "--version", ok=(0, 2))
    assert _heavy(loaded, HEAVY + ("pyarrow", "pandas", "scipy")) == []


def test_embed_imports_no_scipy_solver_nor_transport(tmp_path: Path, model_and_input: tuple[Path, Path]) -> None:
    model, src = model_and_input
    loaded = _loaded(tmp_path, "embed", str(src), "-m", str(model), "-o", str(tmp_path / "out.parquet"),
                     "--progress", "never")
    assert (tmp_path / "out.parquet").exists()
    assert _heavy(loaded, HEAVY + ("scipy", "prometheus_client", "http.server", "pandas")) == []


@pytest.mark.parametrize(("layout", "version"), [("fixed_size_list", "1"), ("fixed_size_binary", "2")])
def test_embed_of_parquet_imports_no_pandas(tmp_path: Path, model_and_input: tuple[Path, Path], layout: str,
                                            version: str) -> None:
    """pyarrow imports pandas (0.25 CPU-s) on its first ``pa.array``, ``pa.scalar`` or ``to_numpy``: none on the
    path from a Parquet file to either output version (docs/throughput.md, "Start-up")."""
    model, src = model_and_input
    table = pa.ipc.open_stream(pa.memory_map(str(src))).read_all()
    if layout == "fixed_size_binary":
        A = np.asarray(table.column("dissimilarities").combine_chunks().flatten())
        fsb = pa.FixedSizeBinaryArray.from_buffers(pa.binary(A.itemsize * 12), table.num_rows,
                                                   [None, pa.py_buffer(A.tobytes())])
        table = table.set_column(1, "dissimilarities", fsb)
    parquet = tmp_path / "in.parquet"
    pq.write_table(table, parquet)
    out = tmp_path / "out.parquet"
    loaded = _loaded(tmp_path, "embed", str(parquet), "-m", str(model), "-o", str(out), "--progress", "never",
                     "--schema-version", version)
    assert pq.read_table(out).num_rows == table.num_rows
    assert _heavy(loaded, ("pandas",)) == []


def test_directory_daemon_imports_no_scipy_solver_nor_kafka(tmp_path: Path, model_and_input: tuple[Path, Path]) -> None:
    model, src = model_and_input
    (tmp_path / "in").mkdir()
    os.link(src, tmp_path / "in" / "in.arrows")
    env = {"STREAMEMBED_MODEL__PATH": str(model), "STREAMEMBED_SOURCE__KIND": "directory",
           "STREAMEMBED_DIRECTORY__PATH": str(tmp_path / "in"), "STREAMEMBED_OUTPUT__ROOT": str(tmp_path / "out"),
           "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0", "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true",
           "STREAMEMBED_METRICS__ENABLED": "false", "STREAMEMBED_LOGGING__LEVEL": "WARNING"}
    loaded = _loaded(tmp_path, "run", env=env)
    assert list((tmp_path / "out").rglob("*.parquet")), "the daemon wrote no output"
    assert _heavy(loaded, HEAVY + ("pandas",)) == []
