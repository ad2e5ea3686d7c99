"""``python -m benchmarks bench``: throughput against the memory-read ceiling, in one run.

Everything is measured in the same process, one after the other, so the
ratios are meaningful on a shared, noisy machine (docs/performance.md); absolute numbers
are not. Tables:

1. **Throughput** for n landmarks, map dimension d and input dtype: objects/s
   of projection, single-object RR and block RR (blocks of k objects with
   their mutual dissimilarities, all in one call, docs/math.md §3.3), each as a ratio to the *read
   ceiling*, the objects/s at which numpy merely reads the same (m, n) input
   (``A.sum()``, one thread), and to the lower of two machine ceilings: the
   multi-threaded read (a BLAS matrix-vector product ``A @ ones``: every
   thread reads) and, for d >= 10, the arithmetic (peak GEMM flop/s over the
   projection's 2·n·(d+1) flops per object). When scikit-learn is installed, also
   ``KernelPCA(kernel="precomputed").transform`` on the same input, its
   agreement with the projection (max abs difference up to column signs) and
   the speed ratio streamembed/sklearn.
2. **Block RR** (``bench_block``): blocks of k ∈ {2, 8, 64} placed by the
   batched solver (docs/math.md §3.3), objects/s and their share of
   single-object RR measured in the same run, against the former per-block
   solver, with the share of certified blocks, starts and iterations.
3. **Scaling with m**: per-call time and objects/s for growing batches.
4. **Refit**: time of ``LandmarkMDS(n_components=d).fit(D)`` (classical MDS of
   the landmarks, docs/math.md §1) for growing n.
5. **End to end**: the rows of :mod:`benchmarks.bench_e2e` (``embed`` from Arrow IPC and
   Parquet, the directory daemon, the Kafka daemon vs raw consumption and a
   KernelPCA peer, a Dask backfill), each against the in-memory core timed
   in the same process; a row that cannot run here (no broker, no extra)
   is skipped with its reason.

Problems are synthetic: n landmarks and m objects drawn from N(0, I) in
R^(2d) (so every object lies off the d-dimensional map and RR does real
work), Euclidean dissimilarities. The input array is sized to ``target_mb``
(capped in m) so that the read ceiling is a memory-bound number, not a
cache-bound one.

scikit-learn is given K_fit = -1/2 Δ∘Δ and K = -1/2 A∘A: its KernelCenterer
then applies exactly the landmark centring of docs/math.md §2, so its transform
is the projection ŷ = Λ^(-1/2) Uᵀ b (docs/math.md §3.1). Forming A∘A is not timed
for sklearn (streamembed's time includes its squaring), which favours sklearn.

    python -m benchmarks.bench [--quick] [--sizes SPEC] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import scipy

from streamembed.estimator import LandmarkMDS
from streamembed.core.runtime import single_blas_thread
from benchmarks.bench_e2e import EndToEndUnavailable
from benchmarks.timing import best_time, euclidean, landmark_matrix, make_points

__all__ = [
    "BenchSizes",
    "PRESETS",
    "parse_sizes",
    "EndToEndUnavailable",
    "run_end_to_end",
    "run_bench",
    "format_tables",
    "main",
]


# --------------------------------------------------------------------------- sizes


@dataclass(frozen=True)
class BenchSizes:
    """What to measure.

    Attributes:
        n: landmark counts of the throughput grid.
        d: map dimensions of the throughput grid.
        dtypes: input precisions ("float32", "float64").
        target_mb: size of each throughput input array in MB (m = target / (n · itemsize)).
        max_m: cap on m.
        block_objects: objects embedded by block RR per measurement (it is ~10⁴× slower).
        block_size: k, objects per block.
        m_scaling: batch sizes of the m-scaling table (at n_scaling, d_scaling, float32).
        n_scaling, d_scaling: the landmark count and dimension of that table.
        refit_n: landmark counts of the refit table.
        refit_d: map dimension for the refit table.
        repeat: timings are the best of this many runs.
        sklearn: include scikit-learn's KernelPCA when installed.
    """

    n: tuple[int, ...] = (100, 500, 2000)
    d: tuple[int, ...] = (2, 10, 50)
    dtypes: tuple[str, ...] = ("float32", "float64")
    target_mb: float = 64.0
    max_m: int = 200_000
    block_objects: int = 128
    block_size: int = 8
    m_scaling: tuple[int, ...] = (10, 100, 1_000, 10_000, 100_000)
    n_scaling: int = 500
    d_scaling: int = 10
    refit_n: tuple[int, ...] = (500, 2000, 5000)
    refit_d: int = 10
    repeat: int = 5
    sklearn: bool = True


PRESETS: dict[str, BenchSizes] = {
    "full": BenchSizes(),
    "quick": BenchSizes(
        n=(100, 500),
        d=(2, 10),
        dtypes=("float32", "float64"),
        target_mb=16.0,
        block_objects=32,
        m_scaling=(10, 1_000, 10_000),
        refit_n=(500, 2000),
        repeat=3,
    ),
}

_SPEC_KEYS = {
    "n": ("n", "ints"),
    "d": ("d", "ints"),
    "dtypes": ("dtypes", "strs"),
    "dtype": ("dtypes", "strs"),
    "mb": ("target_mb", "float"),
    "max_m": ("max_m", "int"),
    "block_objects": ("block_objects", "int"),
    "k": ("block_size", "int"),
    "m": ("m_scaling", "ints"),
    "n_scaling": ("n_scaling", "int"),
    "d_scaling": ("d_scaling", "int"),
    "refit": ("refit_n", "ints"),
    "refit_d": ("refit_d", "int"),
    "repeat": ("repeat", "int"),
    "sklearn": ("sklearn", "bool"),
}


def parse_sizes(spec: str, base: BenchSizes) -> BenchSizes:
    """Override fields of ``base`` from "key=v1,v2;key=v" (keys: see ``--help``).

    Example: ``"n=100;d=2;dtype=float32;mb=2;m=100,1000;refit=300;repeat=1"``.
    """
    changes: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _SPEC_KEYS:
            raise ValueError(f"bad --sizes entry {part!r}; keys: {', '.join(_SPEC_KEYS)}")
        name, kind = _SPEC_KEYS[key]
        vals = [v.strip() for v in value.split(",") if v.strip()]
        if kind == "ints":
            changes[name] = tuple(int(v) for v in vals)
        elif kind == "strs":
            changes[name] = tuple(vals)
        elif kind == "int":
            changes[name] = int(vals[0])
        elif kind == "float":
            changes[name] = float(vals[0])
        else:
            changes[name] = vals[0].lower() in ("1", "true", "yes", "on")
    for dt in changes.get("dtypes", ()):
        if dt not in ("float32", "float64"):
            raise ValueError(f"dtype must be float32 or float64, got {dt!r}")
    return dataclasses.replace(base, **changes)


# --------------------------------------------------------------------------- end-to-end rows


def run_end_to_end(e2e_rows: Mapping[str, Callable[[bool], dict]], quick: bool, ceilings: dict[tuple[int, str], float],
                   log: Callable[[str], None] = lambda s: None) -> list[dict]:
    """Run the end-to-end rows (``name -> fn(quick)``, as ``bench_e2e.ROWS``) in order.

    ``fn`` returns its measurements (``objects_per_s``; optionally ``n`` and ``dtype``, to compare with the read
    ceiling of that input, and anything else, kept in the JSON) or raises ``EndToEndUnavailable(reason)`` to be
    skipped (no broker reachable, a missing extra); any other exception is reported in the row, not raised.
    """
    rows = []
    for name, fn in e2e_rows.items():
        log(f"end to end: {name}")
        row: dict[str, Any] = {"name": name}
        try:
            out = dict(fn(quick))
        except EndToEndUnavailable as exc:
            row.update(status="skipped", reason=str(exc))
        except Exception as exc:
            row.update(status="error", reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=3))
        else:
            row.update(status="ok", **out)
            key = (int(out.get("n", -1)), str(out.get("dtype", "")))
            if key in ceilings and "objects_per_s" in out:
                row["over_read"] = float(out["objects_per_s"]) / ceilings[key]
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- measurements


def _sklearn_kpca():
    try:
        from sklearn.decomposition import KernelPCA
    except ImportError:
        return None
    return KernelPCA


def _agreement(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Max abs difference after matching each column's sign."""
    signs = np.sign(np.einsum("ij,ij->j", ours.astype(np.float64), theirs.astype(np.float64)))
    signs[signs == 0] = 1.0
    return float(np.abs(ours.astype(np.float64) - theirs.astype(np.float64) * signs).max())


