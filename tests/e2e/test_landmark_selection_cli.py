"""`streamembed fit --selection` and `streamembed evaluate --features/--dissimilarities` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from streamembed import LandmarkMDS
from streamembed.core.refit.landmarks import LANDMARK_SELECTIONS, select_landmarks

from .cli import clean_env, cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def points(tmp_path: Path) -> np.ndarray:
    X = np.random.default_rng(8).normal(size=(120, 4)) * [4.0, 2.0, 1.0, 0.5]
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "D.npy", cdist(X, X, "cityblock"))
    return X


@pytest.mark.parametrize("selection", LANDMARK_SELECTIONS)
def test_fit_selection_keeps_the_landmarks_select_landmarks_chooses(selection: str, points, tmp_path: Path) -> None:
    r = cli("fit", "--dissimilarities", "D.npy", "--landmarks", "25", "--selection", selection, "--seed", "3",
            "--landmarks-out", "ids.txt", "-o", "m.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [int(x) for x in (tmp_path / "ids.txt").read_text().split()]
    expected = select_landmarks(selection, 25, D=np.load(tmp_path / "D.npy"), seed=3, n_components=2)
    assert rows == expected.tolist()
    assert LandmarkMDS.load(tmp_path / "m.npz").n_landmarks_ == 25


def test_fit_on_duplicates_warns_with_the_count_and_identical_objects_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "dup.npy", np.repeat(np.eye(3) * 5.0, 10, axis=0))  # 3 distinct objects, 30 rows
    r = cli("fit", "--features", "dup.npy", "--landmarks", "8", "-o", "m.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "only 3 distinct objects among 30" in r.stderr and "3 landmarks (of 30)" in r.stderr
    np.save(tmp_path / "same.npy", np.ones((30, 3)))
    r = cli("fit", "--features", "same.npy", "--landmarks", "8", "-o", "m2.npz", cwd=tmp_path)
    assert r.returncode == 2 and "all 30 objects are identical" in r.stderr and "Traceback" not in r.stderr


def test_evaluate_on_features_prints_the_table_progress_and_a_recommendation(points, tmp_path: Path) -> None:
    (tmp_path / "ids.txt").write_text("".join(f"obj{i}\n" for i in range(120)))
    r = cli("evaluate", "--features", "X.npy", "--ids", "ids.txt", "--landmarks", "15,30", "--selections",
            "max-variance,maxmin", "--methods", "projection", "--seeds", "2", "--json", "out.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "full classical MDS of 120 objects" in r.stderr and "maxmin 30 landmarks, projection" in r.stderr
    assert "| max-variance | 15 | projection |" in r.stdout and "recommendation: " in r.stdout
    assert "streamembed fit --features X.npy --metric euclidean --landmarks" in r.stdout
    doc = json.loads((tmp_path / "out.json").read_text())
    assert len(doc["rows"]) == 4 and doc["recommendation"] in r.stdout
    assert all(x.startswith("obj") for x in doc["recommended_landmark_ids"])


def test_evaluate_refuses_bad_input_and_points_to_the_benchmark_datasets(points, tmp_path: Path) -> None:
    np.save(tmp_path / "rect.npy", np.ones((10, 4)))
    r = cli("evaluate", "--dissimilarities", "rect.npy", cwd=tmp_path)
    assert r.returncode == 2 and "must be square" in r.stderr
    r = cli("evaluate", "--features", "X.npy", "--landmarks", "500", cwd=tmp_path)
    assert r.returncode == 2 and "no landmark count" in r.stderr
    (tmp_path / "ids.txt").write_text("a\nb\n")
    r = cli("evaluate", "--features", "X.npy", "--ids", "ids.txt", cwd=tmp_path)
    assert r.returncode == 2 and "has 2 ids for the 120 objects" in r.stderr
    r = cli("evaluate", "--list", cwd=tmp_path)  # the datasets are the source checkout's, not the wheel's
    assert r.returncode == 2 and "python -m benchmarks evaluate" in r.stderr
    r = subprocess.run([sys.executable, "-m", "benchmarks", "evaluate", "--list"], cwd=tmp_path, env=clean_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "english_words" in r.stdout, r.stderr
