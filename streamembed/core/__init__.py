"""The numerical core of streamembed: no I/O, only arrays in and arrays out.

| module | docs/math.md | what |
| --- | --- | --- |
| ``model`` | §1–5 | ``LandmarkModel``: the fitted map, what a refit replaces |
| ``validation`` | — | input checks, per-row reasons |
| ``transforms`` | §2 | input pipeline: similarity, geodesic, additive constant |
| ``cmds`` | §1 | landmark classical MDS spectrum |
| ``centering`` | §2 | centring new objects and blocks |
| ``projection`` | §3.1 | fused projection hot path (also β) |
| ``restricted`` | §3.2 | single-object RR: secular equation, hard case, arc |
| ``block`` | §3.3 | multi-point RR: many blocks per call, staged starts, flags |
| ``block_newton`` | §3.3 | trust-region Newton (Steihaug CG) for stacks of equal-size blocks |
| ``block_certificate`` | §3.3 | duality bound on a block's distance to the global minimum |
| ``block_starts`` | §3.3 | starting points: projection, spectral, eigen, seeded random |
| ``block_input`` | §2 | per-block validation of cross matrices, centring and packing |
| ``block_consistency`` | §4.3 | the ``inconsistent_block`` flag: does a block's C agree with its rows |
| ``criteria``, ``criteria_checks``, ``criteria_line`` | §3.4 | raw-stress, Sammon and L1 placement, certified |
| ``criteria_stress``, ``criteria_l1``, ``criteria_newton`` | §3 | each criterion's kernels, the shared damped Newton |
| ``metric_map`` | §3.5 | SMACOF / Sammon refinement of the landmark map |
| ``kernel_input`` | §2 | similarity (kernel) input as dissimilarities |
| ``geodesic`` | §2 | landmark Isomap: k-NN graph geodesics, ties kept |
| ``cailliez`` | §2 | additive constant making the kernel PSD |
| ``placer`` | §3, §4.3 | ``Placer``: what placing on one map needs (kernels, limits, flags), built once per model |
| ``dispatch`` | §3 | method → routine for single objects |
| ``block_place`` | §3.3, §4 | block RR of a batch: range, checks, solve, flags |
| ``range_guard`` | §4.4 | the placeable range per dtype |
| ``residuals`` | §4 | k0, dropped energy, block K0 |
| ``bounds`` | §4 | window error and eigenvalue bounds |
| ``calibration`` | §4.3 | the non-Euclidean flag's threshold from the landmarks |
| ``runtime`` | §4.4 | worker threads (the one pool), BLAS threads, per-batch time budgets and cancellation |
| ``drift`` | §4 | sliding-window drift statistics, the rule trigger |
| ``cusum``, ``detector``, ``trigger`` | §7 | CUSUM arithmetic, the calibrated detector, the trigger |
| ``landmarks`` | §5, §7.5 | ``select_landmarks``, the one entry point of landmark selection |
| ``landmark_strategies`` | §5, §7.5 | the strategies: max–min, k-means++, k-medoids, RPCholesky, residual-pivoted |
| ``dissimilarities`` | §5 | dissimilarity rows given whole or computed from features |
| ``refit`` | §5, §7.5 | refitting the landmark map from a reservoir |
| ``procrustes`` | §5 | alignment of a refit to the previous map |
| ``flags``, ``result``, ``errors`` | — | per-row flags, result container, error types |
"""
