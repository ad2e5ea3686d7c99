"""The operations surface of the daemon: what an operator sees of it, below ``daemon/`` and above ``stream/``.

``server`` (the HTTP server that keeps the probes answering under slow
clients), ``endpoints`` (``/metrics``, ``/healthz``, ``/readyz``, ``/map``,
``/map.json``), ``health`` (the probes' state), ``metrics`` (the Prometheus
metrics) and ``no_metrics`` (the same names doing nothing, when the metrics
are off), ``map_view`` and ``map_page`` (the live map), ``history`` (the
refit history file), ``logs`` (log lines, text or JSON). Nothing here imports
``daemon/``; this ``__init__`` imports nothing, so that a daemon without the
ops server pays for none of it (docs/architecture.md).
"""
