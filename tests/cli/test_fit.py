"""``streamembed fit``, in process: inputs, landmark selections and refusals with exit code 2."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import cdist

from streamembed.cli import main


def test_fit_from_npy_dissimilarities_with_maxmin_landmarks(tmp_path: Path) -> None:
    X = np.random.default_rng(0).standard_normal((60, 3))
    np.save(tmp_path / "D.npy", cdist(X, X))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "15", "-o",
                 str(tmp_path / "m.npz")]) == 0
    from streamembed import LandmarkMDS

    est = LandmarkMDS.load(tmp_path / "m.npz")
    assert est.n_landmarks_ == 15 and est.n_components == 2


@pytest.mark.parametrize("selection", ["max-variance", "random", "rpcholesky", "kmeans++", "kmedoids", "maxmin"])
def test_fit_selects_landmarks_by_every_strategy_and_the_same_seed_repeats_them(tmp_path: Path, selection: str) -> None:
    from streamembed.core.refit.landmarks import select_landmarks

    X = np.random.default_rng(2).standard_normal((80, 3))
    D = cdist(X, X)
    np.save(tmp_path / "D.npy", D)
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "12", "--selection", selection,
                 "--seed", "4", "--landmarks-out", str(tmp_path / "ids.txt"), "-o", str(tmp_path / "m.npz")]) == 0
    chosen = [int(x) for x in (tmp_path / "ids.txt").read_text().split()]
    assert sorted(chosen) == select_landmarks(selection, 12, D=D, seed=4).tolist()


def test_fit_from_features_in_csv_and_parquet(tmp_path: Path) -> None:
    X = np.random.default_rng(1).standard_normal((30, 4))
    (tmp_path / "X.csv").write_text("\n".join(",".join(map(str, r)) for r in X))
    assert main(["fit", "--features", str(tmp_path / "X.csv"), "--metric", "cityblock", "--landmarks", "10",
                 "-o", str(tmp_path / "a.npz")]) == 0
    t = pa.table({"id": [f"o{i}" for i in range(30)],
                  "features": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), 4)})
    pq.write_table(t, tmp_path / "X.parquet")
    assert main(["fit", "--features", str(tmp_path / "X.parquet"), "--landmarks", "8", "--selection", "random",
                 "-o", str(tmp_path / "b.npz")]) == 0
    from streamembed import LandmarkMDS

    b = LandmarkMDS.load(tmp_path / "b.npz")
    assert b.metric_ == "euclidean" and all(i.startswith("o") for i in b.landmark_ids_)
    assert LandmarkMDS.load(tmp_path / "a.npz").metric_ == "cityblock"


def test_fit_refuses_non_square_and_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "D.npy", np.ones((4, 5)))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "-o", str(tmp_path / "m.npz")]) == 2
    assert "square" in capsys.readouterr().err
    assert main(["fit", "--dissimilarities", str(tmp_path / "nope.npy"), "-o", str(tmp_path / "m.npz")]) == 2


@pytest.mark.parametrize("selection", ["maxmin", "random", "first"])
def test_fit_refuses_a_bad_entry_with_its_position_in_the_input(tmp_path: Path, selection: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # the NaN sits between objects 5 and 7 of the input: max-min selection reads every row, so it is
    # refused whatever is chosen; random/first selections read the chosen landmarks' entries (objects
    # 0..9 here for "first"). The message names the input's row and column, never landmark positions.
    X = np.random.default_rng(0).standard_normal((30, 3))
    D = cdist(X, X)
    D[5, 7] = D[7, 5] = np.nan
    np.save(tmp_path / "D.npy", D)
    args = ["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "10", "--selection", selection,
            "--seed", "0", "-o", str(tmp_path / "m.npz")]
    if selection == "random":  # make sure both are chosen
        args += ["--seed", str(next(s for s in range(200) if {5, 7} <= set(
            np.random.default_rng(s).choice(30, size=10, replace=False).tolist())))]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "D[5, 7] = nan is not finite" in err, err
    # a NaN outside the chosen landmarks does not matter to random/first selections
    D = cdist(X, X)
    D[20, 25] = D[25, 20] = np.nan
    np.save(tmp_path / "D.npy", D)
    code = main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "10", "--selection", "first",
                 "-o", str(tmp_path / "m.npz")])
    assert code == 0
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--landmarks", "10", "-o",
                 str(tmp_path / "m.npz")]) == 2
    assert "D[20, 25] = nan is not finite" in capsys.readouterr().err


def _sphere(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 3))
    return Z / np.linalg.norm(Z, axis=1, keepdims=True) * (1.0 + 0.05 * rng.normal(size=(n, 1)))


def test_fit_selection_skeleton_keeps_the_lsdr_skeleton_with_its_alpha_and_k(tmp_path: Path, capsys) -> None:
    from streamembed import LandmarkMDS
    from streamembed.core.fit.skeleton import fit_skeleton

    X = _sphere(150)
    np.save(tmp_path / "X.npy", X)
    assert main(["fit", "--features", str(tmp_path / "X.npy"), "--selection", "skeleton", "--skeleton-alpha", "0.9",
                 "--skeleton-neighbors", "4", "--landmarks-out", str(tmp_path / "ids.txt"),
                 "-o", str(tmp_path / "m.npz")]) == 0
    sk = fit_skeleton(X, 0.9, 4)
    assert [int(x) for x in (tmp_path / "ids.txt").read_text().split()] == sk.indices.tolist()
    err = capsys.readouterr().err
    assert f"{sk.graph.n_removed} of {sk.graph.edges.shape[0]} Delaunay edges removed" in err
    assert f"{sk.size} skeleton points" in err and f"{sk.size} landmarks (of 150)" in err
    est = LandmarkMDS.load(tmp_path / "m.npz")
    assert est.n_landmarks_ == sk.size and (est.skeleton_alpha, est.skeleton_neighbors) == (0.9, 4)


@pytest.mark.parametrize(("extra", "match"), [
    (["--landmarks", "20"], "drop --landmarks"),
    (["--metric", "cityblock"], "needs --metric euclidean"),
    (["--skeleton-alpha", "2"], r"--skeleton-alpha must be a number in \[0, 1\]"),
    (["--geodesic-neighbors", "4"], "cannot take --geodesic-neighbors 4"),
])
def test_fit_selection_skeleton_refuses_what_it_cannot_use(tmp_path: Path, capsys, extra: list[str],
                                                           match: str) -> None:
    np.save(tmp_path / "X.npy", _sphere(60))
    assert main(["fit", "--features", str(tmp_path / "X.npy"), "--selection", "skeleton", *extra,
                 "-o", str(tmp_path / "m.npz")]) == 2
    assert re.search(match, capsys.readouterr().err)
    assert not (tmp_path / "m.npz").exists()


def test_fit_selection_skeleton_needs_features_and_few_of_them(tmp_path: Path, capsys) -> None:
    X = np.random.default_rng(0).normal(size=(40, 8))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "D.npy", cdist(X, X))
    assert main(["fit", "--dissimilarities", str(tmp_path / "D.npy"), "--selection", "skeleton",
                 "-o", str(tmp_path / "m.npz")]) == 2
    assert "give --features FILE" in capsys.readouterr().err
    assert main(["fit", "--features", str(tmp_path / "X.npy"), "--selection", "skeleton",
                 "-o", str(tmp_path / "m.npz")]) == 2
    assert "p = 8 features, at most 6" in capsys.readouterr().err


def test_fit_method_kernel_stores_the_rules_sigma_or_the_given_one_and_refuses_zero(tmp_path: Path, capsys) -> None:
    from streamembed import LandmarkMDS
    from streamembed.core.place.kernel import bandwidth

    X = np.random.default_rng(7).standard_normal((40, 3))
    np.save(tmp_path / "X.npy", X)
    assert main(["fit", "--features", str(tmp_path / "X.npy"), "--method", "kernel", "-o",
                 str(tmp_path / "r.npz")]) == 0
    rule = LandmarkMDS.load(tmp_path / "r.npz")
    assert rule.method == "kernel" and rule.model_.bandwidth == pytest.approx(bandwidth(cdist(X, X)), rel=1e-12)
    assert main(["fit", "--features", str(tmp_path / "X.npy"), "--method", "kernel", "--kernel-bandwidth", "0.5",
                 "-o", str(tmp_path / "g.npz")]) == 0
    given = LandmarkMDS.load(tmp_path / "g.npz")
    assert given.kernel_bandwidth == 0.5 == given.model_.bandwidth
    capsys.readouterr()
    assert main(["fit", "--features", str(tmp_path / "X.npy"), "--kernel-bandwidth", "0", "-o",
                 str(tmp_path / "z.npz")]) == 2
    assert "--kernel-bandwidth must be None or a number > 0, got 0.0" in capsys.readouterr().err
    assert not (tmp_path / "z.npz").exists()
