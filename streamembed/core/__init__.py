"""The numerical core of streamembed: no I/O, only arrays in and arrays out.

| module | docs/math.md | what |
| --- | --- | --- |
| ``model`` | §1–5 | ``LandmarkModel``: the fitted map, what a refit replaces |
| ``options`` | — | the one table of option choices, defaults and allowed combinations |
| ``registry`` | — | the registry of every extension axis (methods, metrics, triggers; docs/extending.md) |
| ``runtime`` | §4.4 | worker threads (the one pool), BLAS threads, per-batch time budgets and cancellation |
| ``flags``, ``result``, ``errors`` | — | per-row flags, result container, error types |
| **``inputs``** | §2 | what comes in |
| ``inputs.validation`` | — | input checks, per-row reasons |
| ``inputs.transforms`` | §2 | input pipeline: similarity, geodesic, additive constant |
| ``inputs.kernel``, ``.geodesic``, ``.cailliez`` | §2 | similarity input, landmark Isomap, additive constant |
| ``inputs.centering`` | §2 | centring new objects and blocks |
| ``inputs.hints`` | §2 | fit hints for the kind of input |
| ``inputs.metrics`` | §2 | the metrics between objects: one registry, names or ``module:function`` |
| ``inputs.dissimilarities`` | §5 | dissimilarity rows given whole or computed from objects by a metric |
| **``fit``** | §1, §3.5–3.6 | the landmark map |
| ``fit.cmds`` | §1 | landmark classical MDS spectrum |
| ``fit.metric_map``, ``fit.ordinal_map`` | §3.5, §3.6 | SMACOF / Sammon refinement, non-metric maps |
| ``fit.likelihood`` | §1 | the held-out score that chooses the number of components |
| ``fit.features`` | §2 | a map from feature vectors (the estimator's and the daemon's), what a fitted map warns about |
| **``place``** | §3 | placing new objects |
| ``place.placer`` | §3, §4.3 | ``Placer``: what placing on one map needs (kernels, limits, flags), once per model |
| ``place.methods`` | §3 | the placement methods: one registry (routine, maps it needs, output code) |
| ``place.dispatch`` | §3 | the built-in routines for single objects |
| ``place.projection`` | §3.1 | fused projection hot path (also β) |
| ``place.restricted`` | §3.2 | single-object RR: secular equation, hard case, arc |
| ``place.range_guard`` | §4.4 | the placeable range per dtype |
| ``place.block`` | §3.3 | multi-point RR: ``batch`` (a batch's blocks), ``solve`` (staged starts, flags), ``newton`` |
| | | (trust-region Newton), ``certificate`` (duality bound), ``starts``, ``prepare`` (checks, |
| | | centring, packing), ``consistency`` (the ``inconsistent_block`` flag, §4.3) |
| ``place.criteria`` | §3.4 | raw-stress, Sammon and L1 placement, certified: ``solve``, ``checks``, ``line``, |
| | | ``stress``, ``l1``, ``newton`` (the shared damped Newton) |
| **``monitor``** | §4, §7 | how much to trust placements, drift |
| ``monitor.residuals``, ``monitor.bounds`` | §4 | k0, dropped energy, block K0; window error and eigenvalue bounds |
| ``monitor.calibration``, ``.consistency`` | §4.3, §4.5 | the non-Euclidean flag's threshold; the profile check |
| ``monitor.drift`` | §4 | sliding-window drift statistics, the rule trigger |
| ``monitor.cusum``, ``.detector``, ``.trigger`` | §7 | CUSUM arithmetic, the calibrated detector, the trigger |
| ``monitor.triggers`` | §4, §7 | the ``Trigger`` protocol, the registry of trigger kinds, ``AnyOf`` |
| ``monitor.quantiles`` | §7 | Student's t and χ² quantiles for the calibration (no scipy mid-stream) |
| **``refit``** | §5, §7.5 | new landmarks |
| ``refit.selections`` | §5 | the names of the landmark selection strategies and the default |
| ``refit.landmarks``, ``refit.strategies`` | §5, §7.5 | ``select_landmarks`` (the one entry point) and its strategies |
| ``refit.policy``, ``refit.refit`` | §7.5 | keep, repair or redraw; refitting the map from a reservoir |
| ``refit.procrustes`` | §5 | alignment of a refit to the previous map |
"""
