"""Benchmarks and quality evaluation (``streamembed bench``, ``evaluate``, ``plot``).

Modules, one idea each:

* ``metrics``: stress, trustworthiness/continuity (Roy 2021, §1.3), Procrustes fidelity.
* ``references``: full classical-MDS refits used as references for placements.
* ``datasets``: offline real datasets and seeded synthetic ones.
* ``editdistance``: vectorised Levenshtein distances (for string datasets).
* ``evaluate``: the method comparison table (``main`` = ``streamembed evaluate``).
* ``bench``: throughput against the read ceiling (``main`` = ``streamembed bench``),
  with ``register_end_to_end`` for daemon / Kafka rows.
* ``plots``: map and drift PNGs (``main`` = ``streamembed plot``; needs matplotlib).

Nothing here is imported by the streaming engine; optional packages
(scikit-learn, matplotlib, threadpoolctl) are imported lazily.
"""
