"""Types of the optional C kernels (``csrc/module.c``); arrays are C-contiguous float64 unless stated."""

import numpy as np

def project(A: np.ndarray, WT: np.ndarray, offset: np.ndarray, Z: np.ndarray, flags: np.ndarray, start: int,
            stop: int, Z2: np.ndarray | None = None, /) -> None:
    """Z[i] = (A[i]**2) @ WT.T + offset (with Z2: Z's columns then Z2's) and flags[i] = 1 if a sign bit is set in
    A[i], | 2 if an entry is zero, for rows start:stop."""

def secular(aT: np.ndarray, beta: np.ndarray, proj_norm2: np.ndarray, gap: np.ndarray, in_group: np.ndarray,
            lam_d: float, max_iter: int, final_step_rtol: float, step_rtol: float, u: np.ndarray,
            converged: np.ndarray, start: int, stop: int, /) -> int:
    """Safeguarded Newton on the RR secular equation for columns start:stop; the iterations taken."""

def block_newton(Y: np.ndarray, C: np.ndarray, Beta: np.ndarray, lam: np.ndarray, f0: np.ndarray, max_iter: int,
                 constants: np.ndarray, f: np.ndarray, g_norm: np.ndarray, iterations: np.ndarray,
                 cg_iterations: np.ndarray, converged: np.ndarray, gap: np.ndarray, start: int, stop: int, /) -> None:
    """Trust-region Newton from Y (in place) and the optimality gap (NaN: R not finite) of blocks start:stop."""

def block_rows(A: np.ndarray, shift: np.ndarray, Bout: np.ndarray, b2: np.ndarray, abar: np.ndarray, bad: np.ndarray,
               start: int, stop: int, /) -> None:
    """Rows start:stop centred into Bout (B = −½ (a² − ā − shift)), ‖B‖², mean a² and a bad-entry flag per row."""

def block_consistency(coords: np.ndarray, beta: np.ndarray, sizes: np.ndarray, shift: np.ndarray, out: np.ndarray,
                      /) -> None:
    """out[b] = 1 (uint8) where K0 + shift[b] I of block b (K0 = ½(β + βᵀ) − Ŷ Ŷᵀ) has no Cholesky factor or a
    non-finite entry; sizes int64, blocks consecutive in coords (m, r) and beta (Σ k²,)."""

def block_cross(M: np.ndarray, rtol: float, bad: np.ndarray, largest: np.ndarray, /) -> None:
    """Per matrix of M (s, k, k): bad (uint8) = a NaN/inf/negative entry, a diagonal entry or an asymmetry beyond
    rtol · max |x|; largest = the largest |x| of a finite entry."""

def exit_on_sigbus(message: bytes, code: int, /) -> None:
    """From now on a SIGBUS (a mapped file truncated) writes ``message`` to stderr and exits with ``code``."""

def isa() -> str:
    """The instruction set of the projection and block-solver kernels in use."""

def supported_isas() -> list[str]:
    """The kernel instruction sets this CPU runs."""

def set_isa(name: str, /) -> None:
    """Use the avx512, avx2 or sse2 kernels (the projection's and the block solver's)."""
