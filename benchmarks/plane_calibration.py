"""Measured run between false alarms of the in-map statistic on real streams, against its stated one (docs/math.md
§7.7).

    python -m benchmarks.plane_calibration [--pools words,...] [--ert 1e4,1e5,1e6] [--out benchmarks/results/...]

For each pool of ``benchmarks.drift_pools``: the map ``streamembed fit --landmarks N`` makes of its old fit
objects (200 landmarks, 100 for pools of fewer than 800 fit objects; the radius and the fit baseline on the
other fit objects), every other old object projected once on the map's ``drift.plane_axes`` leading axes; a
stationary stream is those objects drawn with replacement (so that 10⁷ objects cost seconds). At each stated run
(``expected_run_objects``), with the product's defaults (blocks of ``drift.plane_objects``, min_shift 1):

* ``stream baseline``: a detector calibrated on the next 20,000 objects (``drift.baseline_objects``), run until
  it alarms, then a new baseline — what a daemon does after the refit an alarm starts; the measured run is the
  monitored objects over the alarms;
* ``fit baseline``: the detector armed from the model's fit baseline (``PlaneTrigger.arm_from_fit``: its
  bootstrap blocks), run on the stream and re-armed from the same fit baseline after each alarm.

Reported: ratio = measured / stated (≥ 1: the statement holds; the target is at most 3), with an exact Poisson
95 % interval of the alarm count; with no alarm, the lower end alone.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

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


def measure(axes: np.ndarray, rng: np.random.Generator, stated: float, objects: int,
            fit_trigger: PlaneTrigger | None) -> tuple[int, int]:
    """(alarms, monitored objects) of a stationary stream of ``objects`` drawn from ``axes``."""
    alarms = seen = 0
    det: BlockDetector | None = None
    size = PLANE_OBJECTS
    while seen < objects:
        if det is None:
            if fit_trigger is None:
                det = BlockDetector(stated, PLANE_OBJECTS, 1.0, 0.95)
                det.calibrate(block_shares(axes[rng.integers(0, axes.shape[0], BASELINE)], 2, PLANE_OBJECTS))
            else:
                assert fit_trigger._fit is not None
                fit_trigger.arm_from_fit(fit_trigger._fit)
                det = fit_trigger.detector
                assert det is not None and fit_trigger._fit_blocks is not None
                size = fit_trigger._fit_blocks.size
        assert det.cusum is not None
        chunk = min(CHUNK, objects - seen)
        if chunk < size:
            break
        values = block_shares(axes[rng.integers(0, axes.shape[0], chunk)], 2, size)
        pos = det.cusum.alarm_positions(-values)
        if pos.size:
            alarms += 1
            seen += int((pos[0] + 1) * size)
            det = None
        else:
            seen += values.size * size
    return alarms, seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--ert", default="1e4,1e5,1e6")
    ap.add_argument("--runs", type=float, default=30.0, help="objects per setting, in stated runs (at most 10^7)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    lines = ["| stream | baseline | stated run (objects) | objects | false alarms | measured run | measured / stated "
             "(95 % CI) |", "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for name in [x for x in args.pools.split(",") if x]:
        pool = load_pool(name)
        model = fitted(pool, 0)
        lm = np.array([int(x) for x in model.landmark_ids])
        axes = leading_axes(model, pool.old_rows[:, lm], PLANE_AXES)
        for stated in (float(x) for x in args.ert.split(",")):
            objects = int(min(1e7, args.runs * stated))
            for label in ("stream baseline", "fit baseline"):
                trig = None
                if label == "fit baseline":
                    trig = PlaneTrigger(stated)
                    if model.fit_baseline is None or trig.arm_from_fit(model.fit_baseline) is None:
                        continue
                rng = np.random.default_rng(int(stated) % 1000 + (7 if trig is None else 11))
                alarms, seen = measure(axes, rng, stated, objects, trig)
                run = seen / alarms if alarms else math.inf
                lines.append(f"| {name} | {label} | {stated:.0e} | {seen:,} | {alarms} | "
                             f"{'–' if not alarms else f'{run:,.0f}'} | "
                             f"{'' if not alarms else f'{run / stated:.2f} '}({_interval(alarms, seen, stated)}) |")
                print(lines[-1], flush=True)
    load = os.getloadavg()[0]
    head = (f"`python -m benchmarks.plane_calibration --pools {args.pools} --ert {args.ert} --runs {args.runs:g}` "
            f"({time.time() - t0:.0f} s, load {load:.1f}; blocks of {PLANE_OBJECTS}, {PLANE_AXES} axes)\n\n")
    text = head + "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
