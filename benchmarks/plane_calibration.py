"""Measured run between false alarms of the in-map statistic on real streams, against its stated one (docs/math.md
§7.7).

    python -m benchmarks.plane_calibration [--pools words,...] [--ert 1e4,1e5,1e6] [--runs 30] [--baselines 30]
                                           [--fit-seeds 5] [--out benchmarks/results/...]

For each pool of ``benchmarks.drift_pools``: the map ``streamembed fit --landmarks N`` makes of its old fit
objects (200 landmarks, 100 for pools of fewer than 800 fit objects; the radius and the fit baseline on the
other fit objects), every other old object projected once on the map's ``drift.plane_axes`` leading axes; a
stationary stream is those objects drawn with replacement (so that 10⁷ objects cost seconds). At each stated run
(``expected_run_objects``), with the product's defaults (blocks of ``drift.plane_objects``, min_shift 1):

* ``stream baseline``: ``--baselines`` (30) detectors, each calibrated on its own 20,000 stream objects
  (``drift.baseline_objects``), each watching an equal share of the objects, its CUSUM restarted after each
  alarm and its baseline kept;
* ``fit baseline``: the detectors of ``--fit-seeds`` (5) models (``fit --seed 0..4``: other landmarks, other
  fit baselines) armed from their fit baselines (``PlaneTrigger.arm_from_fit``), likewise.

The measured run is the monitored objects over the alarms, i.e. the inverse of the false-alarm rate averaged
over baselines — what (7.7.1) states. (Taking a new baseline after each alarm instead weighs each baseline by its
run: the measure is then the *mean* run over baselines, which exceeds the inverse mean rate by Jensen's
inequality; on these streams it came out 5–10 times the stated run.)

Reported: ratio = measured / stated (≥ 1: the statement holds; the target is at most 3), with an exact Poisson
95 % interval of the alarm count; with no alarm, the lower end alone.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

import numpy as np
from scipy.stats import chi2

from benchmarks.drift_pools import POOLS, load_pool
from benchmarks.drift_table import fitted
from streamembed.core.monitor.block_detector import BlockDetector
from streamembed.core.monitor.fit_baseline import leading_axes
from streamembed.core.monitor.plane import PLANE_AXES, PLANE_OBJECTS, PlaneTrigger, block_shares

BASELINE = 20_000
CHUNK = 1_000_000


def _interval(alarms: int, objects: float, stated: float) -> str:
    lo = chi2.ppf(0.025, 2 * alarms) / 2 if alarms else 0.0
    hi = chi2.ppf(0.975, 2 * alarms + 2) / 2
    if alarms == 0:
        return f"≥ {objects / hi / stated:.2f}"
    return f"{objects / hi / stated:.2f} – {objects / lo / stated:.2f}"


def _alarms(det: BlockDetector, axes: np.ndarray, rng: np.random.Generator, objects: int, size: int) -> int:
    """Alarms of ``det`` on ``objects`` stationary objects drawn from ``axes``, the CUSUM restarted at 0 after each
    and the baseline kept (what a refit that keeps the map does: ``PlaneTrigger.cooldown``)."""
    assert det.cusum is not None
    det.cusum.reset()
    alarms = seen = 0
    while objects - seen >= size:
        chunk = min(CHUNK, objects - seen)
        alarms += int(det.cusum.alarm_positions(-block_shares(axes[rng.integers(0, axes.shape[0], chunk)], 2,
                                                                 size)).size)
        seen += chunk
    return alarms


def stream_baselines(axes: np.ndarray, rng: np.random.Generator, stated: float, objects: int,
                     baselines: int) -> tuple[int, int]:
    """(alarms, monitored objects): ``baselines`` stream baselines of ``BASELINE`` objects, each watching
    objects / baselines stationary objects."""
    alarms = seen = 0
    each = objects // baselines
    for _ in range(baselines):
        det = BlockDetector(stated, PLANE_OBJECTS, 1.0, 0.95)
        det.calibrate(block_shares(axes[rng.integers(0, axes.shape[0], BASELINE)], 2, PLANE_OBJECTS))
        alarms += _alarms(det, axes, rng, each, PLANE_OBJECTS)
        seen += each
    return alarms, seen


def fit_baselines(models: list[tuple[Any, np.ndarray]], rng: np.random.Generator, stated: float,
                  objects: int) -> tuple[int, int]:
    """(alarms, monitored objects): each model's detector armed from its fit baseline
    (``PlaneTrigger.arm_from_fit``), watching objects / len(models) stationary objects of the model's stream."""
    alarms = seen = 0
    each = objects // len(models)
    for model, axes in models:
        trig = PlaneTrigger(stated)
        if model.fit_baseline is None or trig.arm_from_fit(model.fit_baseline) is None:
            continue
        assert trig.detector is not None and trig._fit_blocks is not None
        alarms += _alarms(trig.detector, axes, rng, each, trig._fit_blocks.size)
        seen += each
    return alarms, seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--ert", default="1e4,1e5,1e6")
    ap.add_argument("--runs", type=float, default=30.0, help="objects per setting, in stated runs (at most 10^7)")
    ap.add_argument("--baselines", type=int, default=30, help="stream baselines per setting")
    ap.add_argument("--fit-seeds", type=int, default=5, help="models (fits of seeds 0..) per setting")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    lines = ["| stream | baseline | stated run (objects) | objects | false alarms | measured run | measured / stated "
             "(95 % CI) |", "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for name in [x for x in args.pools.split(",") if x]:
        pool = load_pool(name)
        models = []
        for seed in range(args.fit_seeds):
            model = fitted(pool, seed)
            lm = np.array([int(x) for x in model.landmark_ids])
            models.append((model, leading_axes(model, pool.old_rows[:, lm], PLANE_AXES)))
        for stated in (float(x) for x in args.ert.split(",")):
            objects = int(min(1e7, args.runs * stated))
            for label in ("stream baseline", "fit baseline"):
                rng = np.random.default_rng(int(stated) % 1000 + (7 if label == "stream baseline" else 11))
                if label == "stream baseline":
                    alarms, seen = stream_baselines(models[0][1], rng, stated, objects, args.baselines)
                    how = f"{args.baselines} × {BASELINE:,}"
                else:
                    alarms, seen = fit_baselines(models, rng, stated, objects)
                    how = f"{len(models)} fits"
                if not seen:
                    continue
                run = seen / alarms if alarms else math.inf
                lines.append(f"| {name} | {label} ({how}) | {stated:.0e} | {seen:,} | {alarms} | "
                             f"{'–' if not alarms else f'{run:,.0f}'} | "
                             f"{'' if not alarms else f'{run / stated:.2f} '}({_interval(alarms, seen, stated)}) |")
                print(lines[-1], flush=True)
                if args.out:
                    with open(args.out, "w", encoding="utf-8") as fh:
                        fh.write(f"(partial, {time.time() - t0:.0f} s so far)\n\n" + "\n".join(lines) + "\n")
    load = os.getloadavg()[0]
    head = (f"`python -m benchmarks.plane_calibration --pools {args.pools} --ert {args.ert} --runs {args.runs:g} "
            f"--baselines {args.baselines} --fit-seeds {args.fit_seeds}` "
            f"({time.time() - t0:.0f} s, load {load:.1f}; blocks of {PLANE_OBJECTS}, {PLANE_AXES} axes)\n\n")
    text = head + "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
