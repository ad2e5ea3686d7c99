"""The numerical core of streamembed: no I/O, only arrays in and arrays out.

| module | MATH.md | what |
| --- | --- | --- |
| ``validation`` | — | input checks, per-row reasons |
| ``cmds`` | §1 | landmark classical MDS spectrum |
| ``centering`` | §2 | centring new objects and blocks |
| ``projection`` | §3 | fused projection hot path (also β) |
| ``restricted`` | §3 | single-object RR: secular equation, hard case, arc |
| ``block`` | §3 | multi-point RR: many blocks per call, staged starts, flags |
| ``block_newton`` | §3 | trust-region Newton (Steihaug CG) for stacks of equal-size blocks |
| ``block_certificate`` | §3 | duality bound on a block's distance to the global minimum |
| ``block_starts`` | §3 | starting points: projection, spectral, eigen, seeded random |
| ``block_input`` | §2 | per-block validation of cross matrices, centring and packing |
| ``block_reference`` | §3 | the former multi-start L-BFGS solver, kept as a test reference |
| ``residuals`` | §4 | k0, dropped energy, block K0 |
| ``bounds`` | §4 | window error and eigenvalue bounds |
| ``criteria`` | §3 (seed 003, seed 000 §4) | raw-stress and squared-distance L1 placement |
| ``kernel_input`` | §2 (seed 000 §3) | similarity (kernel) input as dissimilarities |
| ``geodesic`` | seed 001 §4, §6 | landmark Isomap: k-NN graph geodesics |
| ``cailliez`` | seed 001 §4.2 | additive constant making the kernel PSD |
| ``metric_map`` | seed 001 §2.2–3 | SMACOF / Sammon refinement of the landmark map |
"""