def bench_throughput(n: int, d: int, dtype: str, sizes: BenchSizes) -> dict:
    """One row of table 1 (see module docstring)."""
    dt = np.dtype(dtype)
    m = int(min(sizes.max_m, max(1000, sizes.target_mb * 1e6 / (n * dt.itemsize))))
    Lm, Z = make_points(n, m, d)
    D = landmark_matrix(Lm)
    A = np.ascontiguousarray(euclidean(Z, Lm), dtype=dt)
    est = LandmarkMDS(n_components=d).fit(D)
    reps = sizes.repeat
    t_read = best_time(lambda: A.sum(), reps)
    ones = np.ones(n, dtype=dt)
    t_read2 = best_time(lambda: A @ ones, reps)  # BLAS gemv: every thread reads (the machine's read ceiling)
    t_proj = best_time(lambda: est.embed(A, method="projection"), reps)
    t_rr = best_time(lambda: est.embed(A, method="restricted"), reps)

    k = sizes.block_size
    nb = max(1, sizes.block_objects // k)
    rows_b = nb * k
    cross = [_mutual(Z[b * k:(b + 1) * k]).astype(dt) for b in range(nb)]
    with single_blas_thread():
        t_block = best_time(lambda: est.embed_blocks(A[:rows_b], cross), max(1, min(reps, 3)), min_seconds=0.0)
    ceiling = m / t_read2
    fma = None
    if d >= 10:
        # projection: about 2·n·(d+1) flops per object (one fused GEMM, docs/math.md §3)
        fma = fma_flops(dt.name) / (2.0 * n * (d + 1))
        ceiling = min(ceiling, fma)
    row: dict[str, Any] = {
        "n": n,
        "d": d,
        "dtype": dt.name,
        "m": m,
        "read_objects_per_s": m / t_read,
        "read_threads_objects_per_s": m / t_read2,
        "fma_objects_per_s": fma,
        "ceiling_objects_per_s": ceiling,
        "projection_over_ceiling": (m / t_proj) / ceiling,
        "projection_objects_per_s": m / t_proj,
        "restricted_objects_per_s": m / t_rr,
        "block_objects_per_s": nb * k / t_block,
        "block_size": k,
        "projection_over_read": t_read / t_proj,
        "restricted_over_read": t_read / t_rr,
        "block_over_read": (t_read / m) / (t_block / (nb * k)),
    }
    KernelPCA = _sklearn_kpca() if sizes.sklearn else None
    if KernelPCA is not None:
        kpca = KernelPCA(n_components=d, kernel="precomputed", eigen_solver="dense")
        kpca.fit((-0.5) * np.square(D.astype(dt)))
        K = (-0.5) * np.square(A)
        t_sk = best_time(lambda: kpca.transform(K), reps)
        ours = est.embed(A, method="projection").y
        theirs = kpca.transform(K)
        diff = _agreement(ours, theirs)
        scale = float(np.abs(ours).max())
        tol = 1e-8 if dt == np.float64 else 1e-3
        row.update(
            sklearn_objects_per_s=m / t_sk,
            sklearn_over_read=t_read / t_sk,
            speedup_over_sklearn=t_sk / t_proj,
            sklearn_max_abs_diff=diff,
            sklearn_rel_diff=diff / scale if scale > 0 else diff,
            sklearn_agrees=bool(diff <= tol * max(scale, 1.0)),
        )
        del K
    return row


_FMA: dict[str, float] = {}


def fma_flops(dtype: str, size: int = 1536) -> float:
    """Peak multiply-add rate of this machine (flop/s, all BLAS threads): the best of a few square GEMMs.

    Measured once per dtype and process. A GEMM of this size is compute-bound,
    so its rate is the arithmetic ceiling any kernel of this dtype can reach.
    """
    if dtype not in _FMA:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((size, size)).astype(dtype)
        Y = rng.standard_normal((size, size)).astype(dtype)
        t = best_time(lambda: X @ Y, 3, min_seconds=0.0, budget_seconds=5.0)
        _FMA[dtype] = 2.0 * size ** 3 / t
    return _FMA[dtype]


def bench_blocks(sizes: BenchSizes, quick: bool) -> list[dict]:
    """Table 2: block RR for k in {2, 8, 64} against single-object RR in the same run (``bench_block``)."""
    from benchmarks.bench_block import run

    n = sizes.n_scaling if sizes.n_scaling in sizes.n else sizes.n[0]
    d = sizes.d_scaling if sizes.d_scaling < n - 1 else sizes.d[0]
    if quick:
        return run(n, d, (2, 8, 64), ("float32",), m_block=4096, m_single=50_000, repeat=1, reference_objects=32)
    return run(n, d, (2, 8, 64), ("float32", "float64"), repeat=2)


def _mutual(Zb: np.ndarray) -> np.ndarray:
    C = euclidean(Zb, Zb)
    C = 0.5 * (C + C.T)
    np.fill_diagonal(C, 0.0)
    return C


def bench_scaling_m(sizes: BenchSizes) -> list[dict]:
    """Table 3: per-call cost over batch sizes m (float32, n_scaling, d_scaling)."""
    n, d = sizes.n_scaling, sizes.d_scaling
    m_max = max(sizes.m_scaling)
    Lm, Z = make_points(n, m_max, d, seed=1)
    est = LandmarkMDS(n_components=d).fit(landmark_matrix(Lm))
    A_all = np.ascontiguousarray(euclidean(Z, Lm), dtype=np.float32)
    rows = []
    for m in sizes.m_scaling:
        A = A_all[:m]
        t_read = best_time(lambda A=A: A.sum(), sizes.repeat)
        t_proj = best_time(lambda A=A: est.embed(A, method="projection"), sizes.repeat)
        t_rr = best_time(lambda A=A: est.embed(A, method="restricted"), sizes.repeat)
        rows.append(
            {
                "n": n,
                "d": d,
                "dtype": "float32",
                "m": m,
                "read_seconds": t_read,
                "projection_seconds": t_proj,
                "restricted_seconds": t_rr,
                "projection_objects_per_s": m / t_proj,
                "restricted_objects_per_s": m / t_rr,
                "projection_over_read": t_read / t_proj,
            }
        )
    return rows


def bench_refit(sizes: BenchSizes) -> list[dict]:
    """Table 4: seconds of ``LandmarkMDS(n_components=refit_d).fit(D)`` per n."""
    rows = []
    for n in sizes.refit_n:
        Lm, _ = make_points(n, 1, sizes.refit_d, seed=2)
        D = landmark_matrix(Lm)
        reps = 1 if n > 3000 else max(1, min(sizes.repeat, 3))
        est = LandmarkMDS(n_components=sizes.refit_d)
        t = best_time(lambda D=D, est=est: est.fit(D), reps, min_seconds=0.0)
        rows.append(
            {
                "n": n,
                "d": sizes.refit_d,
                "seconds": t,
                "eigenpairs_kept": int(est.spectrum_.rank),
                "full_spectrum": bool(est.spectrum_.exact),
            }
        )
        del D
    return rows


# --------------------------------------------------------------------------- driver


@dataclass
class BenchResult:
    meta: dict
    throughput: list[dict] = field(default_factory=list)
    blocks: list[dict] = field(default_factory=list)
    scaling_m: list[dict] = field(default_factory=list)
    refit: list[dict] = field(default_factory=list)
    end_to_end: list[dict] = field(default_factory=list)


def _meta(sizes: BenchSizes, preset: str) -> dict:
    try:
        import sklearn

        skv = sklearn.__version__
    except ImportError:
        skv = None
    return {
        "preset": preset,
        "sizes": dataclasses.asdict(sizes),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "sklearn": skv,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def run_bench(
    sizes: BenchSizes,
    preset: str = "custom",
    log: Callable[[str], None] = lambda s: None,
    blocks: bool = True,
    end_to_end: bool = True,
    e2e_rows: Mapping[str, Callable[[bool], dict]] | None = None,
) -> BenchResult:
    """Run every table; ``log`` receives a progress line per measurement; ``e2e_rows`` default ``bench_e2e.ROWS``."""
    res = BenchResult(meta=_meta(sizes, preset))
    t0 = time.perf_counter()
    for n in sizes.n:
        for d in sizes.d:
            if d >= n - 1:
                continue
            for dt in sizes.dtypes:
                log(f"throughput n={n} d={d} {dt}")
                res.throughput.append(bench_throughput(n, d, dt, sizes))
    if blocks:
        log("block RR, k = 2, 8, 64")
        res.blocks = bench_blocks(sizes, preset.split("+")[0] == "quick")
    log("scaling with m")
    res.scaling_m = bench_scaling_m(sizes)
    log("refit")
    res.refit = bench_refit(sizes)
    ceilings = {(r["n"], r["dtype"]): r["read_objects_per_s"] for r in res.throughput}
    if end_to_end:
        if e2e_rows is None:
            from benchmarks import bench_e2e

            e2e_rows = bench_e2e.ROWS
        res.end_to_end = run_end_to_end(e2e_rows, preset.split("+")[0] == "quick", ceilings, log)
    res.meta["seconds"] = time.perf_counter() - t0
    return res


def _fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def format_tables(res: BenchResult) -> str:
    """Markdown tables of a bench run (the form used in README)."""
    out = []
    has_sk = any("sklearn_objects_per_s" in r for r in res.throughput)
    head = ("| n | d | dtype | m | read obj/s | 2-thread read obj/s | FMA obj/s | projection obj/s | proj/read | "
            "proj/ceiling | RR obj/s | RR/read | block RR obj/s | block/read |")
    sep = "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    if has_sk:
        head += " sklearn obj/s | ours/sklearn | max abs diff (relative) |"
        sep += " ---: | ---: | ---: |"
    out += ["#### Throughput (ratios to the read ceiling of the same input, measured in one run)", "", head, sep]
    for r in res.throughput:
        line = (
            f"| {r['n']} | {r['d']} | {r['dtype']} | {r['m']} | {_fmt_rate(r['read_objects_per_s'])} | "
            f"{_fmt_rate(r['read_threads_objects_per_s'])} | "
            f"{_fmt_rate(r['fma_objects_per_s']) if r.get('fma_objects_per_s') else '-'} | "
            f"{_fmt_rate(r['projection_objects_per_s'])} | {r['projection_over_read']:.3f} | "
            f"{r['projection_over_ceiling']:.3f} | "
            f"{_fmt_rate(r['restricted_objects_per_s'])} | {r['restricted_over_read']:.3f} | "
            f"{_fmt_rate(r['block_objects_per_s'])} | {r['block_over_read']:.2e} |"
        )
        if has_sk:
            if "sklearn_objects_per_s" in r:
                line += (f" {_fmt_rate(r['sklearn_objects_per_s'])} | {r['speedup_over_sklearn']:.1f} | "
                         f"{r['sklearn_max_abs_diff']:.1e} ({r['sklearn_rel_diff']:.0e}) |")
            else:
                line += " | | |"
        out.append(line)
    k = res.throughput[0]["block_size"] if res.throughput else "k"
    out.append("")
    out.append("read: one thread's `A.sum()`; 2-thread read: a BLAS matrix-vector product `A @ ones` over the same "
               "array (all threads read); FMA (d >= 10): peak GEMM flop/s / (2·n·(d+1)) flops per object; "
               "proj/ceiling: projection over the lower of the 2-thread read and FMA ceilings.")
    out.append(f"block RR: blocks of {k} objects with their mutual dissimilarities, all blocks in one call, one BLAS "
               f"thread.")
    if res.blocks:
        r0 = res.blocks[0]
        out += ["", f"#### Block RR against single-object RR (n={r0['n']}, d={r0['d']}, same run)", "",
                "| dtype | k | single RR obj/s | block RR obj/s | block/single | former solver obj/s | speed-up | "
                "certified | starts | iterations |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in res.blocks:
            out.append(f"| {r['dtype']} | {r['k']} | {_fmt_rate(r['single_rr_objects_per_s'])} | "
                       f"{_fmt_rate(r['block_objects_per_s'])} | {r['block_over_single_rr']:.4f} | "
                       f"{_fmt_rate(r['reference_objects_per_s'])} | {r['speedup_over_reference']:.0f}x | "
                       f"{r['certified_share']:.3f} | {r['mean_starts']:.2f} | {r['mean_iterations']:.1f} |")
        out.append("")
        out.append("certified: share of blocks with the duality certificate of global optimality; starts and "
                   "iterations per block (docs/math.md §3.3). Former solver: per-block multi-start L-BFGS.")
    if res.scaling_m:
        r0 = res.scaling_m[0]
        out += [
            "",
            f"#### Scaling with batch size m (n={r0['n']}, d={r0['d']}, float32)",
            "",
            "| m | read µs | projection µs | RR µs | projection obj/s | RR obj/s | proj/read |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in res.scaling_m:
            out.append(
                f"| {r['m']} | {r['read_seconds'] * 1e6:.1f} | {r['projection_seconds'] * 1e6:.1f} | "
                f"{r['restricted_seconds'] * 1e6:.1f} | {_fmt_rate(r['projection_objects_per_s'])} | "
                f"{_fmt_rate(r['restricted_objects_per_s'])} | {r['projection_over_read']:.3f} |"
            )
    if res.refit:
        out += ["", "#### Refit: classical MDS of n landmarks (`LandmarkMDS(n_components=d).fit`)", "",
                "| n | d | seconds | eigenpairs kept | full spectrum |", "| ---: | ---: | ---: | ---: | --- |"]
        for r in res.refit:
            out.append(f"| {r['n']} | {r['d']} | {r['seconds']:.3f} | {r['eigenpairs_kept']} | {r['full_spectrum']} |")
    out += ["", "#### End to end", ""]
    if not res.end_to_end:
        out.append("(no end-to-end benchmark registered)")
    else:
        out += ["| name | status | obj/s | in-memory obj/s | share of in-memory | over read | peer obj/s | "
                "ours/peer | note |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in res.end_to_end:
            rate = _fmt_rate(r["objects_per_s"]) if "objects_per_s" in r else ""
            mem = _fmt_rate(r["in_memory_objects_per_s"]) if r.get("in_memory_objects_per_s") else ""
            share = f"{r['over_in_memory']:.2f}" if r.get("over_in_memory") is not None else ""
            over = f"{r['over_read']:.3f}" if "over_read" in r else ""
            peer = _fmt_rate(r["peer_objects_per_s"]) if r.get("peer_objects_per_s") else ""
            vs = f"{r['over_peer']:.1f}" if r.get("over_peer") else ""
            note = r.get("reason") or r.get("note") or ""
            out.append(f"| {r['name']} | {r['status']} | {rate} | {mem} | {share} | {over} | {peer} | {vs} | {note} |")
        out.append("")
        out.append("share of in-memory: end-to-end objects/s over the core's in-memory `est.embed` (projection) on "
                   "the same objects, measured just before in the same process (for Kafka: over raw kafka-python "
                   "consume of the same messages, named in the note).")
    out.append("")
    out.append(f"total {res.meta.get('seconds', float('nan')):.1f} s; numpy {res.meta['numpy']}, "
               f"scipy {res.meta['scipy']}, scikit-learn {res.meta['sklearn']}, {res.meta['cpus']} CPUs")
    return "\n".join(out)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks bench",
        description="Throughput of projection, RR and block RR against the memory-read ceiling, scaling, refit time.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "--sizes SPEC overrides the preset: 'key=v1,v2;key=v', keys\n"
            "  n, d, dtype (float32,float64), mb (input MB), max_m, block_objects, k (block size),\n"
            "  m (m-scaling sizes), n_scaling, d_scaling, refit (n list), refit_d, repeat, sklearn (0/1)\n"
            "example: --sizes 'n=100;d=2;dtype=float32;mb=2;m=100,1000;refit=300;repeat=1'"
        ),
    )
    p.add_argument("--quick", action="store_true",
                   help="small grid, about a minute (default: the full grid, a few minutes)")
    p.add_argument("--sizes", metavar="SPEC", help="override sizes (see below)")
    p.add_argument("--json", metavar="PATH", default="streamembed-bench.json",
                   help="JSON output (default streamembed-bench.json; '-' for none)")
    p.add_argument("--no-block", action="store_true", help="skip the block RR table (k = 2, 8, 64)")
    p.add_argument("--no-e2e", action="store_true", help="skip the end-to-end rows (files, daemon, Kafka, Dask)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks bench``; returns the exit code (0 ok, 2 bad arguments)."""
    args = build_parser().parse_args(argv)
    preset = "quick" if args.quick else "full"
    sizes = PRESETS[preset]
    if args.sizes:
        try:
            sizes = parse_sizes(args.sizes, sizes)
        except ValueError as exc:
            print(f"python -m benchmarks bench: {exc}", file=sys.stderr)
            return 2
        preset += "+sizes"
    log = (lambda s: None) if args.quiet else (lambda s: print(f"[bench] {s}", file=sys.stderr, flush=True))
    res = run_bench(sizes, preset, log, blocks=not args.no_block, end_to_end=not args.no_e2e)
    print(format_tables(res))
    if args.json and args.json != "-":
        with open(args.json, "w") as fh:
            json.dump(dataclasses.asdict(res), fh, indent=2, default=_json_default)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
