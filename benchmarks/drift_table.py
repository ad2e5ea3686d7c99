"""The drift table: population switches on real dissimilarity streams, default settings (docs/drift.md).

    python -m benchmarks.drift_table [--pools words,...] [--seeds 5] [--daemon words,sp500_dtw,code_to_prose]
                                     [--daemon-seeds 1] [--coverage-seeds 5]
                                     [--out docs/drift-table.md]

For each pool of ``benchmarks.drift_pools`` (six real switches, four of them
edit or alignment distances) and seed s: the map is what ``streamembed fit
--dissimilarities --landmarks N --seed s`` makes of the pool's 1,000 (or
fewer) old fit objects — 200 landmarks (100 for pools of fewer than 800 fit
objects) by max-variance, d = 2, the radius and the drift detectors' fit
baseline calibrated on the other fit objects (``LandmarkMDS(n_landmarks=N)``,
the same code). Streams are dissimilarity rows to the landmarks of objects
drawn with replacement from the pool's other old objects and from its new
ones, in batches of 500 rows (files of 500 rows in the daemon), fed to the
real ``monitors.drift.DriftMonitor`` with the default ``[drift]`` settings
(``drift.detector = cusum+plane+coverage``, ERT 10⁸):

* *switch*: 24,000 old rows then 12,000 new ones: objects from the switch to
  the first alarm (median and max over seeds; "none" when there was none)
  and which detector fired;
* *switch at 2,000* (armed from the fit): 2,000 old rows then 10,000 new;
* *stationary*: 60,000 old rows (36,000 after the stream baseline): false
  alarms (after an alarm the detector takes a new baseline, as after a refit
  that keeps the map);
* *Procrustes*: the old map's placement of 600 new objects against their own
  full classical MDS (``quality.procrustes_share``), and a map of the same
  size fitted on them (max-variance among them): the issue's criterion is a
  gain ≥ 0.15;
* *refit*: what the refit policy (``core.refit.policy.plan_refit``, the
  daemon's default ``adaptive``) makes of the old landmarks and those 600
  new objects: the map's captured share of their best 2-plane before and
  after, and whether it installs.

``--daemon`` runs the first ``--daemon-seeds`` seeds (default 1) of the named pools through the real daemon
(``streamembed fit`` then ``streamembed run`` on a directory in batch mode,
default settings; the switch stream also carries one block of the 600 new
objects with their mutual dissimilarities, the refit's candidates): objects
to the alarm and its detector from the "drift: alarm" log line (the switch at
24,000 and, in a daemon of its own, the switch at 2,000), the refit's outcome
and captured shares from ``model-history.jsonl``, false alarms on the
stationary stream. In-process and daemon rows are marked.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.drift_pools import POOLS, DriftPool, load_pool

BATCH = 500
OLD, NEW, EARLY, STATIONARY = 24_000, 12_000, 2_000, 60_000
#: The target of the issue: switches whose new objects a map fitted on them shows better by this much are alarmed
#: within ``WITHIN`` objects.
GAIN, WITHIN = 0.15, 5_000


@dataclass
class Run:
    """One pool, one seed."""

    delay: float = math.inf
    detector: str = ""
    early_delay: float = math.inf
    early_detector: str = ""
    false_alarms: int = 0
    stationary_objects: int = 0
    procrustes_old: float = math.nan
    procrustes_new: float = math.nan
    share_before: float = math.nan
    share_after: float = math.nan
    refit: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def landmarks_of(pool: DriftPool) -> int:
    return 200 if pool.D_fit.shape[0] >= 800 else 100


def fitted(pool: DriftPool, seed: int) -> Any:
    from streamembed import LandmarkMDS

    return LandmarkMDS(n_components=2, n_landmarks=landmarks_of(pool), random_state=seed).fit(pool.D_fit).model_


def _monitor(model: Any) -> Any:
    from streamembed.config.schema import DriftConfig
    from streamembed.monitors.drift import DriftMonitor, build_trigger

    cfg = DriftConfig()
    return DriftMonitor(model, cfg, build_trigger(cfg))


def stream(model: Any, monitor: Any, rows: np.ndarray, rng: np.random.Generator, count: int, lm: np.ndarray,
           stop_at_alarm: bool) -> list[tuple[int, str]]:
    """Feed ``count`` rows drawn from ``rows`` in batches; the alarms as (objects seen, detector)."""
    alarms: list[tuple[int, str]] = []
    for start in range(0, count, BATCH):
        A = rows[rng.integers(0, rows.shape[0], min(BATCH, count - start))][:, lm]
        res = model.place(A, k0_rows=32, errors="mask")
        before = monitor.triggered_at
        monitor.observe(A, res)
        if monitor.triggered_at is not None and monitor.triggered_at != before:
            alarms.append((int(monitor.triggered_at), _fired_by(monitor)))
            if stop_at_alarm:
                break
            monitor.accept()
            monitor.triggered_at = None
    return alarms


def _fired_by(monitor: Any) -> str:
    return str(getattr(monitor.trigger, "fired_by", None) or monitor.trigger.kind)


def procrustes(model: Any, pool: DriftPool, lm: np.ndarray) -> tuple[float, float]:
    """(the old map's Procrustes share on the 600 new objects, a map fitted on them) against their full CMDS."""
    from streamembed import LandmarkMDS
    from streamembed.core.refit.landmarks import initial_landmarks
    from streamembed.quality import classical_mds, procrustes_share

    D = pool.D_new_eval
    full = classical_mds(D, 2).Y
    y_old = model.place(pool.new_rows[pool.new_eval][:, lm], errors="mask").y
    n = min(landmarks_of(pool), D.shape[0] // 3)
    L = initial_landmarks("max-variance", n, D=D, random_state=0, n_components=2)
    own = LandmarkMDS(n_components=2).fit(D[np.ix_(L, L)]).model_
    return procrustes_share(y_old, full), procrustes_share(own.place(D[:, L], errors="mask").y, full)


def refit_plan(model: Any, pool: DriftPool, lm: np.ndarray) -> Any:
    """The adaptive policy on the old landmarks and the 600 new objects (what a daemon's refit decides)."""
    from streamembed.core.refit.policy import plan_refit

    n = lm.size
    E = pool.new_eval
    D = np.empty((n + E.size, n + E.size))
    D[:n, :n] = pool.D_fit[np.ix_(lm, lm)]
    D[n:, :n] = pool.new_rows[E][:, lm]
    D[:n, n:] = D[n:, :n].T
    D[n:, n:] = pool.D_new_eval
    return plan_refit(D, n, n, model.embedding, 2, seed=0)


def in_process(name: str, seed: int) -> Run:
    pool = load_pool(name)
    model = fitted(pool, seed)
    lm = np.array([int(x) for x in model.landmark_ids])
    rng = np.random.default_rng(100 + seed)
    run = Run()
    mon = _monitor(model)
    pre = stream(model, mon, pool.old_rows, rng, OLD, lm, stop_at_alarm=True)
    if pre:
        run.extra["alarm_before_switch"] = pre[0]
    else:
        post = stream(model, mon, pool.new_rows, rng, NEW, lm, stop_at_alarm=True)
        if post:
            run.delay, run.detector = post[0][0] - OLD, post[0][1]
    mon = _monitor(model)
    pre = stream(model, mon, pool.old_rows, rng, EARLY, lm, stop_at_alarm=True)
    post = [] if pre else stream(model, mon, pool.new_rows, rng, NEW - EARLY, lm, stop_at_alarm=True)
    if post:
        run.early_delay, run.early_detector = post[0][0] - EARLY, post[0][1]
    mon = _monitor(model)
    alarms = stream(model, mon, pool.old_rows, rng, STATIONARY, lm, stop_at_alarm=False)
    run.false_alarms, run.stationary_objects = len(alarms), STATIONARY
    run.extra["false_alarm_detectors"] = [a[1] for a in alarms]
    run.procrustes_old, run.procrustes_new = procrustes(model, pool, lm)
    plan = refit_plan(model, pool, lm)
    run.share_before = plan.details.get("captured_share_before", math.nan)
    run.share_after = plan.details.get("captured_share_after", run.share_before)
    run.refit = plan.action
    return run


# ----------------------------------------------------------------------------- the real daemon
def _write(directory: Path, name: str, table: Any, at: float) -> None:
    import pyarrow.parquet as pq

    path = directory / f"{name}.parquet"
    pq.write_table(table, path)
    os.utime(path, (at, at))


def _table(ids: list[str], A: np.ndarray, cross: np.ndarray | None = None) -> Any:
    import pyarrow as pa

    cols = {"id": pa.array(ids, pa.string()),
            "dissimilarities": pa.FixedSizeListArray.from_arrays(pa.array(A.astype(np.float64).ravel()), A.shape[1])}
    if cross is not None:
        cols["cross"] = pa.FixedSizeListArray.from_arrays(pa.array(cross.astype(np.float64).ravel()), cross.shape[1])
    return pa.table(cols)


def _files(directory: Path, parts: list[tuple[str, np.ndarray]], block: tuple[np.ndarray, np.ndarray] | None,
           block_after: int) -> None:
    """Write the rows of ``parts`` in files of BATCH rows, in order (increasing mtimes), the block after
    ``block_after`` rows."""
    directory.mkdir(parents=True)
    at, k, written = time.time() - 10_000, 0, 0
    for prefix, rows in parts:
        for start in range(0, rows.shape[0], BATCH):
            part = rows[start:start + BATCH]
            _write(directory, f"{k:05d}-{prefix}", _table([f"{prefix}-{start + i}" for i in range(part.shape[0])],
                                                          part), at + k)
            k += 1
            written += part.shape[0]
            if block is not None and written == block_after:
                _write(directory, f"{k:05d}-block", _table([f"block-{i}" for i in range(block[0].shape[0])],
                                                           *block), at + k)
                k += 1


def _daemon(root: Path, model: Path, incoming: Path, timeout: float = 900.0) -> tuple[int, list[dict[str, Any]], Path]:
    out = root / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMEMBED_")}
    env.update({"STREAMEMBED_SOURCE__KIND": "directory", "STREAMEMBED_MODEL__PATH": str(model),
                "STREAMEMBED_DIRECTORY__PATH": str(incoming), "STREAMEMBED_OUTPUT__ROOT": str(out),
                "STREAMEMBED_DIRECTORY__EXIT_WHEN_IDLE": "true", "STREAMEMBED_DIRECTORY__SETTLE_SECONDS": "0",
                "STREAMEMBED_LOGGING__FORMAT": "json", "STREAMEMBED_METRICS__ENABLED": "false"})
    log = root / "daemon.log"
    with open(log, "wb") as fh:
        code = subprocess.run([sys.executable, "-m", "streamembed", "run"], env=env, stdout=fh,
                              stderr=subprocess.STDOUT, timeout=timeout, check=False).returncode
    records = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return code, records, out


def through_daemon(name: str, seed: int = 0) -> Run:
    """The switch and stationary streams of seed ``seed`` through ``streamembed fit`` and ``streamembed run``."""
    pool = load_pool(name)
    run = Run()
    with tempfile.TemporaryDirectory(prefix=f"drift-table-{name}-") as tmp:
        root = Path(tmp)
        np.save(root / "D_fit.npy", pool.D_fit)
        fit = subprocess.run([sys.executable, "-m", "streamembed", "fit", "--dissimilarities", "D_fit.npy",
                              "--landmarks", str(landmarks_of(pool)), "--seed", str(seed), "--landmarks-out",
                              "lm.txt", "-o", "model.npz"], cwd=root, capture_output=True, text=True, check=False)
        if fit.returncode != 0:
            raise RuntimeError(f"streamembed fit failed: {fit.stderr}")
        lm = np.array([int(x) for x in (root / "lm.txt").read_text().split()])
        rng = np.random.default_rng(100 + seed)
        old = pool.old_rows[rng.integers(0, pool.old_rows.shape[0], OLD)][:, lm]
        new = pool.new_rows[rng.integers(0, pool.new_rows.shape[0], NEW)][:, lm]
        E = pool.new_eval
        block = (pool.new_rows[E][:, lm], pool.D_new_eval)
        _files(root / "switch" / "incoming", [("old", old), ("new", new)], block, OLD + BATCH)
        t0 = time.perf_counter()
        code, records, out = _daemon(root / "switch", root / "model.npz", root / "switch" / "incoming")
        run.extra["switch_seconds"] = time.perf_counter() - t0
        run.extra["switch_exit"] = code
        alarms = [r for r in records if str(r.get("msg", "")).startswith("drift: alarm")]
        if alarms:
            run.delay = float(alarms[0].get("objects_seen", math.nan)) - OLD
            run.detector = str(alarms[0].get("detector", ""))
        run.extra["armed_log"] = [r["msg"] for r in records if str(r.get("msg", "")).startswith("drift monitoring")]
        history = out / "model-history.jsonl"
        if history.exists():
            recs = [json.loads(x) for x in history.read_text().splitlines() if x.strip()]
            if recs:
                run.refit = str(recs[0].get("status", ""))
                run.share_before = float(recs[0].get("captured_share_before", math.nan))
                run.share_after = float(recs[0].get("captured_share_after", run.share_before))
        early = [("old", pool.old_rows[rng.integers(0, pool.old_rows.shape[0], EARLY)][:, lm]),
                 ("new", pool.new_rows[rng.integers(0, pool.new_rows.shape[0], NEW - EARLY)][:, lm])]
        _files(root / "early" / "incoming", early, None, 0)
        code, records, _ = _daemon(root / "early", root / "model.npz", root / "early" / "incoming")
        run.extra["early_exit"] = code
        alarms = [r for r in records if str(r.get("msg", "")).startswith("drift: alarm")]
        if alarms:
            run.early_delay = float(alarms[0].get("objects_seen", math.nan)) - EARLY
            run.early_detector = str(alarms[0].get("detector", ""))
        stationary = pool.old_rows[rng.integers(0, pool.old_rows.shape[0], STATIONARY)][:, lm]
        _files(root / "stationary" / "incoming", [("old", stationary)], None, 0)
        code, records, _ = _daemon(root / "stationary", root / "model.npz", root / "stationary" / "incoming")
        run.extra["stationary_exit"] = code
        run.false_alarms = sum(1 for r in records if str(r.get("msg", "")).startswith("drift: alarm"))
        run.stationary_objects = STATIONARY
    return run


# ----------------------------------------------------------------------------- the coverage gauge at a switch
def coverage_switch(seed: int) -> dict[str, Any]:
    """scikit-learn's digits as feature rows (Euclidean): a map of 100 landmarks fitted on 600 digits 0–4 (radius
    and fit baseline on the other 500), then 24,000 resampled digits 0–4 (a little pixel noise) and 12,000
    digits 5–9, in batches of 500, through the ``DriftMonitor`` (features given, so the radius's coverage is
    checked every ``drift.coverage_every_objects`` and at the alarm). Returns the coverages checked before and
    after the switch (the first after it: the one made with the alarm), the alarm's position and detector."""
    from sklearn.datasets import load_digits

    from streamembed import LandmarkMDS

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    old, new = X[y <= 4], X[y >= 5]
    perm = rng.permutation(old.shape[0])
    fit, rest = old[perm[:600]], old[perm[600:]]
    model = LandmarkMDS(n_components=2, n_landmarks=100, metric="euclidean", random_state=seed).fit_features(
        fit).model_
    mon = _monitor(model)
    checks: list[tuple[int, float]] = []
    alarm: tuple[int, str, Any] | None = None
    for start in range(0, OLD + NEW, BATCH):
        src = rest if start < OLD else new
        F = src[rng.integers(0, src.shape[0], BATCH)] + rng.normal(scale=0.5, size=(BATCH, X.shape[1]))
        A = model.dissimilarities_to_landmarks(F)
        res = model.place(A, k0_rows=32, errors="mask")
        before = mon.triggered_at
        mon.observe(A, res, features=F)
        sample = mon.last_sample
        if sample is not None and sample.coverage is not None:
            checks.append((mon.objects_seen, float(sample.coverage)))
        if mon.triggered_at is not None and before is None and alarm is None:
            alarm = (int(mon.triggered_at), _fired_by(mon), mon.coverage_at_alarm)
    pre = [c for at, c in checks if at <= OLD]
    post = [c for at, c in checks if at > OLD]
    return {"coverage_before": float(np.mean(pre)) if pre else math.nan, "checks_before": len(pre),
            "coverage_after": ([] if alarm is None or alarm[2] is None else [float(alarm[2])]) + post,
            "alarm_after": None if alarm is None else alarm[0] - OLD,
            "detector": None if alarm is None else alarm[1],
            "stated": None if model.radius_calibration is None else model.radius_calibration.coverage}


# ----------------------------------------------------------------------------- the table
def _delays(values: list[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    missed = len(values) - len(finite)
    if not finite:
        return f"none ({missed} of {len(values)})"
    text = f"{np.median(finite):,.0f} / {max(finite):,.0f}"
    return text + (f" ({missed} missed)" if missed else "")


def _detectors(names: list[str]) -> str:
    found = sorted({n for n in names if n})
    return "+".join(found) if found else "–"


def row(name: str, runs: list[Run], how: str) -> str:
    pool = POOLS[name]
    gain = float(np.median([r.procrustes_old - r.procrustes_new for r in runs])) if how == "in-process" else math.nan
    proc = (f"{np.median([r.procrustes_old for r in runs]):.3f} → {np.median([r.procrustes_new for r in runs]):.3f}"
            if how == "in-process" else "–")
    must = "yes" if math.isfinite(gain) and gain >= GAIN else ("no" if math.isfinite(gain) else "–")
    ok_delay = [r.delay for r in runs]
    shares = (f"{np.median([r.share_before for r in runs]):.0%} → {np.median([r.share_after for r in runs]):.0%} "
              f"({', '.join(sorted({r.refit for r in runs if r.refit}))})")
    early = f"{_delays([r.early_delay for r in runs])} ({_detectors([r.early_detector for r in runs])})"
    fa = sum(r.false_alarms for r in runs)
    rows_ = sum(r.stationary_objects for r in runs)
    return (f"| {name} ({how}, {len(runs)} seed{'s' if len(runs) > 1 else ''}) | {pool[4]} | {pool[3]} | {proc} | "
            f"{must} | {_delays(ok_delay)} ({_detectors([r.detector for r in runs])}) | {early} | "
            f"{fa} in {rows_:,} | {shares} |")


HEADER = ("| stream | distance | switch | Procrustes to the new objects' full CMDS: old map → map fitted on them | "
          "gain ≥ 0.15 (must alarm) | objects from the switch to the alarm, median / max (detector) | the same, "
          "switch at row 2,000 (armed from the fit) | false alarms in stationary rows | refit: captured share of "
          "the new objects' best 2-plane, before → after (policy) |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def _partial(args: argparse.Namespace, t0: float, lines: list[str], detail: dict[str, Any]) -> None:
    """The rows so far, marked partial, to ``--out`` (a long run can be read while it runs)."""
    if args.out:
        Path(args.out).write_text(f"(partial, {time.time() - t0:.0f} s so far)\n\n" + "\n".join(lines) + "\n",
                                  encoding="utf-8")
        Path(args.out).with_suffix(".json").write_text(json.dumps(detail, indent=1, default=str), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--daemon", default="words,sp500_dtw,code_to_prose")
    ap.add_argument("--daemon-seeds", type=int, default=1)
    ap.add_argument("--coverage-seeds", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    logging.getLogger("streamembed").setLevel(logging.WARNING)
    t0 = time.time()
    lines = [HEADER]
    detail: dict[str, Any] = {}
    cov_lines = ["| seed | stated coverage | coverage checked before the switch (mean of checks) | objects from the "
                 "switch to the alarm (detector) | coverage with the alarm, then at the next checks |",
                 "| --- | ---: | --- | --- | --- |"]
    for seed in range(args.coverage_seeds):
        c = coverage_switch(seed)
        detail[f"coverage seed {seed}"] = c
        after = ", ".join(f"{x:.2f}" for x in c["coverage_after"][:4]) or "–"
        cov_lines.append(f"| {seed} | {c['stated']} | {c['coverage_before']:.2f} ({c['checks_before']}) | "
                         f"{c['alarm_after']} ({c['detector']}) | {after} |")
        print(cov_lines[-1], flush=True)
    for name in [x for x in args.pools.split(",") if x]:
        runs = [in_process(name, s) for s in range(args.seeds)]
        detail[name] = [r.__dict__ for r in runs]
        lines.append(row(name, runs, "in-process"))
        print(lines[-1], flush=True)
        _partial(args, t0, lines, detail)
    for name in [x for x in args.daemon.split(",") if x]:
        druns = [through_daemon(name, s) for s in range(args.daemon_seeds)]
        detail[f"{name} (daemon)"] = [r.__dict__ for r in druns]
        lines.append(row(name, druns, "daemon"))
        print(lines[-1], flush=True)
        _partial(args, t0, lines, detail)
    text = ("\n".join(lines) + "\n\nThe coverage gauge at a switch (digits 0–4 → 5–9 as feature rows, "
            "in-process):\n\n" + "\n".join(cov_lines) + "\n")
    load = os.getloadavg()
    head = (f"`python -m benchmarks.drift_table --pools {args.pools} --seeds {args.seeds} --daemon {args.daemon} "
            f"--daemon-seeds {args.daemon_seeds}` "
            f"({time.time() - t0:.0f} s, load {load[0]:.1f})\n\n")
    if args.out:
        Path(args.out).write_text(head + text, encoding="utf-8")
        Path(args.out).with_suffix(".json").write_text(json.dumps(detail, indent=1, default=str), encoding="utf-8")
    print(head + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
