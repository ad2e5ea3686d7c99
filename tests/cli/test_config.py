"""``streamembed config``, in process: the effective configuration, a bad key refused with exit code 2."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from streamembed.cli import main


def test_config_prints_effective_toml_and_json(capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMEMBED_OUTPUT__ROLL_ROWS", "77")
    assert main(["config", "--set", "metrics.port=0"]) == 0
    doc = tomllib.loads(capsys.readouterr().out)
    assert doc["output"]["roll_rows"] == 77 and doc["metrics"]["port"] == 0
    assert main(["config", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"]["roll_rows"] == 77
    assert main(["config", "--reference"]) == 0
    assert "`output.roll_rows`" in capsys.readouterr().out


def test_bad_configuration_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMEMBED_OUTPUT__ROLL_ROWS", "-5")
    assert main(["run"]) == 2
    assert "output.roll_rows = -5" in capsys.readouterr().err
    monkeypatch.delenv("STREAMEMBED_OUTPUT__ROLL_ROWS")
    assert main(["run", "--set", "nope"]) == 2
