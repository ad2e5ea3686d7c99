"""The installed entry points start and document themselves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .cli import clean_env

pytestmark = pytest.mark.e2e


def test_every_subcommand_is_listed_and_answers_its_own_help() -> None:
    """The command list is parsed from argparse's COMMAND block (not the epilog's examples),
    and each listed command starts and prints its own usage line."""
    r = subprocess.run([sys.executable, "-m", "streamembed", "--help"], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    assert r.returncode == 0
    block = r.stdout.split("positional arguments:")[1].split("options:")[0]
    listed = re.findall(r"^    (\w+)\s", block, flags=re.M)
    assert {"run", "fit", "embed", "model", "refit", "evaluate", "plot", "config"} <= set(listed), listed
    assert "bench" not in listed  # a benchmark, not installed: python -m benchmarks bench
    for sub in listed:
        h = subprocess.run([sys.executable, "-m", "streamembed", sub, "--help"], capture_output=True, text=True,
                           timeout=60, env=clean_env())
        assert h.returncode == 0, (sub, h.stderr)
        assert h.stdout.startswith(f"usage: streamembed {sub}"), (sub, h.stdout[:200])


def test_bad_config_file_exits_2_with_the_key_named(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[output]\nroll_rows = -1\n")
    r = subprocess.run([sys.executable, "-m", "streamembed", "run", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env=clean_env())
    assert r.returncode == 2
    assert "output.roll_rows = -1" in r.stderr
