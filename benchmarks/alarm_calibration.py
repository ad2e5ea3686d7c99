"""Measured run between false alarms of the calibrated CUSUM on real residual streams (docs/math.md §7.4).

    python -m benchmarks.alarm_calibration [--quick] [--ert 1e4,1e5,1e6,1e8] [--json out.json]

Per-object values are the unexplained energy u = β − ‖ŷ‖² of real placements,
computed once per dataset (projection on a 2-d classical-MDS map of 100
landmarks), then resampled into long stationary streams, so that 10⁹ objects
cost seconds, not hours:

* ``digits``: scikit-learn's 1,797 handwritten digits (Euclidean), 100 random
  landmarks, the other 1,697 placed; objects drawn uniformly with replacement;
* ``words``: 800 stdlib docstring first lines under normalised edit distance
  (``benchmarks.datasets.stdlib_docstrings``, non-Euclidean), 100 max–min
  landmarks, the rest placed; drawn the same way;
* ``student-t``: 10-d features with independent Student-t (3 d.o.f.)
  coordinates, 100 landmarks, 2·10⁶ placed objects (u has infinite variance);
* ``digits runs L``: the digits arriving in runs of one class, run lengths
  geometric with mean L objects, each run's class drawn uniformly from the
  ten, objects within a run drawn from that class.

For every stream and stated run (``expected_run_objects``), ``--baselines``
detectors are each calibrated on the next ``--baseline`` objects of the
stream (the daemon's default 20,000) and fed the following objects; the
detector's own ``update`` (its one vectorised path, as in the daemon) sees
chunks of 10⁷ values. Two ways to count:

* ``daemon``: every false alarm is followed by a new baseline on the next
  objects, as the daemon re-baselines after the refit an alarm starts; the
  mean run is monitored objects / alarms (the long-run false-alarm rate of
  a daemon on a stationary stream);
* ``same baseline``: the detector restarts at S = 0 after an alarm but keeps
  its calibration for its whole segment (``drift.refit.auto = false``): the
  pooled rate over baselines, dominated by the worst one.

A baseline that cannot be calibrated is a refusal (the daemon then falls back
to the rule). Reported: ratio = measured mean run / stated run (≥ 1 means the
statement holds), with an exact Poisson 95 % interval; with no alarm, the
lower end alone. Runs under the old code by putting an older checkout first
on PYTHONPATH (the script uses only ``CusumDetector(ert).calibrate/update``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import zlib
from dataclasses import asdict, dataclass
from collections.abc import Callable

import numpy as np
from scipy.stats import chi2

from streamembed.core.monitor.detector import CalibrationError, CusumDetector

CHUNK = 10_000_000


# --------------------------------------------------------------------------- real per-object values


def _place(D_landmarks: np.ndarray, D_rest: np.ndarray) -> np.ndarray:
    from streamembed import LandmarkMDS

    est = LandmarkMDS(n_components=2).fit(D_landmarks)
    return np.asarray(est.embed(D_rest, method="projection").unexplained, dtype=np.float64)


def digits_pool(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(u (1697,), labels): the digits not chosen as landmarks, placed on a map of 100 random ones."""
    from benchmarks.datasets import digits

    ds = digits()
    D = ds.dissimilarities()
    L = np.random.default_rng(seed).choice(D.shape[0], 100, replace=False)
    rest = np.setdiff1d(np.arange(D.shape[0]), L)
    return _place(D[np.ix_(L, L)], D[np.ix_(rest, L)]), np.asarray(ds.labels)[rest]


def words_pool() -> tuple[np.ndarray, np.ndarray]:
    """(u, module labels) of stdlib docstring lines placed on 100 max–min landmarks (normalised edit distance)."""
    from streamembed.core.refit.strategies import maxmin_select
    from benchmarks.datasets import stdlib_docstrings

    ds = stdlib_docstrings(n=800)
    D = ds.dissimilarities()
    L = maxmin_select(100, D=D, first=0)
    rest = np.setdiff1d(np.arange(D.shape[0]), L)
    return _place(D[np.ix_(L, L)], D[np.ix_(rest, L)]), np.asarray(ds.labels)[rest]


