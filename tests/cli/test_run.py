"""``streamembed run``, in process: refusals before the daemon starts (exit code 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamembed.cli import main

from ..stream.helpers import fitted_model


def test_run_refuses_a_missing_or_corrupt_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "--set", f"output.root={tmp_path / 'out'}", "--set", "metrics.enabled=false"]
    assert main(base + ["--set", f"model.path={tmp_path / 'missing.npz'}"]) == 2
    (tmp_path / "bad.npz").write_bytes(b"garbage")
    assert main(base + ["--set", f"model.path={tmp_path / 'bad.npz'}"]) == 2
    dmodel = fitted_model()
    dmodel.save(tmp_path / "d.npz")  # a dissimilarity model cannot serve the feature generator
    assert main(base + ["--set", f"model.path={tmp_path / 'd.npz'}"]) == 2
