"""Input mix-ups: objects to the consistency alarm, false alarms on stationary streams, cost (docs/math.md §4.5).

    python -m benchmarks.bench_consistency [--objects 10000000] [--landmarks 50,100,200] [--seeds 3] [--quick]

Real data only: scikit-learn's digits (Euclidean; its "other dataset" rows
come from breast_cancer) and 400 stdlib docstring first lines (normalised
edit distance, non-Euclidean; "other dataset": digits). For each dataset,
landmark count n and selection (random, max–min) a model is fitted
(``benchmarks.mixups``) and the rows of every mix-up are built.

0. **Levels.** C of the rows in model order and of every mix-up, over all arrivals.
1. **Objects to alarm.** The daemon's ``ConsistencyMonitor`` (default
   settings) is fed batches of 256 objects resampled from the rows: first
   5,000 in model order then the mix-up ("after 5,000"), or the mix-up from
   the first object ("from start"); the table gives the largest number of
   objects from the onset to the alarm over the seeds (— : no alarm within
   20,000).
2. **False alarms.** ``--objects`` objects resampled from the arrivals in
   model order (i.i.d.), in batches of 8,192 (256 scored per batch, the
   daemon's default) and of 256 (every row scored); alarms counted, lowest
   window consistency reported. Then streams arriving in runs of one class
   (geometric run lengths of mean 64, 1,024 and 16,384 objects; 10⁶ objects):
   from the classes with at least 10 arrivals, then from every class (the
   docstrings have modules with 1–5 arrivals: a run of 1,000 objects from
   them repeats the same few objects).
3. **Cost** of scoring a batch (8,192 float32 rows, 256 scored) against
   placing it by projection, on Gaussian data; and of decoding a batch whose
   rows name their landmark order (``stream.landmark_order``) against the
   same batch in model order and a bare ``np.take``.

Every row's score depends on the row alone, so the streams replay each
distinct row's precomputed score through the monitor's own window and alarm
(``ConsistencyMonitor.account``): vectorised, and the same decisions.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from streamembed.core.model import fit_model
from benchmarks.datasets import load_dataset, stdlib_docstrings
from benchmarks.mixups import MIXUPS, mixup_setting
from streamembed.config.schema import ConsistencyConfig
from streamembed.monitors.consistency import ConsistencyMonitor

ONSET = 5_000
HORIZON = 20_000


@dataclass
class Case:
    name: str
    n: int
    selection: str
    seed: int
    model: object
    scores: dict[str, np.ndarray]
    labels: np.ndarray


class Replay:
    """A monitor fed precomputed scores, batch by batch, counting objects and alarms."""

    def __init__(self, model: object, batch: int, rng: np.random.Generator) -> None:
        self.monitor = ConsistencyMonitor(ConsistencyConfig(), warn=False)
        self.check = self.monitor.start(model)
        self.model, self.batch, self.rng = model, batch, rng
        self.sample = min(batch, self.monitor.settings.sample_rows)
        self.objects = 0
        self.raised = 0
        self.lowest = np.inf

    def feed(self, scores: np.ndarray, count: int, stop_on_alarm: bool = False,
             picks: np.ndarray | None = None) -> int | None:
        """``count`` objects; returns the objects fed until the alarm was first up (stop_on_alarm), else None."""
        done = 0
        while done < count:
            b = min(self.batch, count - done)
            k = min(b, self.sample)
            idx = picks[done:done + k] if picks is not None else self.rng.integers(0, scores.size, k)
            was = self.monitor.alarm
            self.monitor.account(scores[idx], self.model)
            done += b
            self.objects += b
            v = self.monitor.value
            if np.isfinite(v):
                self.lowest = min(self.lowest, v)
            if self.monitor.alarm and not was:
                self.raised += 1
                if stop_on_alarm:
                    return done
        return None


def cases(names: list[str], ns: list[int], seeds: int) -> list[Case]:
    digits = load_dataset("digits")
    out = []
    for name in names:
        if name == "digits":
            D, labels, other = digits.dissimilarities(), digits.labels, load_dataset("breast_cancer").dissimilarities()
        else:
            docs = stdlib_docstrings()
            D, labels, other = docs.D, docs.labels, digits.dissimilarities()
        for n in ns:
            for selection in ("random", "maxmin"):
                for seed in range(seeds):
                    s = mixup_setting(D, n, selection=selection, seed=seed, other=other)
                    check = ConsistencyMonitor(warn=False).start(s.model)
                    scores = {k: check.shares(v) for k, v in s.rows.items()}
                    out.append(Case(name, n, selection, seed, s.model, scores, labels[s.arrivals]))
    return out


def levels(all_cases: list[Case]) -> None:
    print("\n### Consistency C over all arrivals (1: like the landmarks' rows, 0: chance; range over the seeds)\n")
    print("| data | n | landmarks | model order | " + " | ".join(MIXUPS) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in MIXUPS) + " |")
    groups: dict[tuple[str, int, str], list[Case]] = {}
    for c in all_cases:
        groups.setdefault((c.name, c.n, c.selection), []).append(c)
    for (name, n, selection), group in groups.items():
        cells = []
        for case in ("model order", *MIXUPS):
            vals = [ConsistencyMonitor(warn=False).start(c.model).consistency(float(np.nanmean(c.scores[case])))
                    for c in group if case in c.scores]
            cells.append(f"{min(vals):.2f} – {max(vals):.2f}" if vals else "n/a")
        print(f"| {name} | {n} | {selection} | " + " | ".join(cells) + " |")


def delays(all_cases: list[Case]) -> None:
    print("\n### Objects from the onset of a mix-up to the alarm (batches of 256; largest over the seeds)\n")
    print("| data | n | landmarks | onset | model order: C | " + " | ".join(MIXUPS) + " |")
    print("| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in MIXUPS) + " |")
    groups: dict[tuple[str, int, str], list[Case]] = {}
    for c in all_cases:
        groups.setdefault((c.name, c.n, c.selection), []).append(c)
    for (name, n, selection), group in groups.items():
        for onset in ("from start", f"after {ONSET:,}"):
            cells, values = [], []
            for mix in MIXUPS:
                worst: float = 0
                for c in group:
                    if mix not in c.scores:
                        worst = np.nan
                        continue
                    r = Replay(c.model, 256, np.random.default_rng(c.seed))
                    if onset != "from start":
                        r.feed(c.scores["model order"], ONSET)
                        values.append(r.monitor.value)
                        assert not r.monitor.alarm
                    got = r.feed(c.scores[mix], HORIZON, stop_on_alarm=True)
                    worst = max(worst, np.inf if got is None else got)
                cells.append("n/a" if np.isnan(worst) else "—" if np.isinf(worst) else f"{int(worst):,}")
            c_txt = f"{min(values):.2f}–{max(values):.2f}" if values else ""
            print(f"| {name} | {n} | {selection} | {onset} | {c_txt} | " + " | ".join(cells) + " |")


def false_alarms(all_cases: list[Case], objects: int) -> None:
    print(f"\n### False alarms on stationary streams of {objects:,} objects (resampled rows in model order)\n")
    print("| data | n | landmarks | seed | batch 8,192: alarms | lowest C | batch 256: alarms | lowest C | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    total = 0
    for c in all_cases:
        t0 = time.perf_counter()
        row = []
        for batch in (8192, 256):
            r = Replay(c.model, batch, np.random.default_rng(1000 + c.seed))
            r.feed(c.scores["model order"], objects)
            total += r.raised
            row += [str(r.raised), f"{r.lowest:.2f}"]
        print(f"| {c.name} | {c.n} | {c.selection} | {c.seed} | " + " | ".join(row)
              + f" | {time.perf_counter() - t0:.1f} |")
    print(f"\nTotal false alarms: {total} over {2 * len(all_cases)} streams of {objects:,} objects.")


def class_runs(all_cases: list[Case], objects: int, min_class: int) -> None:
    which = f"classes of at least {min_class} arrivals" if min_class > 1 else "every class, down to 1 arrival"
    print(f"\n### Streams arriving in runs of one class ({which}; {objects:,} objects, batches of 256; "
          "geometric run lengths)\n")
    print("| data | n | landmarks | classes | mean run 64: alarms | lowest C | 1,024 | lowest C | 16,384 | lowest C |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in all_cases:
        if c.seed:
            continue
        row = []
        rng = np.random.default_rng(7)
        classes, sizes = np.unique(c.labels, return_counts=True)
        classes = classes[sizes >= min_class]
        members = {k: np.flatnonzero(c.labels == k) for k in classes}
        for mean_run in (64, 1024, 16384):
            picks = np.empty(objects, dtype=np.int64)
            at = 0
            while at < objects:
                run = min(int(rng.geometric(1.0 / mean_run)), objects - at)
                pool = members[rng.choice(classes)]
                picks[at:at + run] = pool[rng.integers(0, pool.size, run)]
                at += run
            r = Replay(c.model, 256, rng)
            r.feed(c.scores["model order"], objects, picks=picks)
            row += [str(r.raised), f"{r.lowest:.2f}"]
        print(f"| {c.name} | {c.n} | {c.selection} | {classes.size} | " + " | ".join(row) + " |")


def cost(repeat: int = 7) -> None:
    print("\n### Cost per batch: 8,192 float32 rows, 256 of them scored, against placing the batch (projection)\n")
    print("| n | place (ms) | score (ms) | score / place |")
    print("| --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for n in (100, 500, 2000):
        L = rng.normal(size=(n, 10))
        model = fit_model(cdist(L, L), n_components=10)
        A = cdist(rng.normal(size=(8192, 10)), L).astype(np.float32)
        monitor = ConsistencyMonitor(warn=False)
        monitor.observe(model, A)
        model.place(A)

        def best(f: object) -> float:
            ts = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                f()  # type: ignore[operator]
                ts.append(time.perf_counter() - t0)
            return min(ts)

        tp = best(lambda model=model, A=A: model.place(A))
        ts = best(lambda monitor=monitor, model=model, A=A: monitor.observe(model, A))
        print(f"| {n} | {tp * 1e3:.2f} | {ts * 1e3:.2f} | {ts / tp:.2f} |")


def named_order_cost(repeat: int = 7) -> None:
    """Decoding a batch whose rows name their order, against the same batch in model order and a bare gather."""
    import pyarrow as pa

    from streamembed.stream.codecs import decode_batch
    from streamembed.stream.landmark_order import order_metadata

    print("\n### Cost of a named order: decoding 8,192 float32 rows (ms)\n")
    print("| n | model order (zero-copy) | shared order (field metadata) | np.take alone | "
          "per-row `landmarks` lists, one order |")
    print("| --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for n in (100, 500, 2000):
        ids = np.array([f"L{i}" for i in range(n)])
        perm = rng.permutation(n)
        A = rng.random((8192, n), dtype=np.float32)
        col = pa.FixedSizeListArray.from_arrays(pa.array(A.reshape(-1)), n)
        idc = pa.array([f"r{i}" for i in range(8192)])
        plain = pa.table({"id": idc, "dissimilarities": col})
        f = pa.field("dissimilarities", col.type, metadata=order_metadata(ids[perm]))
        shared = pa.Table.from_arrays([idc, col], schema=pa.schema([pa.field("id", pa.string()), f]))
        lists = pa.ListArray.from_arrays(pa.array(np.arange(0, 8193 * n, n, dtype=np.int32)),
                                         pa.array(np.tile(ids[perm], 8192).tolist(),
                                                  pa.large_string()).cast(pa.string()))
        per_row = plain.append_column("landmarks", lists)

        def best(f: object) -> float:
            ts = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                f()  # type: ignore[operator]
                ts.append(time.perf_counter() - t0)
            return min(ts) * 1e3

        known = {1: ids}
        cells = [best(lambda t=t, n=n, known=known: decode_batch(t, n_landmarks=n, landmark_ids=known))
                 for t in (plain, shared)]
        cells.append(best(lambda A=A, perm=perm: np.take(A, perm, axis=1)))
        cells.append(best(lambda per_row=per_row, n=n, known=known: decode_batch(per_row, n_landmarks=n,
                                                                                 landmark_ids=known)))
        print(f"| {n} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=10_000_000, help="objects per stationary stream")
    ap.add_argument("--landmarks", default="50,100,200")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--datasets", default="digits,docstrings")
    ap.add_argument("--quick", action="store_true", help="digits, n = 50, one seed, 10⁵ objects (a smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.objects, args.landmarks, args.seeds, args.datasets = 100_000, "50", 1, "digits"
    t0 = time.perf_counter()
    all_cases = cases(args.datasets.split(","), [int(x) for x in args.landmarks.split(",")], args.seeds)
    print(f"{len(all_cases)} models built in {time.perf_counter() - t0:.1f} s")
    levels(all_cases)
    delays(all_cases)
    false_alarms(all_cases, args.objects)
    class_runs(all_cases, min(args.objects, 1_000_000), 10)
    class_runs(all_cases, min(args.objects, 1_000_000), 1)
    cost(3 if args.quick else 7)
    named_order_cost(3 if args.quick else 7)


if __name__ == "__main__":
    main()