def student_t_pool(n: int = 2_000_000, p: int = 10, seed: int = 0) -> np.ndarray:
    """u of n objects with i.i.d. Student-t(3) coordinates in R^p on a map of 100 such landmarks."""
    import scipy.spatial.distance as ssd

    from streamembed import LandmarkMDS

    rng = np.random.default_rng([seed, 3])
    F = rng.standard_t(3, size=(100, p))
    est = LandmarkMDS(n_components=2).fit_features(F)
    out = [est.embed(ssd.cdist(rng.standard_t(3, size=(m, p)), F), method="projection").unexplained
           for m in np.diff(np.r_[0:n:200_000, n])]
    return np.concatenate(out).astype(np.float64)


# --------------------------------------------------------------------------- streams


class Resampled:
    """A stationary stream drawn from a pool of values: i.i.d., or in class runs of geometric length (mean ``run``)."""

    def __init__(self, u: np.ndarray, labels: np.ndarray | None = None, run: float | None = None,
                 seed: int | list[int] = 0):
        self.rng = np.random.default_rng(seed)
        self.run = run
        if run is None:
            self.u = np.asarray(u, dtype=np.float64)
            return
        order = np.argsort(labels, kind="stable")
        self.u = np.asarray(u, dtype=np.float64)[order]
        _, self.first, self.count = np.unique(np.asarray(labels)[order], return_index=True, return_counts=True)
        self._cls = np.empty(0, dtype=np.int64)  # classes of objects already drawn into runs, not yet served

    def draw(self, n: int) -> np.ndarray:
        rng = self.rng
        if self.run is None:
            return self.u[rng.integers(0, self.u.size, n)]
        while self._cls.size < n:
            m = int((n - self._cls.size) / self.run) + 16
            runs = np.repeat(rng.integers(0, self.count.size, m), rng.geometric(1.0 / self.run, m))
            self._cls = np.concatenate((self._cls, runs))
        c, self._cls = self._cls[:n], self._cls[n:]
        return self.u[self.first[c] + (rng.random(n) * self.count[c]).astype(np.int64)]


class Cursor:
    """Reads a stream in pieces; ``give_back(k)`` returns the last k objects taken (those after an alarm)."""

    def __init__(self, stream: Resampled) -> None:
        self.stream = stream
        self.buf = np.empty(0)
        self.off = 0

    def take(self, n: int) -> np.ndarray:
        if self.buf.size - self.off < n:
            self.buf = np.concatenate((self.buf[self.off:], self.stream.draw(max(n, CHUNK))))
            self.off = 0
        self.off += n
        return self.buf[self.off - n:self.off]

    def give_back(self, k: int) -> None:
        self.off -= k


# --------------------------------------------------------------------------- measuring


@dataclass
class Row:
    stream: str
    stated: float
    mode: str
    baselines: int
    refused: int
    objects: int
    alarms: int
    seconds: float
    refusal: str = ""
    phi_median: float = math.nan  # the calibrations' median φ (integrated autocorrelation time, objects)
    shift_median: float = math.nan  # their median effective_min_shift (baseline sd)

    @property
    def ratio(self) -> float:
        return self.objects / self.alarms / self.stated if self.alarms else math.inf

    def interval(self) -> tuple[float, float]:
        """Exact Poisson 95 % interval of the ratio."""
        a, T = self.alarms, self.objects
        lo = chi2.ppf(0.025, 2 * a) / 2 if a else 0.0
        hi = chi2.ppf(0.975, 2 * a + 2) / 2
        return T / hi / self.stated, (T / lo / self.stated if lo > 0 else math.inf)


