"""Configuration: the embedded default, TOML files, environment overrides, validation."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from streamembed.config import Config, ConfigError, default_toml_text, load_config, to_dict, to_json, to_toml

ROOT = Path(__file__).resolve().parents[2]


def test_config_default_toml_is_generated_from_the_schema() -> None:
    # regenerate with: streamembed config --defaults > config/default.toml
    assert (ROOT / "config" / "default.toml").read_text() == default_toml_text()


def test_default_file_and_dataclass_defaults_agree() -> None:
    assert to_dict(load_config(ROOT / "config" / "default.toml")) == to_dict(Config()) == to_dict(load_config())


def test_default_file_sets_every_key() -> None:
    doc = tomllib.loads((ROOT / "config" / "default.toml").read_text())
    assert {s: set(v) for s, v in doc.items()} == {s: set(v) for s, v in to_dict(Config()).items()}


def test_file_overrides_only_its_keys(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('[output]\nroll_rows = 10\n[source]\nkind = "directory"\n[model]\npath = "m.npz"\n')
    cfg = load_config(p)
    assert cfg.output.roll_rows == 10 and cfg.source.kind == "directory"
    assert cfg.output.roll_seconds == Config().output.roll_seconds


def test_environment_overrides_with_typed_parsing() -> None:
    env = {"STREAMEMBED_OUTPUT__ROLL_ROWS": "5000", "STREAMEMBED_METRICS__ENABLED": "no",
           "STREAMEMBED_GENERATOR__RATE": "0", "STREAMEMBED_OUTPUT__ROOT": "123",
           "STREAMEMBED_MODEL__K0_ROWS": "all", "STREAMEMBED_unrelated": "x", "PATH": "/bin"}
    cfg = load_config(environ=env)
    assert cfg.output.roll_rows == 5000 and cfg.metrics.enabled is False and cfg.generator.rate == 0.0
    assert cfg.output.root == "123" and cfg.model.k0_rows == "all"


def test_precedence_file_then_env_then_overrides(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text("[run]\nmax_batches = 1\nmax_records = 1\n")
    cfg = load_config(p, environ={"STREAMEMBED_RUN__MAX_BATCHES": "2", "STREAMEMBED_RUN__MAX_RECORDS": "2"},
                      overrides={"run.max_batches": 3})
    assert (cfg.run.max_batches, cfg.run.max_records) == (3, 2)


def test_derived_locations() -> None:
    cfg = load_config(overrides={"output.root": "/data/x"})
    assert str(cfg.embeddings_dir) == "/data/x/embeddings" and str(cfg.checkpoint_path) == "/data/x/checkpoint.json"


@pytest.mark.parametrize("text,needle", [
    ("[output]\nrol_rows = 1\n", "output.rol_rows"),
    ("[outputs]\nroll_rows = 1\n", "[outputs]"),
    ('[output]\nroll_rows = "many"\n', "output.roll_rows = 'many' is not an integer"),
    ("[output]\nroll_rows = 0\n", "output.roll_rows = 0 is out of range"),
    ("[metrics]\nport = 70000\n", "metrics.port = 70000"),
    ('[model]\nmethod = "magic"\n', "model.method = 'magic' is not one of"),
    ("[metrics]\nenabled = 1\n", "metrics.enabled = 1 is not a boolean"),
    ("[model]\nk0_rows = 0\n", "model.k0_rows = 0"),
    ('[source]\nkind = "directory"\n', "model.path"),
    ("[generator]\nintrinsic_dims = 10\n", "generator.intrinsic_dims"),
    ("not toml [", "not valid TOML"),
])
def test_bad_files_are_refused_naming_key_and_value(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert needle in str(err.value)


@pytest.mark.parametrize("var,value,needle", [
    ("STREAMEMBED_OUTPUT__ROLL_ROWSS", "1", "STREAMEMBED_OUTPUT__ROLL_ROWSS"),
    ("STREAMEMBED_OUTPUT__ROLL_ROWS", "abc", "output.roll_rows = 'abc' is not an integer"),
    ("STREAMEMBED_METRICS__ENABLED", "maybe", "metrics.enabled"),
    ("STREAMEMBED_NOPE__X", "1", "unknown config section"),
])
def test_bad_environment_is_refused(var: str, value: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(environ={var: value})
    assert needle in str(err.value)


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent/streamembed.toml")


def test_toml_output_round_trips() -> None:
    cfg = load_config(overrides={"output.roll_rows": 7, "model.k0_rows": "12"})
    doc = tomllib.loads(to_toml(cfg))
    assert doc["output"]["roll_rows"] == 7 and doc["model"]["k0_rows"] == 12
    assert '"roll_rows": 7' in to_json(cfg)


def test_a_near_miss_environment_variable_is_refused_with_the_right_name() -> None:
    with pytest.raises(ConfigError,
                       match="STREAMEMBED_MODEL_PATH names no setting: did you mean STREAMEMBED_MODEL__PATH"):
        load_config(environ={"STREAMEMBED_MODEL_PATH": "m.npz"})
    load_config(environ={"STREAMEMBED_TANSU": "/bin/tansu"})  # not a setting, not like one: not ours


def test_a_retired_key_says_what_replaced_it(tmp_path: Path) -> None:
    p = tmp_path / "old.toml"
    p.write_text("[drift]\nk0_sample = 16\n")
    with pytest.raises(ConfigError, match="merged into model.k0_rows"):
        load_config(p)
    with pytest.raises(ConfigError, match="merged into model.k0_rows"):
        load_config(overrides={"drift.k0_sample": "16"})


def test_k0_statistics_need_k0_rows() -> None:
    with pytest.raises(ConfigError, match="needs exact k0 rows"):
        load_config(overrides={"drift.statistic": "gap_ratio", "model.k0_rows": "none"})
