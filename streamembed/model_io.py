"""Saving and loading fitted models as portable ``.npz`` files (no pickle).

Layout (schema version 1): plain numeric arrays, a unicode array of landmark
ids, and a JSON document (``meta``) with the parameters, the model version and
a SHA-256 checksum over every other array (name, dtype, shape and bytes, in
sorted order). Files are written atomically (temporary file, fsync, rename),
read with ``allow_pickle=False``, and rejected with a ``ModelFileError`` that
says what is wrong when they are truncated, corrupted, of another schema or
internally inconsistent.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from .core.cmds import LandmarkSpectrum
from .core.errors import InputError, ModelFileError

SCHEMA_VERSION = 1
FORMAT_NAME = "streamembed.LandmarkMDS"


def _checksum(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(a.dtype.str.encode())
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def model_arrays(est) -> dict[str, np.ndarray]:
    """The arrays that define a fitted model (what the checksum covers)."""
    sp: LandmarkSpectrum = est.spectrum_
    arrays = {
        "eigenvalues": sp.eigenvalues,
        "eigenvectors": sp.eigenvectors,
        "row_means": sp.row_means,
        "grand_mean": np.array(sp.grand_mean),
        "landmark_ids": np.asarray(est.landmark_ids_, dtype=str),
        "alignment_rotation": est.alignment_rotation_,
        "alignment_shift": est.alignment_shift_,
    }
    if est.dissimilarities_ is not None:
        arrays["dissimilarities"] = est.dissimilarities_
    if est.landmark_features_ is not None:
        arrays["landmark_features"] = est.landmark_features_
    # the input pipeline and a refined map (estimator class docstring); absent for a plain model
    if getattr(est, "landmark_self_similarity_", None) is not None:
        arrays["landmark_self_similarity"] = est.landmark_self_similarity_
    if getattr(est, "geodesic_distances_", None) is not None:
        arrays["geodesic_distances"] = est.geodesic_distances_
    if getattr(est, "additive_constant_", 0.0):
        arrays["additive_constant"] = np.array(float(est.additive_constant_))
    if getattr(est, "landmark_map_", None) is not None:
        arrays["landmark_map"] = est.landmark_map_
    return arrays


def save_model(est, path: str | os.PathLike) -> None:
    """Write ``est`` to ``path`` atomically (the file appears complete or not at all)."""
    arrays = model_arrays(est)
    meta = {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "params": est.get_params(),
        "model_version": int(est.model_version_),
        "n_landmarks": int(est.n_landmarks_),
        "negative_share": float(est.spectrum_.negative_share),
        "spectrum_exact": bool(est.spectrum_.exact),
        "metric": est.metric_,
        "checksum_sha256": _checksum(arrays),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_model(path: str | os.PathLike):
    """Read a model written by ``save_model``; every failure is a ``ModelFileError``."""
    from .estimator import LandmarkMDS

    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"model file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            files = {name: npz[name] for name in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise ModelFileError(f"model file {path} is not a readable .npz archive ({type(exc).__name__}: {exc})") from exc
    if "meta" not in files:
        raise ModelFileError(f"model file {path} has no 'meta' entry: not a streamembed model")
    try:
        meta = json.loads(str(files.pop("meta")))
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"model file {path} has unreadable metadata: {exc}") from exc
    if meta.get("format") != FORMAT_NAME:
        raise ModelFileError(f"model file {path} is a {meta.get('format')!r}, expected {FORMAT_NAME!r}")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise ModelFileError(
            f"model file {path} has schema version {meta.get('schema_version')}; this streamembed reads {SCHEMA_VERSION}"
        )
    required = {"eigenvalues", "eigenvectors", "row_means", "grand_mean", "landmark_ids"}
    missing = required - set(files)
    if missing:
        raise ModelFileError(f"model file {path} lacks {sorted(missing)}")
    if _checksum(files) != meta.get("checksum_sha256"):
        raise ModelFileError(f"model file {path} fails its checksum: the file is corrupted or was edited")
    lam, U = files["eigenvalues"], files["eigenvectors"]
    n = int(meta["n_landmarks"])
    if U.shape != (n, lam.shape[0]) or files["row_means"].shape != (n,) or files["landmark_ids"].shape != (n,):
        raise ModelFileError(
            f"model file {path} is inconsistent: eigenvectors {U.shape}, eigenvalues {lam.shape}, "
            f"row_means {files['row_means'].shape}, landmark_ids {files['landmark_ids'].shape} for n = {n}"
        )
    spectrum = LandmarkSpectrum(
        eigenvalues=lam,
        eigenvectors=U,
        row_means=files["row_means"],
        grand_mean=float(files["grand_mean"]),
        negative_share=float(meta["negative_share"]),
        exact=bool(meta["spectrum_exact"]),
    )
    est = LandmarkMDS(**meta["params"])
    try:
        est._check_params()
        est._set_fitted(
            spectrum,
            files.get("dissimilarities"),
            files["landmark_ids"].tolist(),
            files.get("landmark_features"),
            meta.get("metric"),
            model_version=int(meta["model_version"]),
        )
        est._set_input_state(
            files.get("landmark_self_similarity"),
            files.get("geodesic_distances"),
            float(files["additive_constant"]) if "additive_constant" in files else 0.0,
            files.get("landmark_map"),
        )
        if "alignment_rotation" in files:
            est.set_alignment(files["alignment_rotation"], files["alignment_shift"])
    except InputError as exc:
        raise ModelFileError(f"model file {path} holds an invalid model: {exc}") from exc
    return est