def measure(make: Callable[[], CusumDetector], cursor: Cursor, stated: float, baselines: int, segment: int,
            baseline: int, renew: bool) -> Row:
    """Feed ``baselines`` segments of ``segment`` monitored objects (module docstring); see ``Row``."""
    t0 = time.perf_counter()
    row = Row(cursor.stream.__class__.__name__, stated, "daemon" if renew else "same baseline", 0, 0, 0, 0, 0.0)
    cals: list[tuple[float, float]] = []
    for _ in range(baselines):
        left = segment
        det = None
        while left > 0:
            if det is None:
                det = make()
                row.baselines += 1
                try:
                    c = det.calibrate(cursor.take(baseline))
                    cals.append((getattr(c, "variance_inflation", math.nan),
                                 getattr(c, "effective_min_shift", math.nan)))
                except CalibrationError as exc:
                    row.refused += 1
                    row.refusal = str(exc)
                    break
                chunk = 100_000  # grows while no alarm: a detector that fires at once costs little
            v = cursor.take(min(chunk, left))
            d = det.update(v)
            if d.fired and renew:  # the daemon refits and takes a new baseline after the alarm
                used = d.index_in_batch + 1
                cursor.give_back(v.size - used)
                row.alarms += 1
                row.objects += used
                left -= used
                det = None
                continue
            row.alarms += d.alarms
            row.objects += v.size
            left -= v.size
            chunk = min(4 * chunk, CHUNK)
    row.seconds = time.perf_counter() - t0
    if cals:
        row.phi_median, row.shift_median = (float(x) for x in np.median(np.array(cals), axis=0))
    return row


def plan(stated: float, quick: bool) -> tuple[int, int]:
    """(baselines, monitored objects per baseline) for a stated run.

    25 stated runs per baseline, within [10⁶, 2.5·10⁷].
    """
    if quick:
        return 8, int(max(2e5, min(5 * stated, 2e6)))
    return 40, int(max(1e6, min(25 * stated, 2.5e7)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ert", default="1e4,1e5,1e6,1e8", help="stated runs (expected_run_objects)")
    ap.add_argument("--runs", default="64,256,1024,4096,16384", help="mean class-run lengths of the digits")
    ap.add_argument("--streams", default="", help="comma-separated subset of stream names")
    ap.add_argument("--baseline", type=int, default=20_000)
    ap.add_argument("--modes", default="daemon,same")
    ap.add_argument("--quick", action="store_true", help="a smoke run (seconds): 8 baselines, short segments")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    t_start = time.perf_counter()
    runs = [int(x) for x in args.runs.split(",") if x]
    names = ["digits", "words", "student-t"] + [f"digits runs {L}" for L in runs]
    if args.streams:
        names = [n for n in names if n in set(args.streams.split(","))]
    digits = digits_pool() if any(n.startswith("digits") for n in names) else None
    pools: dict[str, tuple] = {}
    for name in names:
        if name == "digits":
            pools[name] = (digits[0], None, None)
        elif name == "words":
            pools[name] = (words_pool()[0], None, None)
        elif name == "student-t":
            pools[name] = (student_t_pool(200_000 if args.quick else 2_000_000), None, None)
        else:
            pools[name] = (digits[0], digits[1], float(name.rsplit(" ", 1)[1]))
    print(f"pools ready ({time.perf_counter() - t_start:.0f} s)", flush=True)
    rows = []
    print("| stream | stated run | count | baselines (refused) | median φ | median tuned shift | objects "
          "| false alarms | measured / stated (95 % CI) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for stated in (float(x) for x in args.ert.split(",")):
        for name, (u, lab, L) in pools.items():
            for mode in args.modes.split(","):
                n_base, segment = plan(stated, args.quick)
                cursor = Cursor(Resampled(u, lab, L, seed=[args.seed, zlib.crc32(name.encode())]))
                r = measure(lambda stated=stated: CusumDetector(stated), cursor, stated, n_base, segment, args.baseline,
                            renew=mode == "daemon")
                r.stream = name
                lo, hi = r.interval()
                ratio = f"{r.ratio:.3g} ({lo:.2g} – {hi:.3g})" if r.alarms else f"≥ {lo:.2g} (no alarm)"
                if r.objects == 0:
                    ratio = "— (every baseline refused)"
                print(f"| {name} | {stated:.0e} | {r.mode} | {r.baselines} ({r.refused}) | {r.phi_median:,.3g} | "
                      f"{r.shift_median:.2g} | {r.objects:,} | {r.alarms} | {ratio} |", flush=True)
                rows.append(r)
    refusals = {r.stream: r.refusal for r in rows if r.refusal}
    for k, v in refusals.items():
        print(f"\nrefusal ({k}): {v}")
    print(f"\n{time.perf_counter() - t_start:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{**asdict(r), "ratio": r.ratio if r.alarms else None} for r in rows], fh, indent=1)


if __name__ == "__main__":
    main()
