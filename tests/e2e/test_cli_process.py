"""The installed entry points start and document themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .cli import clean_env

pytestmark = pytest.mark.e2e


def test_python_dash_m_help_lists_subcommands() -> None:
    r = subprocess.run([sys.executable, "-m", "streamembed", "--help"], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    assert r.returncode == 0
    for sub in ("run", "fit", "embed", "config"):
        assert sub in r.stdout


def test_bad_config_file_exits_2_with_the_key_named(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[output]\nroll_rows = -1\n")
    r = subprocess.run([sys.executable, "-m", "streamembed", "run", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env=clean_env())
    assert r.returncode == 2
    assert "output.roll_rows = -1" in r.stderr
