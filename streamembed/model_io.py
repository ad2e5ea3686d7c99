"""Saving and loading fitted models (``core.model.LandmarkModel``) as portable ``.npz`` files, no pickle.

Layout, schema version 2: plain numeric arrays, a unicode array of landmark
ids, and a JSON document ``meta`` (the fit parameters, the estimator's
parameters, the model version and lineage, ...). ``meta.checksum_sha256``
covers **everything else in the file**: every array (name, dtype, shape,
bytes, in sorted order) and the metadata itself (canonical JSON without the
checksum field), so an edited parameter is caught like a flipped bit.

Files and bytes are one format: ``model_to_bytes`` / ``model_from_bytes`` give
and take the content of a model file in memory (the model topic, the Dask
backfill's workers: no temporary file), and ``save_model`` / ``load_model``
stream the same archive to and from a path. The archive's entries carry a
fixed timestamp, so a model's bytes depend on the model alone. Files are
written atomically (``streamembed.atomic``); everything is written without
pickle and read with ``allow_pickle=False``. Anything wrong — a ``.npy``
array, a text file, truncation, corruption, another schema, inconsistent
shapes, metadata of the wrong type — is a ``ModelFileError`` that says what
the file (or the bytes) is and what was expected. Schema version 1 files
(arrays-only checksum) are still read, with their metadata validated field by
field. Metadata added since (``negative_ratio``, ``eigengap``) is optional: a
file without it gets the value recomputed or None. The radius calibration
(``core.trust.calibration``, docs/math.md §9) is a ``radius`` block of the
metadata (its own ``version``) and ``radius_*`` arrays; a file without it
(saved before it existed, or from a fit without non-landmark objects) loads
with no radius. The kernel bandwidth (``bandwidth``, ``kernel_bandwidth``, docs/math.md §8.6) is metadata too;
a file without it gets the §3.3 rule's σ from what it keeps (``core.fit.bandwidth.saved_bandwidth``).
with no radius. The drift detectors' fit baseline (``core.monitor.baseline``, docs/math.md §7.8) is a
``drift_baseline`` block and ``drift_baseline_*`` arrays, the same way: a file without it loads, and its
detectors take their baseline from the stream.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .atomic import atomic_file
from .core.fit.bandwidth import saved_bandwidth
from .core.fit.cmds import LandmarkSpectrum
from .core.errors import InputError, ModelFileError
from .core.model import LandmarkModel, relative_eigengap
from .core.options import DEFAULTS, check_options, config_names
from .core.fit.ordinal_map import MonotoneTransform
from .core.inputs.transforms import InputPipeline
from .core.monitor.baseline import FitBaseline
from .core.trust.calibration import RadiusCalibration
from .model_objects import OBJECTS_META, object_arrays, objects_of_file

__all__ = ["SCHEMA_VERSION", "FORMAT_NAME", "save_model", "load_model", "read_model_file", "model_arrays",
           "model_to_bytes", "model_from_bytes", "read_model_bytes", "check_archive", "validate_arrays",
           "MAX_INFLATION", "max_model_bytes"]

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
FORMAT_NAME = "streamembed.LandmarkMDS"

_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip entry can state: the bytes do not depend on the clock


def _checksum(arrays: dict[str, np.ndarray], meta: dict[str, Any] | None) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(a.dtype.str.encode())
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    if meta is not None:
        body = {k: v for k, v in meta.items() if k != "checksum_sha256"}
        h.update(json.dumps(body, sort_keys=True).encode())
    return h.hexdigest()


def model_arrays(model: LandmarkModel) -> dict[str, np.ndarray]:
    """The arrays that define a fitted model."""
    sp = model.spectrum
    arrays: dict[str, np.ndarray] = {
        "eigenvalues": sp.eigenvalues,
        "eigenvectors": sp.eigenvectors,
        "row_means": sp.row_means,
        "grand_mean": np.array(sp.grand_mean),
        "landmark_ids": np.asarray(model.landmark_ids, dtype=str),
        "alignment_rotation": np.asarray(model.rotation),  # never None once built (LandmarkModel.__post_init__)
        "alignment_shift": np.asarray(model.shift),
        **model.pipeline.state(),
    }
    if model.dissimilarities is not None:
        arrays["dissimilarities"] = model.dissimilarities
    if model.features is not None and not model.has_objects:
        arrays["landmark_features"] = model.features
    arrays.update(object_arrays(model.features)[0])  # strings, bytes or series (model_objects)
    if model.landmark_map is not None:
        arrays["landmark_map"] = model.landmark_map
    if model.map_transform is not None:  # a non-metric map's monotone transformation (core.fit.ordinal_map)
        arrays["map_transform_x"] = model.map_transform.knots_x
        arrays["map_transform_y"] = model.map_transform.knots_y
    if model.radius_calibration is not None:  # the radius's calibration (core.trust; meta "radius" has the rest)
        arrays.update(model.radius_calibration.state()[0])
    if model.fit_baseline is not None:  # the drift detectors' fit baseline (meta "drift_baseline" has the rest)
        arrays.update(model.fit_baseline.state()[0])
    return arrays


def model_to_bytes(model: LandmarkModel, params: dict[str, Any] | None = None) -> bytes:
    """The model as the bytes of its ``.npz`` file (what ``save_model`` writes), built in memory.

    ``params`` are the estimator's (method, ...) to restore with it. The bytes
    depend on the model alone (fixed entry order and timestamps): the same
    model gives the same bytes, hence the same sha256, in any process.
    """
    buf = io.BytesIO()
    _write_npz(buf, model, params)
    return buf.getvalue()


def save_model(model: LandmarkModel, path: str | os.PathLike[str], params: dict[str, Any] | None = None) -> None:
    """Write ``model`` to ``path`` atomically: the bytes of :func:`model_to_bytes`, streamed to the file.

    The parent directory must exist (a model is never written somewhere the user did not ask for).
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise ModelFileError(f"cannot write model {path}: directory {path.parent} does not exist")
    with atomic_file(path) as fh:
        _write_npz(fh, model, params)


