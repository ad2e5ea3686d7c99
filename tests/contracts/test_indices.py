"""Every registered quality index of ``evaluate`` passes ``checks.check_index``, and the table and JSON carry it."""

from __future__ import annotations

import numpy as np
import pytest

from streamembed.evaluate_data import evaluate_landmarks
from streamembed.quality_indices import INDICES, PIPELINE_INDICES, PipelineIndex, QualityIndex

from .checks import check_index, check_pipeline_index


@pytest.mark.parametrize("index", list(INDICES), ids=lambda i: i.name)
def test_every_index_passes_the_index_check(index: QualityIndex) -> None:
    check_index(index)


@pytest.mark.parametrize("index", list(PIPELINE_INDICES), ids=lambda i: i.name)
def test_every_pipeline_index_passes_the_pipeline_index_check(index: PipelineIndex) -> None:
    check_pipeline_index(index)


def test_the_table_and_the_json_carry_every_index() -> None:
    X = np.random.default_rng(0).normal(size=(80, 3))
    rep = evaluate_landmarks(X=X, landmarks=(20,), selections=("random",), methods=("projection",), seeds=1)
    header = rep.to_markdown().splitlines()[2]
    row = rep.to_dict()["rows"][0]
    for index in INDICES:
        assert f" {index.column} |" in header and set(row[index.name]) == {"median", "low", "high"}, index.name


def test_the_table_and_the_json_carry_every_pipeline_index_asked_for() -> None:
    X = np.random.default_rng(0).normal(size=(30, 3))
    rep = evaluate_landmarks(X=X, landmarks=(10,), selections=("random",), methods=("projection",), seeds=1,
                             indices=PIPELINE_INDICES.names(), consistency_centres=2)
    text, doc = rep.to_markdown(), rep.to_dict()
    for index in PIPELINE_INDICES:
        assert all(f" {c} |" in text for c in index.columns), index.name
        assert set(index.keys) <= set(doc["full_indices"]) and set(index.keys) <= set(doc["rows"][0]["indices"])
