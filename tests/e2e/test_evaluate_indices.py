"""``streamembed evaluate --indices trustability,consistency`` (Roy 2021, docs/math.md §8): the full classical MDS's
indices and every row's, in the table and the JSON, equal to direct calls of ``consistency_index.evaluate_indices``;
refused on dissimilarities; the default output unchanged without ``--indices``; progress at a bounded rate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from streamembed.cli.evaluate import RefitProgress
from streamembed.consistency_index import INDEX_KEYS, evaluate_indices, landmark_pipeline
from streamembed.core.errors import InputError
from streamembed.evaluate_data import evaluate_landmarks
from streamembed.quality import cmds_pipeline

from .cli import cli


def _same(got: dict, want: dict) -> None:
    """The same keys in the same order; numbers to round-off (JSON's 17 digits), argmax and counts exactly."""
    assert list(got) == list(want)
    for key, value in want.items():
        if isinstance(value, float):
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        else:
            assert got[key] == value, key

#: 30 objects, 3 features of different spreads (a curved cloud: the indices are not all 0).
_RNG = np.random.default_rng(38)
_T = _RNG.uniform(0.0, 3.0, size=30)
X = np.c_[np.cos(_T) * 3.0, np.sin(_T) * 2.0, 0.5 * _RNG.normal(size=30)]


@pytest.mark.e2e
def test_the_indices_of_every_row_and_of_the_full_map_equal_direct_calls(tmp_path: Path) -> None:
    np.save(tmp_path / "X.npy", X)
    r = cli("evaluate", "--features", "X.npy", "--landmarks", "8", "--selections", "random,maxmin", "--methods",
            "projection,restricted", "--seeds", "2", "--indices", "trustability,consistency",
            "--consistency-centres", "5", "--json", "out.json", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    full = evaluate_indices(X, cmds_pipeline("euclidean"), 2, centres=5)
    assert list(doc["full_indices"]) == list(INDEX_KEYS)
    _same(doc["full_indices"], full)
    assert doc["full_indices"]["consistency_candidates"] == 15  # 5 centres × 3 coordinates
    assert len(doc["rows"]) == 4
    for row in doc["rows"]:
        direct = evaluate_indices(X, landmark_pipeline(n_landmarks=8, landmark_selection=row["selection"],
                                                       method=row["method"], random_state=0), 2, centres=5)
        assert list(row["indices"]) == list(INDEX_KEYS)
        _same(row["indices"], direct)
    table = r.stdout
    assert "| n⁻¹TI (d = p) | n⁻¹TI (d) | relative TI | n⁻¹TCI (d) | TCI argmax | TCI candidates |" in table
    assert "| full classical MDS | 30 | — |" in table
    assert f"{full['consistency']:.4g}" in table
    assert "full classical MDS: consistency refits 15/15" in r.stderr


@pytest.mark.e2e
def test_the_indices_are_refused_for_dissimilarities_naming_why(tmp_path: Path) -> None:
    from scipy.spatial.distance import cdist

    np.save(tmp_path / "D.npy", cdist(X, X))
    r = cli("evaluate", "--dissimilarities", "D.npy", "--landmarks", "8", "--indices", "trustability",
            cwd=tmp_path, timeout=120)
    assert r.returncode == 2
    assert "--indices trustability needs --features" in r.stderr and "Traceback" not in r.stderr
    np.save(tmp_path / "X.npy", X)
    r = cli("evaluate", "--features", "X.npy", "--landmarks", "8", "--indices", "trustworthyness", cwd=tmp_path,
            timeout=120)
    assert r.returncode == 2
    assert "unknown index 'trustworthyness'; --indices takes trustability, consistency" in r.stderr
    r = cli("evaluate", "--features", "X.npy", "--landmarks", "8", "--consistency-centres", "3", cwd=tmp_path,
            timeout=120)
    assert r.returncode == 2 and "add --indices consistency" in r.stderr


def test_without_indices_the_report_has_no_indices_and_with_one_only_its_keys() -> None:
    plain = evaluate_landmarks(X=X, landmarks=(8,), selections=("random",), methods=("projection",), seeds=1)
    doc = plain.to_dict()
    assert "full_indices" not in doc and "indices" not in doc["rows"][0]
    assert "Indices of the pipelines" not in plain.to_markdown()
    only = evaluate_landmarks(X=X, landmarks=(8,), selections=("random",), methods=("projection",), seeds=1,
                              indices=["trustability"])
    doc = only.to_dict()
    assert list(doc["full_indices"]) == ["trustability", "trustability_d", "relative_trustability"]
    assert doc["full_indices"]["trustability"] == pytest.approx(0.0, abs=1e-12)  # classical MDS at d = p: 0
    with pytest.raises(InputError, match="need feature vectors"):
        from scipy.spatial.distance import cdist

        evaluate_landmarks(D=cdist(X, X), landmarks=(8,), seeds=1, indices=["consistency"])


def test_progress_is_printed_at_a_bounded_rate_with_each_maps_first_and_last_line() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = RefitProgress(every=10.0, clock=lambda: now[0], out=out)
    for done in range(64, 6401, 64):  # 100 blocks, one every 0.5 s: 50 s in all
        now[0] += 0.5
        progress("full classical MDS", done, 6400)
    now[0] += 1.0
    progress("maxmin 8 landmarks, projection", 64, 128)
    progress("maxmin 8 landmarks, projection", 128, 128)
    lines = out.getvalue().splitlines()
    full = [ln for ln in lines if ln.startswith("full classical MDS")]
    assert 5 <= len(full) <= 7 and full[-1].startswith("full classical MDS: consistency refits 6400/6400")
    assert "s left" in full[0]
    assert [ln.split(":")[0] for ln in lines[-2:]] == ["maxmin 8 landmarks, projection"] * 2