def _metadata(model: LandmarkModel, arrays: dict[str, np.ndarray], params: dict[str, Any] | None) -> dict[str, Any]:
    est_params = dict(params or {})
    est_params.setdefault("method", DEFAULTS["method"])
    meta = {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "model_version": int(model.version),
        "lineage": model.lineage,
        "n_landmarks": int(model.n_landmarks),
        "n_components": int(model.n_components),
        "negative_share": float(model.spectrum.negative_share),
        "spectrum_exact": bool(model.spectrum.exact),
        "metric": model.metric,
        "fit_params": dict(model.fit_params),
        "map_info": model.map_info,
        "params": _jsonable(est_params),
        "random_state": int(model.random_state),
        "negative_ratio": model.negative_ratio,
        "eigengap": model.eigengap,
        "radius": None if model.radius_calibration is None else model.radius_calibration.state()[1],
        "bandwidth": model.bandwidth,
        "kernel_bandwidth": model.kernel_bandwidth,
        "drift_baseline": None if model.fit_baseline is None else model.fit_baseline.state()[1],
    }
    if model.has_objects:
        meta[OBJECTS_META] = object_arrays(model.features)[1]
    meta["checksum_sha256"] = _checksum(arrays, meta)
    return meta


def _write_npz(fh: BinaryIO, model: LandmarkModel, params: dict[str, Any] | None) -> None:
    """The ``.npz`` archive of ``model`` into ``fh``: what ``np.savez`` writes (stored ``NAME.npy`` entries, ``meta``
    first, ``allow_pickle=False``), with a fixed timestamp so that the bytes depend on the model alone."""
    arrays = model_arrays(model)
    entries = {"meta": np.array(json.dumps(_metadata(model, arrays, params), sort_keys=True)), **arrays}
    with zipfile.ZipFile(fh, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, a in entries.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME)
            with zf.open(info, "w", force_zip64=True) as entry:
                np.lib.format.write_array(entry, np.asanyarray(a), allow_pickle=False)


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    return {k: (int(v) if isinstance(v, np.integer) else v) for k, v in params.items()}


def load_model(path: str | os.PathLike[str]) -> LandmarkModel:
    """Read the fitted model of a file written by ``save_model``; every failure is a ``ModelFileError``."""
    return read_model_file(path)[0]


