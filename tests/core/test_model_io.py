"""Saving and loading fitted models (portable .npz, schema-versioned, checksummed)."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from streamembed import LandmarkMDS, ModelFileError

from .conftest import landmark_problem


@pytest.fixture
def fitted(rng):
    D, A, _ = landmark_problem(rng, 12, 3, 20, off_span=1.0)
    est = LandmarkMDS(n_components=2, method="restricted").fit(D, landmark_ids=[f"mol-{i}" for i in range(12)])
    est.model_ = est.model_.with_version(7)
    return est, A


def test_round_trip_preserves_everything(fitted, tmp_path):
    est, A = fitted
    path = tmp_path / "model.npz"
    est.save(path)
    back = LandmarkMDS.load(path)
    assert back.get_params() == est.get_params()
    assert back.model_version_ == 7
    assert back.landmark_ids_.tolist() == [f"mol-{i}" for i in range(12)]
    np.testing.assert_array_equal(back.embedding_, est.embedding_)
    np.testing.assert_array_equal(back.transform(A), est.transform(A))
    np.testing.assert_array_equal(back.dissimilarities_, est.dissimilarities_)


def test_file_has_no_pickled_objects(fitted, tmp_path):
    est, _ = fitted
    est.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        for name in npz.files:
            assert npz[name].dtype != object


def test_corrupted_bytes_fail_the_checksum_or_the_archive(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    raw = bytearray(path.read_bytes())
    # a byte inside the largest entry's data (a byte of a local zip header, which zipfile ignores, damages nothing)
    with zipfile.ZipFile(path) as zf:
        entry = max(zf.infolist(), key=lambda i: i.compress_size)
    raw[entry.header_offset + 30 + len(entry.filename) + entry.compress_size // 2 + 20] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="checksum|not a readable"):
        LandmarkMDS.load(path)


def test_truncated_file(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ModelFileError, match="not a readable .npz"):
        LandmarkMDS.load(path)


def _entries(path) -> dict:
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def test_edited_array_fails_checksum(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    files = _entries(path)
    files["eigenvalues"] = files["eigenvalues"] * 1.01
    np.savez(path, **files)
    with pytest.raises(ModelFileError, match="fails its checksum"):
        LandmarkMDS.load(path)


def test_other_schema_version_is_refused(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "m.npz"
    est.save(path)
    files = _entries(path)
    meta = json.loads(str(files["meta"]))
    meta["schema_version"] = 99
    files["meta"] = np.array(json.dumps(meta))
    np.savez(path, **files)
    with pytest.raises(ModelFileError, match="schema version 99; this streamembed reads 1"):
        LandmarkMDS.load(path)


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        LandmarkMDS.load(tmp_path / "nope.npz")
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    with pytest.raises(ModelFileError, match="no 'meta' entry"):
        LandmarkMDS.load(tmp_path / "other.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ModelFileError, match="not a streamembed model .*starts with b'hello'"):
        LandmarkMDS.load(tmp_path / "text.npz")
    np.save(tmp_path / "matrix.npy", np.eye(3))
    with pytest.raises(ModelFileError, match=r"single numpy array \(.npy\), not a streamembed model"):
        LandmarkMDS.load(tmp_path / "matrix.npy")
    (tmp_path / "zip.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ModelFileError, match="not a readable .npz archive"):
        LandmarkMDS.load(tmp_path / "zip.npz")


def test_features_model_round_trip(rng, tmp_path):
    X = rng.normal(size=(15, 4))
    est = LandmarkMDS(n_components=2).fit_features(X, metric="cityblock")
    est.save(tmp_path / "f.npz")
    back = LandmarkMDS.load(tmp_path / "f.npz")
    F = rng.normal(size=(5, 4))
    assert back.metric_ == "cityblock"
    np.testing.assert_allclose(back.dissimilarities_to_landmarks(F), est.dissimilarities_to_landmarks(F))
    assert zipfile.is_zipfile(tmp_path / "f.npz")


# ----------------------------------------------------------------------------- the bytes API


def _same_model(a, b) -> None:
    """Bit-identical arrays (names, dtypes, shapes, bytes) and the same metadata."""
    from streamembed.model_io import model_arrays

    xa, xb = model_arrays(a), model_arrays(b)
    assert sorted(xa) == sorted(xb)
    for name in xa:
        assert xa[name].dtype == xb[name].dtype and xa[name].shape == xb[name].shape, name
        assert np.ascontiguousarray(xa[name]).tobytes() == np.ascontiguousarray(xb[name]).tobytes(), name
    for attr in ("version", "lineage", "n_components", "fit_params", "map_info", "metric", "random_state",
                 "negative_ratio", "eigengap"):
        assert getattr(a, attr) == getattr(b, attr), attr
    assert a.spectrum.negative_share == b.spectrum.negative_share and a.spectrum.exact == b.spectrum.exact


def test_bytes_round_trip_is_bit_identical(fitted):
    from streamembed.model_io import model_from_bytes, model_to_bytes, read_model_bytes

    est, A = fitted
    data = model_to_bytes(est.model_, params=est.get_params())
    back = model_from_bytes(data)
    _same_model(back, est.model_)
    model, params = read_model_bytes(bytearray(data))
    assert params == est.get_params()
    np.testing.assert_array_equal(model.place(A, method="restricted").y, est.model_.place(A, method="restricted").y)
    _same_model(model_from_bytes(memoryview(data)), est.model_)


def test_features_and_refined_models_round_trip_through_bytes(rng):
    from streamembed.model_io import model_from_bytes, model_to_bytes

    X = rng.normal(size=(15, 4))
    features = LandmarkMDS(n_components=2).fit_features(X, metric="cityblock").model_
    _same_model(model_from_bytes(model_to_bytes(features)), features)
    D, _, _ = landmark_problem(rng, 12, 3, 1)
    refined = LandmarkMDS(n_components=2, method="stress", landmark_map="nonmetric").fit(D).model_
    assert refined.map_transform is not None
    _same_model(model_from_bytes(model_to_bytes(refined)), refined)


def test_the_file_is_the_bytes(fitted, tmp_path):
    """``save_model`` writes exactly ``model_to_bytes``; the bytes depend on the model alone (fixed timestamps)."""
    from streamembed.model_io import model_from_bytes, model_to_bytes

    est, _ = fitted
    est.save(tmp_path / "m.npz")
    data = model_to_bytes(est.model_, params=est.get_params())
    assert (tmp_path / "m.npz").read_bytes() == data
    with zipfile.ZipFile(tmp_path / "m.npz") as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert zf.namelist()[0] == "meta.npy"
    _same_model(LandmarkMDS.load(tmp_path / "m.npz").model_, model_from_bytes(data))


def test_bytes_hold_no_pickle_and_a_pickled_entry_is_refused(fitted):
    import io

    from streamembed.model_io import model_from_bytes, model_to_bytes

    est, _ = fitted
    data = model_to_bytes(est.model_)
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        files = {k: npz[k] for k in npz.files}
    assert all(a.dtype != object for a in files.values())
    files["landmark_ids"] = np.array([f"mol-{i}" for i in range(12)], dtype=object)  # stored with pickle
    buf = io.BytesIO()
    np.savez(buf, **files)
    with pytest.raises(ModelFileError, match=r"model bytes \(\d+ bytes\) is not a readable .npz archive "
                                             r"\(ValueError: Object arrays cannot be loaded when allow_pickle=False"):
        model_from_bytes(buf.getvalue())


@pytest.mark.parametrize("cut", [0, 3, 200, -22, -1])
def test_truncated_bytes_are_refused_precisely(fitted, cut):
    from streamembed.model_io import model_from_bytes, model_to_bytes

    data = model_to_bytes(fitted[0].model_)
    part = data[:cut]
    expected = (r"starts with b'(PK\\x03)?'" if len(part) < 4
                else r"is not a readable .npz archive \(BadZipFile")
    with pytest.raises(ModelFileError, match=rf"^model bytes \({len(part)} bytes\) .*{expected}"):
        model_from_bytes(part)


def test_corrupt_bytes_are_refused_precisely(fitted):
    import io

    from streamembed.model_io import model_from_bytes, model_to_bytes

    data = model_to_bytes(fitted[0].model_)
    raw = bytearray(data)
    raw[data.index(b"eigenvectors.npy") + 400] ^= 0x01  # a flipped bit in the eigenvectors: the zip's CRC
    with pytest.raises(ModelFileError, match=r"model bytes \(\d+ bytes\) is not a readable .npz archive "
                                             r"\(BadZipFile: Bad CRC-32 for file 'eigenvectors.npy'\)"):
        model_from_bytes(bytes(raw))
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        files = {k: npz[k] for k in npz.files}
    files["eigenvectors"] = files["eigenvectors"] * (1 + 1e-12)  # re-archived: the CRCs hold, the checksum not
    buf = io.BytesIO()
    np.savez(buf, **files)
    with pytest.raises(ModelFileError, match=r"model bytes \(\d+ bytes\) fails its checksum"):
        model_from_bytes(buf.getvalue())
    with pytest.raises(ModelFileError, match=r"single numpy array \(.npy\), not a streamembed model"):
        model_from_bytes(b"\x93NUMPY\x01\x00" + bytes(100))
    with pytest.raises(ModelFileError, match=r"model record at offset 7 \(5 bytes\) is not a streamembed model"):
        from streamembed.model_io import read_model_bytes

        read_model_bytes(b"hello", what="model record at offset 7")
