"""The default run keeps its generator-fitted model where `model info` and `plot map` find it."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamembed.cli import main as cli_main
from streamembed.daemon.app import run_daemon
from streamembed.config import load_config
from streamembed.ops.metrics import Metrics
from streamembed.model_io import load_model


def _cfg(root: Path, **more: object):
    return load_config(None, environ={}, overrides={
        "output.root": str(root), "metrics.enabled": False, "run.max_batches": 2, "generator.rate": 0.0,
        "source.batch_rows": 256, "drift.enabled": False, **more})


def test_the_default_run_saves_its_model_for_model_info_and_plot_map(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("matplotlib")
    root = tmp_path / "streamembed-out"
    assert run_daemon(_cfg(root), metrics=Metrics()) == 0
    saved = root / "model.npz"
    model = load_model(saved)
    capsys.readouterr()
    assert cli_main(["model", "info", str(saved)]) == 0
    assert f"lineage {model.lineage}" in capsys.readouterr().out
    png = tmp_path / "map.png"
    assert cli_main(["plot", "map", "-m", str(saved), "-e", str(root / "embeddings"), "-o", str(png)]) == 0
    assert png.stat().st_size > 1000
    # a restart of the same run fits the same map and keeps the same file; --fresh archives it with the run
    assert run_daemon(_cfg(root), metrics=Metrics()) == 0
    assert load_model(saved).lineage == model.lineage
    assert run_daemon(_cfg(root, **{"run.fresh": True}), metrics=Metrics()) == 0
    (previous,) = root.glob("previous-*")
    assert (previous / "model.npz").is_file() and saved.is_file()


def test_save_path_none_saves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "out"
    assert run_daemon(_cfg(root, **{"model.save_path": "none"}), metrics=Metrics()) == 0
    assert not (root / "model.npz").exists()