def model_from_bytes(data: bytes | bytearray | memoryview) -> LandmarkModel:
    """The fitted model of ``.npz`` bytes (:func:`model_to_bytes`, or a model file's content); every failure is a
    ``ModelFileError`` naming what is wrong (truncated, corrupted, not a model, another schema, ...)."""
    return read_model_bytes(data)[0]


def read_model_bytes(data: bytes | bytearray | memoryview, *,
                     what: str = "model bytes") -> tuple[LandmarkModel, dict[str, Any]]:
    """(the model, the estimator parameters saved with it) of ``.npz`` bytes; ``what`` names them in errors."""
    raw = data if isinstance(data, bytes) else bytes(data)  # io.BytesIO shares a bytes object, copies the rest
    label = f"{what} ({len(raw)} bytes)"
    _check_head(raw[:8], label, None)
    return _parse(_read_npz(io.BytesIO(raw), label), label)


def read_model_file(path: str | os.PathLike[str]) -> tuple[LandmarkModel, dict[str, Any]]:
    """(the model, the estimator parameters saved with it); every failure is a ``ModelFileError``."""
    path = Path(path)
    label = f"model file {path}"
    if not path.exists():
        raise ModelFileError(f"{label} does not exist")
    if path.is_dir():
        raise ModelFileError(f"{label} is a directory, not a model (.npz from `streamembed fit`)")
    if not path.is_file():  # a FIFO would block the open, a device (/dev/zero) never end
        raise ModelFileError(f"{label} is not a regular file (a device, FIFO or socket), not a model (.npz from "
                             f"`streamembed fit`)")
    try:
        with open(path, "rb") as fh:
            _check_head(fh.read(8), label, path.name)
            fh.seek(0)
            files = _read_npz(fh, label)
    except OSError as exc:
        raise ModelFileError(f"{label} cannot be read: {exc}") from exc
    return _parse(files, label)


