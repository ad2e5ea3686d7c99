"""Projection of new objects: the hot path (docs/math.md §3, with §2 folded in).

Gower's formula, Bengio's Nyström formula, landmark MDS and kernel-PCA
out-of-sample projection are the same map ŷ = Λ^{-1/2} Uᵀ b. With b the
centred cross-similarities of §2 and Uᵀe = 0 kept exact by subtracting the
column sums, everything up to the squaring of the input is linear in a2:

    ŷ = a2 · W + w0,   W = -1/2 (U - e·(eᵀU)/n) Λ^{-1/2},   w0 = 1/2 Λ^{-1/2} Uᵀ(m_Δ - g e)
    β = a2 · e/n - g/2

so one matrix product with the augmented (n, p+1) matrix [W | e/n] gives the
p projected coordinates and β for a whole block of rows.

Two implementations compute the same numbers:

- ``compiled`` (``csrc/projection.c``, built at install when a C compiler is present):
  one pass per row that squares it in registers and multiplies it into p+1
  vector accumulators while Wᵀ stays in L1, checking signs on the way. It
  reads each input byte once, which is what the read ceiling allows.
- ``numpy``: rows in cache-sized blocks, squared into a reused buffer (no
  per-batch allocation, docs/performance.md) and multiplied by BLAS while still in cache:
  a squaring pass, BLAS's packing pass and a GEMM whose narrow output keeps
  it far from peak (0.30–0.47 of the read ceiling here, against 0.50–0.73
  compiled; ``benchmarks/bench_core.py``).

Both split the rows over two Python threads (the work runs without the GIL).

A second product on the same rows - the radius's d(B + 1) columns
(``trust.calibration``) - is fused into the compiled pass
(:meth:`ProjectionKernel.fused`): each row is read once for both, and the
kernel notes the rows holding an entry equal to zero (objects at a landmark),
where the radius used a second pass and a row minimum. Each product keeps the
compiled kernels it would get alone, so their numbers are those of two calls.

A kernel is shared by every thread that places rows with one model: each
call writes only its own outputs, and the numpy path's squaring buffer belongs
to the thread that uses it (``threading.local``: a pool worker or a caller
running the batch itself). The threads are the process's one worker pool
(``runtime.worker_pool``).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..fit.cmds import LandmarkSpectrum
from ..runtime import in_worker, resolve_threads, single_blas_thread, worker_pool

try:
    from .. import _native
except ImportError:  # built without a C compiler (or off x86): the numpy path
    _native = None  # type: ignore[assignment]  # the numpy path: available_backends() says so

#: The implementations ``ProjectionKernel`` can use, best first.
BACKENDS = ("compiled", "numpy")
#: The compiled kernel's row flags: an entry with its sign bit set; an entry equal to zero.
FLAG_SIGN, FLAG_ZERO = 1, 2


def available_backends() -> tuple[str, ...]:
    """The projection backends this installation can run."""
    return BACKENDS if _native is not None else ("numpy",)

#: Rows per cache block ≈ BLOCK_ELEMENTS / n: 128 rows at n = 500 (256 KB of
#: float32, measured best for float32 and float64 here: larger blocks fall out
#: of the 1 MiB per-core L2 with the squared copy, smaller ones pay numpy's
#: per-call overhead on every block).
BLOCK_ELEMENTS = 64_000
#: The compiled kernel hands rows to its threads in tasks of at least this many
#: rows (a task costs ~20 µs of hand-off, 1024 rows ~150 µs of work at n = 500),
#: and of at most 1/COMPILED_TASKS_PER_THREAD of each thread's share.
COMPILED_ROWS_PER_TASK = 1024
COMPILED_TASKS_PER_THREAD = 8
#: ... and only batches of at least this many entries (≈ 1 ms of work) are split at all: a streaming batch
#: of 8,192 rows × 200 landmarks costs less than handing its halves to another thread and waiting on a
#: loaded machine (measured 0.3 ms per hand-off beside other work).
COMPILED_PARALLEL_ELEMENTS = 1 << 21


def _padded_transpose(W: np.ndarray) -> np.ndarray:
    """Wᵀ (p, ldw) zero-padded for ``_native.project``: every vector load of a row
    of Wᵀ stays inside it (ldw ≥ n rounded up to 64 bytes), and the row stride is
    not a multiple of 1 KiB, which would map the p rows onto the same few L1 cache
    sets (measured: float64 at n = 500, a 4 KiB stride, ran at 60%)."""
    n, p = W.shape
    lanes = 64 // W.itemsize
    ldw = -(-n // lanes) * lanes
    if (ldw * W.itemsize) % 1024 == 0:
        ldw += lanes
    WT = np.zeros((p, ldw), dtype=W.dtype)
    WT[:, :n] = W.T
    return WT


class ProjectionKernel:
    """Fused map from raw dissimilarities to (projected coordinates, β, row minimum).

    Args:
        spectrum: the landmark spectrum.
        n_coords: how many leading eigenpairs to project on (d for the map,
            r for residual monitoring).
        dtype: float32 or float64, the precision of the inputs it will see;
            the whole product runs in it (numpy 2 would otherwise promote a
            float32 batch and leave the fast BLAS path, docs/performance.md).
        n_threads: worker threads; each takes a contiguous share of the rows.
        backend: "compiled", "numpy" or None for the best available
            (``available_backends()``).
    """

    def __init__(self, spectrum: LandmarkSpectrum, n_coords: int, dtype: np.dtype, n_threads: int | None = None,
                 backend: str | None = None):
        lam = spectrum.eigenvalues[:n_coords]
        U = spectrum.eigenvectors[:, :n_coords]
        n = U.shape[0]
        inv_sqrt = 1.0 / np.sqrt(lam)
        W = np.empty((n, n_coords + 1), dtype=np.float64)
        W[:, :n_coords] = -0.5 * (U - U.sum(axis=0, keepdims=True) / n) * inv_sqrt
        W[:, n_coords] = 1.0 / n
        const = np.empty(n_coords + 1, dtype=np.float64)
        const[:n_coords] = 0.5 * inv_sqrt * (U.T @ (spectrum.row_means - spectrum.grand_mean))
        const[n_coords] = -0.5 * spectrum.grand_mean
        self.dtype = np.dtype(dtype)
        self.n_coords = n_coords
        self.n_landmarks = n
        compilable = self.dtype in (np.float32, np.float64) and self.dtype.isnative
        if backend is None:
            backend = available_backends()[0] if compilable else "numpy"
        if backend == "compiled" and not compilable:
            raise ValueError(f"the compiled projection kernel takes native float32 or float64, not {self.dtype}")
        if backend not in available_backends():
            raise ValueError(f"projection backend {backend!r} is not available here; "
                             f"choose from {available_backends()}")
        self.backend = backend
        self.W = np.ascontiguousarray(W, dtype=self.dtype)
        self.WT = _padded_transpose(self.W)
        self.const = const.astype(self.dtype)
        self.n_threads = resolve_threads(n_threads)
        self.block_rows = int(np.clip(BLOCK_ELEMENTS // n, 16, 1024))
        self._local = threading.local()  # per thread: the squaring buffer of the numpy path
        self._fused: dict[int, tuple[ProjectionKernel, np.ndarray, np.ndarray]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_local"]
        state["_fused"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def _buffer(self) -> np.ndarray:
        """This thread's (block_rows, n) squaring buffer: threads sharing the kernel never share it."""
        buf = getattr(self._local, "buf", None)
        if buf is None:
            buf = self._local.buf = np.empty((self.block_rows, self.n_landmarks), dtype=self.dtype)
        return buf

    def _run(self, A: np.ndarray, Z: np.ndarray, blkmin: np.ndarray, start: int, stop: int) -> None:
        buf = self._buffer()
        with np.errstate(invalid="ignore", over="ignore"):
            self._run_blocks(A, Z, blkmin, start, stop, buf)

    def _compiled(self, A: np.ndarray, extra: ProjectionKernel | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                           np.ndarray | None]:
        """Z (constant included), the per-row flags (``FLAG_SIGN``, ``FLAG_ZERO``) and, with ``extra``, its Z
        computed in the same pass, through ``_native.project``."""
        m = A.shape[0]
        Z = np.empty((m, self.n_coords + 1), dtype=self.dtype)
        flags = np.zeros(m, dtype=np.uint8)
        WT, const, Z2 = self.WT, self.const, None
        if extra is not None:
            Z2 = np.empty((m, extra.n_coords + 1), dtype=self.dtype)
            WT, const = self._stacked(extra)
        if (self.n_threads == 1 or m < 2 * COMPILED_ROWS_PER_TASK or m * self.n_landmarks < COMPILED_PARALLEL_ELEMENTS
                or in_worker()):
            _native.project(A, WT, const, Z, flags, 0, m, Z2)
        else:
            # Several tasks per thread, taken as threads come free (one stalled core on a shared machine
            # does not hold back the batch); the calling thread takes them too, so a batch costs
            # n_threads − 1 hand-offs to the pool, not one per task.
            step = max(COMPILED_ROWS_PER_TASK, -(-m // (COMPILED_TASKS_PER_THREAD * self.n_threads)))
            starts = iter(range(0, m, step))  # shared: each next() is atomic under the GIL

            def work() -> None:
                for s in starts:
                    _native.project(A, WT, const, Z, flags, s, min(s + step, m), Z2)

            pool = worker_pool(self.n_threads)
            futures = [pool.submit(work) for _ in range(self.n_threads - 1)]
            work()
            for f in futures:
                f.result()
        return Z, flags, Z2

    def _stacked(self, extra: ProjectionKernel) -> tuple[np.ndarray, np.ndarray]:
        """(Wᵀ of this kernel and ``extra`` stacked, their constants): the fused pass's operands (cached)."""
        hit = self._fused.get(id(extra))
        if hit is None or hit[0] is not extra:
            hit = (extra, np.ascontiguousarray(np.vstack([self.WT, extra.WT])),
                   np.ascontiguousarray(np.concatenate([self.const, extra.const])))
            self._fused[id(extra)] = hit
        return hit[1], hit[2]

    def fused(self, extra: ProjectionKernel) -> FusedProjection:
        """This kernel and ``extra`` (a kernel of the same rows: n landmarks, dtype) in one pass over each row."""
        if extra.n_landmarks != self.n_landmarks or extra.dtype != self.dtype:
            raise ValueError(f"a fused kernel needs the same landmarks and dtype: {extra.n_landmarks} "
                             f"{extra.dtype} against {self.n_landmarks} {self.dtype}")
        return FusedProjection(self, extra)

    def _run_blocks(self, A: np.ndarray, Z: np.ndarray, blkmin: np.ndarray, start: int, stop: int,
                    buf: np.ndarray) -> None:
        W = self.W
        bs = self.block_rows
        for s in range(start, stop, bs):
            e = min(s + bs, stop)
            blk = A[s:e]
            sq = buf[: e - s]
            blkmin[s // bs] = blk.min()
            np.multiply(blk, blk, out=sq)
            np.matmul(sq, W, out=Z[s:e])

    def __call__(self, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Apply to raw dissimilarities A (m, n) of this kernel's dtype.

        Returns:
            Z: (m, p+1) in the kernel's dtype; Z[:, :p] projected coordinates,
               Z[:, p] = β.
            suspect: (m,) bool, True for rows that may be invalid: rows whose β
               is not finite (a NaN or infinite entry), and rows that may hold
               a negative entry (compiled: an entry with its sign bit set, so
               -0.0 too; numpy: every row of a cache block whose minimum is
               negative or NaN). Only these need a closer look
               (``validation.describe_bad_row``), which clears the false alarms;
               the check costs no extra pass over the batch.
        """
        if A.dtype != self.dtype:
            raise TypeError(f"kernel built for {self.dtype}, got {A.dtype}")
        A = np.ascontiguousarray(A)
        if self.backend == "compiled":
            Z, flags, _ = self._compiled(A)
            suspect = (flags & FLAG_SIGN).view(bool)
            suspect |= ~np.isfinite(Z[:, self.n_coords])
            return Z, suspect
        m = A.shape[0]
        bs = self.block_rows
        Z = np.empty((m, self.n_coords + 1), dtype=self.dtype)
        blkmin = np.zeros(-(-m // bs), dtype=self.dtype)
        workers = self.n_threads if m >= 4 * bs * self.n_threads and not in_worker() else 1
        if workers == 1:
            with single_blas_thread():  # a product per cache block: two BLAS threads only contend on them
                self._run(A, Z, blkmin, 0, m)
        else:
            pool = worker_pool(self.n_threads)
            # Split on block boundaries so each block's minimum has one writer.
            bounds = [min(m, (m * w // workers) // bs * bs) for w in range(workers)] + [m]
            with single_blas_thread():  # one BLAS thread per Python worker (docs/performance.md)
                futures = [pool.submit(self._run, A, Z, blkmin, bounds[w], bounds[w + 1])
                           for w in range(workers)]
                for f in futures:
                    f.result()
        with np.errstate(invalid="ignore", over="ignore"):
            Z += self.const
        suspect = ~np.isfinite(Z[:, self.n_coords])
        bad_blocks = np.flatnonzero(~(blkmin >= 0))
        for b in bad_blocks:
            suspect[b * bs : (b + 1) * bs] = True
        return Z, suspect


class FusedProjection:
    """Two kernels of the same rows (``ProjectionKernel.fused``): ``base`` and ``extra`` in one pass.

    Calling it gives ``(Z, suspect, zero, Z2)``: ``base``'s outputs, whether each row holds an entry equal to
    zero (m,) bool, and ``extra``'s Z (m, p2 + 1), the numbers of separate calls. The numpy backend runs them
    one after the other and finds the zeros by a row minimum (as the radius did before the fused pass).
    """

    def __init__(self, base: ProjectionKernel, extra: ProjectionKernel) -> None:
        self.base, self.extra = base, extra

    def __call__(self, A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        base = self.base
        if A.dtype != base.dtype:
            raise TypeError(f"kernel built for {base.dtype}, got {A.dtype}")
        A = np.ascontiguousarray(A)
        if base.backend != "compiled" or self.extra.backend != "compiled":
            Z, suspect = base(A)
            Z2 = self.extra(A)[0]
            with np.errstate(invalid="ignore"):
                zero = np.min(A, axis=1) == 0 if A.shape[1] else np.zeros(A.shape[0], dtype=bool)
            return Z, suspect, zero, Z2
        Z, flags, Zx = base._compiled(A, self.extra)
        assert Zx is not None
        suspect = (flags & FLAG_SIGN).view(bool)
        suspect |= ~np.isfinite(Z[:, base.n_coords])
        return Z, suspect, (flags & FLAG_ZERO) != 0, Zx
