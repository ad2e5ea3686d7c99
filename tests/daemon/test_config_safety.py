"""Settings an attacker or a slip can exploit are refused with the key named.

NaN and infinities (from TOML, the environment and flags), durations beyond any sane range, settings
whose memory cannot fit the machine, environment names in another case.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamembed.config import MAX_DURATION_SECONDS, ConfigError, check_memory, load_config
from streamembed.memlimit import MemoryLimit
from streamembed.config.schema import Config
from tests.e2e.cli import clean_env

GIB = 1 << 30


@pytest.mark.parametrize("key", ["metrics.wedged_after_seconds", "metrics.request_timeout_seconds",
                                 "output.roll_seconds", "drift.min_shift", "generator.rate"])
@pytest.mark.parametrize("literal", ["nan", "inf", "-inf", "+nan"])
def test_nan_and_infinity_are_refused_from_toml(tmp_path: Path, key: str, literal: str) -> None:
    section, name = key.split(".")
    p = tmp_path / "c.toml"
    p.write_text(f"[{section}]\n{name} = {literal}\n")
    with pytest.raises(ConfigError, match=rf"{key} = .*(is not a finite number)"):
        load_config(p)


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused_from_the_environment_and_flags(value: str) -> None:
    with pytest.raises(ConfigError, match="STREAMEMBED_OUTPUT__ROLL_SECONDS: output.roll_seconds = .* not a finite"):
        load_config(environ={"STREAMEMBED_OUTPUT__ROLL_SECONDS": value})
    with pytest.raises(ConfigError, match="metrics.wedged_after_seconds = .* not a finite"):
        load_config(overrides={"metrics.wedged_after_seconds": value})
    with pytest.raises(ConfigError, match="not a finite"):
        load_config(overrides={"metrics.wedged_after_seconds": float(value)})


def test_durations_have_an_upper_bound() -> None:
    with pytest.raises(ConfigError, match=r"kafka.retry_backoff_max_seconds = 1e\+300 is out of range"):
        load_config(overrides={"kafka.retry_backoff_max_seconds": "1e300"})
    with pytest.raises(ConfigError, match="output.roll_seconds .* out of range"):
        load_config(overrides={"output.roll_seconds": float(MAX_DURATION_SECONDS + 1)})
    with pytest.raises(ConfigError, match="kafka.session_timeout_ms .* out of range"):
        load_config(overrides={"kafka.session_timeout_ms": 10**13})
    assert load_config(overrides={"output.roll_seconds": "86400"}).output.roll_seconds == 86400.0


def test_memory_sized_settings_are_checked_against_the_memory_limit() -> None:
    with pytest.raises(ConfigError, match=r"drift.reservoir_objects = 1000000000000 needs at least .* TiB .*more than "
                                          r"the memory limit"):
        load_config(overrides={"drift.reservoir_objects": 10**12})
    with pytest.raises(ConfigError, match="source.max_block_rows = 1000000 needs at least 7.3 TiB"):
        load_config(overrides={"source.max_block_rows": 10**6})
    cfg = Config()
    small = MemoryLimit(GIB, "cgroup /sys/fs/cgroup/x/memory.max")
    check_memory(cfg, small)  # the defaults fit in 1 GiB
    cfg.drift.reservoir_objects = 20_000_000  # 20 M x (10 features x 8 B + 16 B) = 1.8 GiB
    with pytest.raises(ConfigError, match=r"reservoir_objects = 20000000 .* 1.0 GiB \(cgroup /sys/fs/cgroup/x"):
        check_memory(cfg, small)
    cfg = Config()
    cfg.drift.reservoir_objects = 5_000_000
    cfg.drift.window_objects = 60_000_000  # each alone fits, together they do not
    with pytest.raises(ConfigError, match="together these settings need"):
        check_memory(cfg, small)
    # with the model known: its features, not the lower bound
    cfg = Config()
    cfg.model.path = "m.npz"
    cfg.drift.reservoir_objects = 1_000_000
    check_memory(cfg, small)  # without the model: at least 24 B each
    with pytest.raises(ConfigError, match="1000 float64 feature"):
        check_memory(cfg, small, n_features=1000, n_landmarks=100)


def test_environment_names_in_any_case() -> None:
    cfg = load_config(environ={"streamembed_output__roll_rows": "7", "StreamEmbed_Metrics__Port": "0"})
    assert cfg.output.roll_rows == 7 and cfg.metrics.port == 0
    with pytest.raises(ConfigError, match="streamembed_output__roll_seconds: output.roll_seconds = 'x'"):
        load_config(environ={"streamembed_output__roll_seconds": "x"})
    with pytest.raises(ConfigError, match="both set output.roll_rows"):
        load_config(environ={"STREAMEMBED_OUTPUT__ROLL_ROWS": "7", "streamembed_output__roll_rows": "8"})
    with pytest.raises(ConfigError, match="unknown config key 'output.roll_rowz'"):
        load_config(environ={"streamembed_output__roll_rowz": "7"})


def test_the_daemon_refuses_them_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    cases = {"[metrics]\nwedged_after_seconds = nan\n": "metrics.wedged_after_seconds = nan is not a finite number",
             "[drift]\nreservoir_objects = 1_000_000_000_000\n":
                 "drift.reservoir_objects = 1000000000000 needs at least"}
    for text, needle in cases.items():
        (tmp_path / "c.toml").write_text(text)
        r = subprocess.run([sys.executable, "-m", "streamembed", "run", "--config", str(tmp_path / "c.toml")],
                           cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