def _parse(files: dict[str, np.ndarray], label: str) -> tuple[LandmarkModel, dict[str, Any]]:
    """The model of an archive's entries, its metadata and checksum verified; ``label`` names the source."""
    try:
        meta = json.loads(str(files.pop("meta")))
    except (json.JSONDecodeError, ValueError) as exc:
        raise ModelFileError(f"{label} has unreadable metadata: {exc}") from exc
    if not isinstance(meta, dict):
        raise ModelFileError(f"{label} has metadata of type {type(meta).__name__}, expected an object")
    if meta.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{label} is a {meta.get('format')!r}, expected {FORMAT_NAME!r}")
    schema = meta.get("schema_version")
    if schema not in READABLE_SCHEMAS:
        raise ModelFileError(f"{label} has schema version {schema!r}; this streamembed reads "
                             f"{', '.join(map(str, READABLE_SCHEMAS))}")
    covered = meta if schema == 2 else None
    if _checksum(files, covered) != meta.get("checksum_sha256"):
        raise ModelFileError(f"{label} fails its checksum: the archive is corrupted or was edited")
    try:
        return _build(files, meta if schema == 2 else _upgrade_v1(meta))
    except (InputError, KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{label} holds an invalid model: {type(exc).__name__}: {exc}") from exc


def _check_head(head: bytes, label: str, name: str | None) -> None:
    """Refuse what is not a zip archive by its first bytes, saying what it looks like instead."""
    if head.startswith(_NPY_MAGIC):
        make = f"`streamembed fit --dissimilarities {name or 'D.npy'} -o model.npz`"
        raise ModelFileError(f"{label} is a single numpy array (.npy), not a streamembed model: make one with {make}")
    if not head.startswith(_ZIP_MAGIC):
        raise ModelFileError(f"{label} is not a streamembed model (.npz archive from `streamembed fit`): "
                             f"it starts with {head!r}")


#: A compressed archive entry may hold at most this many times its compressed size (float arrays compress 1-5x;
#: a 2 MB entry that inflates to 2 GiB is a decompression bomb), unless it is small (``_SMALL_ENTRY`` bytes).
MAX_INFLATION = 64
_SMALL_ENTRY = 1 << 20


def max_model_bytes() -> int:
    """The hard cap on a model's uncompressed size: half the process's memory limit where one is known, else 64 GiB."""
    from .memlimit import memory_limit

    limit = memory_limit()
    cap = 64 << 30
    return cap if limit is None else min(cap, int(limit.bytes) // 2)


def check_archive(fh: BinaryIO, label: str, cap: int | None = None) -> None:
    """Refuse (``ModelFileError``) an archive whose entries would inflate beyond what a model can be, before any
    entry is decompressed: from the sizes its own headers state (which bound every read: ``zipfile`` stops there and
    checks the CRC), their sum against ``cap`` (:func:`max_model_bytes`), each compressed entry against
    ``MAX_INFLATION`` times its compressed size, and each ``.npy`` entry's array header against its stated size (so
    no array is allocated beyond it)."""
    cap = max_model_bytes() if cap is None else int(cap)
    try:
        with zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            total = sum(i.file_size for i in infos)
            if total > cap:
                raise ModelFileError(f"{label} would inflate to {total} bytes, more than a model may hold here "
                                     f"({cap} bytes)")
            for info in infos:
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise ModelFileError(f"{label}: entry {info.filename!r} uses compression method "
                                         f"{info.compress_type}, which a model file never does")
                if info.file_size > max(_SMALL_ENTRY, MAX_INFLATION * max(1, info.compress_size)):
                    raise ModelFileError(f"{label}: entry {info.filename!r} would inflate {info.compress_size} "
                                         f"bytes to {info.file_size} (more than {MAX_INFLATION}x): not a model file")
                _check_npy_header(zf, info, label)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{label} is not a readable .npz archive ({type(exc).__name__}: {exc})") from exc
    finally:
        fh.seek(0)


def _check_npy_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, label: str) -> None:
    """The array an ``.npy`` entry declares must fit the entry's stated size (read: its header only)."""
    if not info.filename.endswith(".npy"):
        return
    with zf.open(info) as entry:
        version = np.lib.format.read_magic(entry)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read_header is None:
            raise ModelFileError(f"{label}: entry {info.filename!r} is a .npy of version {version}, which a model "
                                 f"file never is")
        shape, _, dtype = read_header(entry)
        header = entry.tell() if entry.seekable() else 0
    if dtype.hasobject:
        return  # a pickle: np.load refuses it (allow_pickle=False), naming why
    need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if header and need > info.file_size - header:
        raise ModelFileError(f"{label}: entry {info.filename!r} declares a {shape} {dtype} array ({need} bytes) "
                             f"in {info.file_size - header} bytes")


def _read_npz(fh: BinaryIO, label: str) -> dict[str, np.ndarray]:
    """Every entry of the ``.npz`` archive in ``fh``, read with ``allow_pickle=False`` once :func:`check_archive`
    found nothing that inflates beyond a model."""
    check_archive(fh, label)
    try:
        with np.load(fh, allow_pickle=False) as npz:
            files = {name: npz[name] for name in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise ModelFileError(f"{label} is not a readable .npz archive ({type(exc).__name__}: {exc})") from exc
    if "meta" not in files:
        raise ModelFileError(f"{label} has no 'meta' entry: an .npz archive, but not a streamembed model")
    return files


#: fit_params checked against the option table on loading (the others are checked by the spectrum they rebuild).
_CHECKED_FIT_PARAMS = ("input", "geodesic_neighbors", "correction", "landmark_map")
_V1_FIT_PARAMS = ("input", "geodesic_neighbors", "correction", "landmark_map", "n_residual_components", "eigensolver")


def _upgrade_v1(meta: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 metadata document, validated field by field (its checksum does not cover it), as schema 2."""
    params = meta.get("params")
    if not isinstance(params, dict):
        raise TypeError(f"'params' must be an object, got {type(params).__name__}")
    known = {"n_components", "method", "n_residual_components", "eigensolver", "n_threads", "random_state",
             *_V1_FIT_PARAMS}
    unknown = sorted(set(params) - known)
    if unknown:
        raise KeyError(f"unknown parameter(s) {unknown} in 'params'")
    return {**meta, "n_components": params.get("n_components"), "lineage": "", "map_info": None,
            "fit_params": {k: params.get(k, d) for k, d in (("input", "dissimilarity"), ("geodesic_neighbors", None),
                           ("correction", "none"), ("landmark_map", "cmds"), ("n_residual_components", None),
                           ("eigensolver", "auto"))},
            "random_state": params.get("random_state", 0),
            "params": {k: params[k] for k in ("method", "n_threads") if k in params}}


def _expect(meta: dict[str, Any], key: str, types: tuple[type, ...], allow_none: bool = False) -> Any:
    if key not in meta:
        raise KeyError(f"metadata lacks {key!r}")
    v = meta[key]
    if v is None and allow_none:
        return v
    if isinstance(v, bool) and bool not in types:
        raise TypeError(f"metadata {key!r} must be {'/'.join(t.__name__ for t in types)}, got {v!r}")
    if not isinstance(v, types):
        raise TypeError(f"metadata {key!r} must be {'/'.join(t.__name__ for t in types)}, got {v!r}")
    return v


def _negative_ratio(meta: dict[str, Any]) -> float | None:
    v = meta.get("negative_ratio")
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
        raise TypeError(f"metadata 'negative_ratio' must be a non-negative number or null, got {v!r}")
    return float(v)


def _eigengap(meta: dict[str, Any], spectrum: LandmarkSpectrum, d: int) -> float | None:
    """The saved relative eigengap; for a file saved before it existed, from the kept eigenvalues when d < r."""
    if "eigengap" not in meta:
        return relative_eigengap(spectrum, d)
    v = meta["eigengap"]
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        raise TypeError(f"metadata 'eigengap' must be a finite number or null, got {v!r}")
    return float(v)


def _map_transform(files: dict[str, np.ndarray], kind: str) -> MonotoneTransform | None:
    """A non-metric map's monotone transformation from its knots (files written before it have none)."""
    x, y = files.get("map_transform_x"), files.get("map_transform_y")
    if (kind == "nonmetric") != (x is not None and y is not None):
        raise ValueError(f"landmark_map={kind!r} " + ("needs" if kind == "nonmetric" else "cannot have")
                         + " the monotone transformation's knots map_transform_x and map_transform_y")
    return None if x is None or y is None else MonotoneTransform(knots_x=x, knots_y=y)


def validate_arrays(files: dict[str, np.ndarray], d: int) -> None:
    """Refuse (ValueError) a model whose arrays could only give wrong numbers: any non-finite value in any numeric
    array (a ``shift`` of NaN made every output NaN with no flag), or an alignment of the wrong shape.

    Every load goes through here (a model file, the model topic, a refit's result), whatever its checksum says: a
    checksum proves who wrote the bytes, not that the numbers are usable.
    """
    for name, a in files.items():
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            bad = int(a.size - np.isfinite(a).sum())
            raise ValueError(f"array {name!r} holds {bad} non-finite value(s) (NaN or infinity)")
        if a.dtype.kind in "OV":
            raise ValueError(f"array {name!r} has dtype {a.dtype}, not a number or a string")
    rotation, shift = files.get("alignment_rotation"), files.get("alignment_shift")
    if rotation is not None and rotation.shape != (d, d):
        raise ValueError(f"alignment_rotation must have shape ({d}, {d}), got {rotation.shape}")
    if shift is not None and shift.shape != (d,):
        raise ValueError(f"alignment_shift must have shape ({d},), got {shift.shape}")
    if (rotation is None) != (shift is None):
        raise ValueError("alignment_rotation and alignment_shift come together")
    if files["grand_mean"].shape != ():
        raise ValueError(f"grand_mean must be a scalar, got shape {files['grand_mean'].shape}")


def _build(files: dict[str, np.ndarray], meta: dict[str, Any]) -> tuple[LandmarkModel, dict[str, Any]]:
    required = {"eigenvalues", "eigenvectors", "row_means", "grand_mean", "landmark_ids"}
    missing = required - set(files)
    if missing:
        raise KeyError(f"arrays {sorted(missing)} are missing")
    n = _expect(meta, "n_landmarks", (int,))
    d = _expect(meta, "n_components", (int,))
    version = _expect(meta, "model_version", (int,))
    if version < 1 or d < 1:
        raise ValueError(f"model_version ({version}) and n_components ({d}) must be positive")
    fp = _expect(meta, "fit_params", (dict,))
    if set(fp) != set(_V1_FIT_PARAMS):
        raise KeyError(f"fit_params must have exactly the keys {list(_V1_FIT_PARAMS)}, got {sorted(fp)}")
    check_options(config_names("fit_params"), **{k: fp[k] for k in _CHECKED_FIT_PARAMS})
    k = fp["geodesic_neighbors"]
    params = _expect(meta, "params", (dict,))
    # the method alone: a file saved without the estimator's params holds the default method whatever its map
    check_options(config_names("params"), method=params.get("method", DEFAULTS["method"]))
    lam, U = files["eigenvalues"], files["eigenvectors"]
    if (U.ndim != 2 or lam.ndim != 1 or U.shape != (n, lam.shape[0]) or files["row_means"].shape != (n,)
            or files["landmark_ids"].shape != (n,) or d > lam.shape[0]):
        raise ValueError(f"inconsistent shapes: eigenvectors {U.shape}, eigenvalues {lam.shape}, row_means "
                         f"{files['row_means'].shape}, landmark_ids {files['landmark_ids'].shape} for n = {n}, d = {d}")
    if not (np.isfinite(lam).all() and (lam > 0).all() and np.isfinite(U).all()):
        raise ValueError("the eigenvalues must be finite and positive and the eigenvectors finite")
    spectrum = LandmarkSpectrum(eigenvalues=lam, eigenvectors=U, row_means=files["row_means"],
                                grand_mean=float(files["grand_mean"]),
                                negative_share=float(_expect(meta, "negative_share", (int, float))),
                                exact=bool(_expect(meta, "spectrum_exact", (bool,))))
    pipeline = InputPipeline.from_state(files, n, input=fp["input"], geodesic_neighbors=k, correction=fp["correction"])
    X_map = files.get("landmark_map")
    if (fp["landmark_map"] != "cmds") != (X_map is not None) or (X_map is not None and X_map.shape != (n, d)):
        raise ValueError(f"landmark_map={fp['landmark_map']!r} needs a refined (n, d) = ({n}, {d}) configuration")
    transform = _map_transform(files, fp["landmark_map"])
    ids = files["landmark_ids"].tolist()
    if len(set(ids)) != n:
        raise ValueError("landmark ids must be unique")
    metric = _expect(meta, "metric", (str,), allow_none=True)
    features = files.get("landmark_features")
    if features is not None and (features.ndim != 2 or features.shape[0] != n):
        raise ValueError(f"landmark_features must have {n} rows, got shape {features.shape}")
    objects = objects_of_file(files, meta, n)
    if objects is not None:
        if features is not None:
            raise ValueError("a model keeps landmark features or landmark objects, not both")
        features = objects
    D = files.get("dissimilarities")
    if D is not None and D.shape != (n, n):
        raise ValueError(f"dissimilarities must have shape ({n}, {n}), got {D.shape}")
    lineage = _expect(meta, "lineage", (str,))
    validate_arrays(files, d)
    sigma, given = saved_bandwidth(meta.get("bandwidth"), meta.get("kernel_bandwidth"), stored="bandwidth" in meta,
                                   skeleton=params.get("landmark_selection") == "skeleton",
                                   core=(pipeline, D, features, metric))
    model = LandmarkModel(spectrum=spectrum, n_components=d, landmark_ids=np.asarray(ids), pipeline=pipeline,
                          fit_params=dict(fp), landmark_map=X_map, map_transform=transform,
                          map_info=_expect(meta, "map_info", (dict,), allow_none=True), version=version,
                          lineage=lineage, dissimilarities=D, features=features, metric=metric,
                          random_state=int(_expect(meta, "random_state", (int,))),
                          negative_ratio=_negative_ratio(meta), eigengap=_eigengap(meta, spectrum, d),
                          bandwidth=sigma, kernel_bandwidth=given)
    if "alignment_rotation" in files:
        model = model.aligned(files["alignment_rotation"], files["alignment_shift"])
    if meta.get("radius") is not None:  # files saved before the radius, or without a calibration, have none
        model = model.with_radius_calibration(RadiusCalibration.from_state(files, meta["radius"], n, d))
    if meta.get("drift_baseline") is not None:  # files saved before it, or fitted without other objects, have none
        model = model.with_fit_baseline(FitBaseline.from_state(files, meta["drift_baseline"], d))
    return model, params
