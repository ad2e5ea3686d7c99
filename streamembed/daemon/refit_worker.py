"""The refit worker: one landmark refit in its own process (docs/math.md §5).

    python -m streamembed.daemon.refit_worker JOB.npz OLD_MODEL.npz NEW_MODEL.npz RECORD.json

JOB.npz (``allow_pickle=False``) holds the candidates: ``dissimilarities``
(N, N) whose first rows are the old landmarks, ``ids`` (N,), optionally
``features`` (N, p), and ``n_landmarks``; or, for candidates with objects, the
object job of ``daemon.refit_jobs`` (their objects, rows and metric), from
which the worker computes the dissimilarities itself. The worker loads the old model,
runs ``core.refit.refit.refit`` (selection, classical MDS, Procrustes alignment),
calibrates the new model's radius and its drift detectors' fit baseline on the
candidates that did not become landmarks (``calibrated``: their mutual
dissimilarities are in the job, docs/math.md §7.8, §9), writes the new model
atomically and a JSON record of what it did
(``"outcome": "installed"``, or ``"kept"`` with no model when the refit would
not improve the map); it exits 0 on success and 1 with ``{"error": ...}`` in
the record otherwise. Nothing
crosses the process boundary but these files: no pickle, and the daemon's
process keeps streaming (and heartbeating) while the eigendecomposition runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamembed.atomic import atomic_write_bytes

#: Figures of ``core.refit.policy`` copied to the top level of the record (the map page and ``plot drift`` read them).
RECORDED = ("captured_before", "captured_after", "captured_best", "captured_share_before", "captured_share_after",
            "unexplained_before", "unexplained_after", "unexplained_best", "movement", "candidate", "gain")


def run(job: Path, old_model: Path, new_model: Path, record: Path) -> int:
    from streamembed.core.refit.refit import DEFAULT_SELECTION, refit
    from streamembed.model_io import read_model_file, save_model

    t0 = time.perf_counter()
    try:
        old, params = read_model_file(old_model)
        with np.load(job, allow_pickle=False) as npz:
            D, ids, features = _candidates(npz, old)
            n_landmarks = int(npz["n_landmarks"])
            selection = str(npz["selection"]) if "selection" in npz.files else DEFAULT_SELECTION
            min_gain = float(npz["min_gain"]) if "min_gain" in npz.files else None
        options: dict[str, Any] = {"min_gain": min_gain} if selection == "adaptive" and min_gain is not None else {}
        res = refit(old, D, ids, n_landmarks=n_landmarks, features=features, selection=selection, **options)
        calibration: dict[str, Any] = {}
        if res.model is not None:
            model, calibration = calibrated(res.model, old, D, ids)
            save_model(model, new_model, params=params)
        doc = {
            "outcome": res.outcome,
            "detail": res.reason,
            "model_version": int(old.version if res.model is None else res.model.version),
            "previous_version": int(old.version),
            "old_landmarks": res.old_ids,
            "new_landmarks": res.new_ids,
            "eigenvalues": res.eigenvalues.tolist(),
            "alignment_rms": res.alignment_rms,
            "fit_seconds": res.duration_seconds,
            "worker_seconds": time.perf_counter() - t0,
            "n_candidates": res.details["n_candidates"],
            "kept_old_landmarks": res.details["kept_old"],
            "selection": selection,
            "selection_details": {k: v for k, v in res.details.items() if k not in ("n_candidates", "kept_old")},
            **{k: res.details[k] for k in RECORDED if k in res.details},
            **calibration,
        }
        code = 0
    except Exception as exc:  # reported to the daemon through the record
        doc = {"error": f"{type(exc).__name__}: {exc}", "worker_seconds": time.perf_counter() - t0}
        code = 1
    atomic_write_bytes(record, json.dumps(doc).encode())
    return code


def _candidates(npz: Any, old: Any) -> tuple[Any, list[str], Any]:
    """(D (N, N), ids, features or objects) of the job: given, or computed from an object job's objects."""
    from streamembed.daemon.refit_jobs import is_object_job, job_candidates

    if is_object_job(npz.files):
        cs = job_candidates(npz, old)
        return cs.D, cs.ids, cs.features
    features = npz["features"] if "features" in npz.files else None
    return npz["dissimilarities"], [str(x) for x in npz["ids"]], features
def calibrated(model: Any, old: Any, D: np.ndarray, ids: list[str]) -> tuple[Any, dict[str, Any]]:
    """(``model`` with its radius calibrated on the candidates that did not become landmarks, at the old model's
    stated coverage, and the drift detectors' fit baseline on them; what was made, for the record). D (N, N) are
    the candidates' dissimilarities, ``ids`` (N,) theirs; a calibration that cannot be made leaves none, and the
    record says why."""
    from streamembed.core.monitor.fit_baseline import fit_baseline_on_matrix
    from streamembed.core.trust.calibrate import calibrate_on_matrix
    from streamembed.core.trust.conformal import DEFAULT_COVERAGE

    where = {str(x): i for i, x in enumerate(ids)}
    rows = np.array([where[str(x)] for x in model.landmark_ids], dtype=np.int64)
    coverage = DEFAULT_COVERAGE if old.radius_calibration is None else old.radius_calibration.coverage
    out = calibrate_on_matrix(model, D, rows, coverage=coverage, random_state=int(model.random_state))
    model = model.with_radius_calibration(out.calibration)
    baseline = fit_baseline_on_matrix(model, D, rows, random_state=int(model.random_state))
    model = model.with_fit_baseline(baseline)
    info = {"radius": "calibrated" if out.calibration is not None else out.reason,
            "drift_baseline_objects": 0 if baseline is None else baseline.n_objects}
    return model, info


def die_with_parent() -> None:
    """Ask Linux to kill this process when the daemon that started it dies (even by SIGKILL).

    A worker left running after its daemon was killed would burn a core for
    nothing (its result is never installed, and the next daemon cleans its
    work directory at start). If the parent is already gone, exit now.
    """
    parent = os.environ.get("STREAMEMBED_REFIT_PARENT")
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the daemon kills its worker when it stops cleanly
    if parent is not None and os.getppid() != int(parent):
        sys.exit(3)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    die_with_parent()
    with contextlib.suppress(OSError):
        os.nice(19)  # background work: the stream (and Kafka heartbeats) come first
    return run(*(Path(a) for a in args))


if __name__ == "__main__":
    sys.exit(main())
