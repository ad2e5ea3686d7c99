"""The numerical core of streamembed: no I/O, only arrays in and arrays out.

| module | docs/math.md | what |
| --- | --- | --- |
| ``model`` | §1–5 | ``LandmarkModel``: the fitted map, what a refit replaces |
| ``inputs.validation`` | — | input checks, per-row reasons |
| ``inputs.transforms`` | §2 | input pipeline: similarity, geodesic, additive constant |
| ``fit.cmds`` | §1 | landmark classical MDS spectrum |
| ``inputs.centering`` | §2 | centring new objects and blocks |
| ``place.projection`` | §3.1 | fused projection hot path (also β) |
| ``place.restricted`` | §3.2 | single-object RR: secular equation, hard case, arc |
| ``place.block.solve`` | §3.3 | multi-point RR: many blocks per call, staged starts, flags |
| ``place.block.newton`` | §3.3 | trust-region Newton (Steihaug CG) for stacks of equal-size blocks |
| ``place.block.certificate`` | §3.3 | duality bound on a block's distance to the global minimum |
| ``place.block.starts`` | §3.3 | starting points: projection, spectral, eigen, seeded random |
| ``place.block.prepare`` | §2 | per-block validation of cross matrices, centring and packing |
| ``place.block.consistency`` | §4.3 | the ``inconsistent_block`` flag: does a block's C agree with its rows |
| ``place.criteria.solve``, ``place.criteria.checks``, ``place.criteria.line`` | §3.4 | raw-stress, Sammon and L1 placement, certified |
| ``place.criteria.stress``, ``place.criteria.l1``, ``place.criteria.newton`` | §3 | each criterion's kernels, the shared damped Newton |
| ``fit.metric_map`` | §3.5 | SMACOF / Sammon refinement of the landmark map |
| ``inputs.kernel`` | §2 | similarity (kernel) input as dissimilarities |
| ``inputs.geodesic`` | §2 | landmark Isomap: k-NN graph geodesics, ties kept |
| ``inputs.cailliez`` | §2 | additive constant making the kernel PSD |
| ``place.placer`` | §3, §4.3 | ``Placer``: what placing on one map needs (kernels, limits, flags), built once per model |
| ``place.dispatch`` | §3 | method → routine for single objects |
| ``place.block.batch`` | §3.3, §4 | block RR of a batch: range, checks, solve, flags |
| ``place.range_guard`` | §4.4 | the placeable range per dtype |
| ``monitor.residuals`` | §4 | k0, dropped energy, block K0 |
| ``monitor.bounds`` | §4 | window error and eigenvalue bounds |
| ``monitor.calibration`` | §4.3 | the non-Euclidean flag's threshold from the landmarks |
| ``runtime`` | §4.4 | worker threads (the one pool), BLAS threads, per-batch time budgets and cancellation |
| ``monitor.drift`` | §4 | sliding-window drift statistics, the rule trigger |
| ``monitor.cusum``, ``monitor.detector``, ``monitor.trigger`` | §7 | CUSUM arithmetic, the calibrated detector, the trigger |
| ``refit.landmarks`` | §5, §7.5 | ``select_landmarks``, the one entry point of landmark selection |
| ``refit.strategies`` | §5, §7.5 | the strategies: max–min, k-means++, k-medoids, RPCholesky, residual-pivoted |
| ``inputs.dissimilarities`` | §5 | dissimilarity rows given whole or computed from features |
| ``refit.refit`` | §5, §7.5 | refitting the landmark map from a reservoir |
| ``refit.procrustes`` | §5 | alignment of a refit to the previous map |
| ``flags``, ``result``, ``errors`` | — | per-row flags, result container, error types |
"""
