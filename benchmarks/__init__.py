"""Benchmarks and quality evaluation of streamembed: a source-checkout package, not installed with the wheel.

Run from the repository root (``python -m`` puts it first on ``sys.path``):

    python -m benchmarks bench [--quick]          # throughput against the memory-read ceiling, end-to-end rows
    python -m benchmarks evaluate [--datasets …]  # placement quality of every method on the benchmark datasets
    python -m benchmarks drift [--drift-quick]    # drift detectors and refit selection on streams with a change
    python -m benchmarks.<script> …               # one study (compare_outputs, bench_file_ceiling, …)

Shared modules, one idea each:

* ``timing``: best-of timing and the synthetic problems of the throughput tables.
* ``references``: full classical-MDS refits used as references for placements.
* ``datasets``: offline real datasets (scikit-learn's bundled ones, stdlib docstrings, words, identifiers) and seeded
  synthetic ones; ``editdistance``: vectorised Levenshtein distances for the string datasets.
* ``mixups``: maps fitted with a known mistake (wrong landmarks, wrong option), for the consistency monitor.
* ``bench`` (+ ``bench_block``, ``bench_e2e``), ``evaluate``, ``drift_bench``: the three entry points above.

The quality measures are the product's (``streamembed.quality``); the plots are ``streamembed.plots``.
Optional packages (scikit-learn, river, matplotlib) are imported lazily: ``pip install -e '.[eval]'``.
"""
