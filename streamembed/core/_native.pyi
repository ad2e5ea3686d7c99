"""Types of the optional C kernels (``csrc/module.c``); arrays are C-contiguous float64 unless stated."""

import numpy as np

def project(A: np.ndarray, WT: np.ndarray, offset: np.ndarray, Z: np.ndarray, flags: np.ndarray, start: int,
            stop: int, /) -> None:
    """Z[i] = (A[i]**2) @ WT.T + offset and flags[i] = any sign bit set in A[i], for rows start:stop."""

def secular(aT: np.ndarray, beta: np.ndarray, proj_norm2: np.ndarray, gap: np.ndarray, in_group: np.ndarray,
            lam_d: float, max_iter: int, final_step_rtol: float, step_rtol: float, u: np.ndarray,
            converged: np.ndarray, start: int, stop: int, /) -> int:
    """Safeguarded Newton on the RR secular equation for columns start:stop; the iterations taken."""

def isa() -> str:
    """The instruction set of the projection kernels in use."""

def supported_isas() -> list[str]:
    """The projection kernel instruction sets this CPU runs."""

def set_isa(name: str, /) -> None:
    """Use the avx512, avx2 or sse2 projection kernels."""
