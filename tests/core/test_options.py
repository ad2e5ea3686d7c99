"""The option table (``core.options``): one statement of each option's values, default and rules, read everywhere."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from streamembed import LandmarkMDS, ModelFileError, model_io
from streamembed.config import ConfigError, load_config
from streamembed.config.schema import DriftConfig, ModelConfig, SourceConfig, section_keys
from streamembed.core.monitor import drift
from streamembed.core.errors import InputError
from streamembed.core.options import (BATCH_ROWS, DEFAULTS, MAX_BLOCK_ROWS, OPTIONS, Interval, StrOptions,
                                      check_options, config_names, flag_names)

from .conftest import landmark_problem

#: The rule's reason, as every caller shows it.
REFINED_MAP_REASON = "needs the classical-MDS map, which a refined map has no projection onto"


def test_check_options_names_every_violation_once() -> None:
    with pytest.raises(InputError) as err:
        check_options(method="newton", n_components=0, n_landmarks=1, geodesic_neighbors=None)
    text = str(err.value)
    assert "method must be one of ('projection', 'restricted', 'stress', 'l1', 'kernel'), got 'newton'" in text
    assert "n_components must be a positive integer, got 0" in text
    assert "n_landmarks must be None or an integer ≥ 2, got 1" in text
    assert "geodesic_neighbors" not in text  # None is allowed
    check_options(method="l1", landmark_map="sammon", n_components=np.int64(3))  # numpy integers are integers


def test_booleans_are_not_integers_and_unknown_names_are_programming_errors() -> None:
    with pytest.raises(InputError, match="random_state must be an integer, got True"):
        check_options(random_state=True)
    with pytest.raises(KeyError):
        check_options(no_such_option=1)


def test_a_rule_is_checked_only_on_valid_values() -> None:
    with pytest.raises(InputError) as err:
        check_options(method="newton", landmark_map="smacof")
    assert "method must be one of" in str(err.value) and REFINED_MAP_REASON not in str(err.value)


def test_the_refined_map_rule_reads_the_same_from_every_caller(tmp_path) -> None:
    """Estimator, fit_model's model check, configuration and command line: one rule, each in its own names."""
    D, A, _ = landmark_problem(np.random.default_rng(0), 20, 3, 4)
    with pytest.raises(InputError, match=f"landmark_map='smacof' needs method 'stress', 'l1' or 'kernel': "
                                         f"method='projection' {REFINED_MAP_REASON}"):
        LandmarkMDS(2, landmark_map="smacof").fit(D)
    est = LandmarkMDS(2, method="stress", landmark_map="smacof").fit(D)
    with pytest.raises(InputError, match=f"method='restricted' {REFINED_MAP_REASON}"):
        est.embed(A, method="restricted")
    with pytest.raises(ConfigError, match=f"model.landmark_map = 'smacof' needs model.method 'stress', 'l1' or "
                                          f"'kernel': model.method = 'projection' {REFINED_MAP_REASON}"):
        load_config(None, environ={}, overrides={"model.landmark_map": "smacof"})
    from streamembed.cli import fit
    from streamembed.cli.common import Refused

    args = argparse.Namespace(method="restricted", landmark_map="nonmetric", output=str(tmp_path / "m.npz"))
    with pytest.raises(Refused, match=f"--landmark-map nonmetric needs --method 'stress', 'l1' or 'kernel': "
                                      f"--method restricted {REFINED_MAP_REASON}"):
        fit.run(args)  # refused before any file is read (there is none)


def test_the_schema_takes_its_model_options_from_the_table() -> None:
    from streamembed.core.refit.landmarks import LANDMARK_SELECTIONS

    keys = section_keys(ModelConfig)
    for name in ("method", "input", "correction", "landmark_map", "landmark_selection", "kernel", "n_components"):
        f = keys[name][1]
        assert f.default == DEFAULTS[name], name
        if isinstance(OPTIONS[name].constraint, StrOptions):
            # the daemon fits its generator model by a selection strategy: LSDR's skeleton is for `fit` only
            values = LANDMARK_SELECTIONS if name == "landmark_selection" else OPTIONS[name].values
            assert tuple(f.metadata["choices"]) == values, name
    assert set(LANDMARK_SELECTIONS) | {"skeleton"} == set(OPTIONS["landmark_selection"].values)
    source = section_keys(SourceConfig)
    assert source["batch_rows"][1].default == BATCH_ROWS == 8192
    assert source["max_block_rows"][1].default == MAX_BLOCK_ROWS == 4096
    assert tuple(section_keys(DriftConfig)["statistic"][1].metadata["choices"]) == tuple(drift.STATISTICS)


def test_the_command_line_takes_its_choices_and_defaults_from_the_table() -> None:
    from streamembed.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {name: {a.dest: a for a in p._actions} for name, p in sub.choices.items() if name in ("fit", "embed")}
    for name in ("method", "correction", "landmark_map"):
        assert tuple(flags["fit"][name].choices) == OPTIONS[name].values
        assert flags["fit"][name].default == DEFAULTS[name]
    assert flags["fit"]["n_components"].default == DEFAULTS["n_components"]
    assert flags["fit"]["seed"].default == DEFAULTS["random_state"]
    assert tuple(flags["embed"]["method"].choices) == OPTIONS["method"].values
    assert flags["embed"]["batch_rows"].default == BATCH_ROWS
    assert flags["embed"]["max_block_rows"].default == MAX_BLOCK_ROWS


def test_a_model_file_with_an_unknown_choice_is_refused_by_name(tmp_path) -> None:
    D, _, _ = landmark_problem(np.random.default_rng(1), 12, 3, 2)
    LandmarkMDS(2).fit(D).save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        files = {k: npz[k] for k in npz.files}
    meta = json.loads(str(files.pop("meta")))
    meta["fit_params"]["correction"] = "lingoes"
    meta["checksum_sha256"] = model_io._checksum(files, meta)
    np.savez(tmp_path / "bad.npz", meta=np.array(json.dumps(meta, sort_keys=True)), **files)
    with pytest.raises(ModelFileError, match="fit_params.correction must be one of \\('none', 'cailliez'\\)"):
        LandmarkMDS.load(tmp_path / "bad.npz")


def test_namers_and_constraints_describe_themselves() -> None:
    assert config_names("model")("method", "l1") == "model.method = 'l1'"
    assert flag_names("landmark_map") == "--landmark-map"
    assert Interval(float, 0.0, 1.0).describe() == "a number in [0, 1]"
    assert not Interval(int, 1).accepts(1.5) and Interval(float, 0.0).accepts(2)
