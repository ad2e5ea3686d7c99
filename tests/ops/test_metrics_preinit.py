"""Every labelled counter with a known label set is exported at 0 from the start.

A Grafana panel over a series that does not exist yet shows "No data", which
reads like a broken scrape: a fresh daemon must already export each series.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import Counter
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamembed.core.flags import FLAG_NAMES
from streamembed.daemon.app import run_daemon
from streamembed.config import load_config
from streamembed.ops.metrics import (
    EMBED_METHODS,
    MODEL_SKIP_REASONS,
    OUTPUT_FILE_KINDS,
    READ_RETRY_REASONS,
    Metrics,
)
from streamembed.stream.records import REASONS

from ..stream.helpers import fitted_model

#: Labelled counters whose label values depend on the deployment: pre-initialised where they become known.
OPEN_LABEL_SETS = {
    "streamembed_kafka_messages_out": "one series per configured topic, made by daemon.assembly.build_io and "
                                      "open_model_topic (tests/kafka/test_event_time_e2e.py scrapes them)",
}

EXPECTED = {
    "streamembed_flags_total": ("flag", list(FLAG_NAMES.values())),
    "streamembed_output_files_total": ("kind", list(OUTPUT_FILE_KINDS)),
    "streamembed_read_retries_total": ("reason", list(READ_RETRY_REASONS)),
    "streamembed_records_failed_total": ("reason", list(REASONS)),
    "streamembed_records_embedded_total": ("method", list(EMBED_METHODS)),
    "streamembed_refits_total": ("trigger", ["auto", "manual", "remote"]),
    "streamembed_refits_kept_total": ("trigger", ["auto", "manual"]),
    "streamembed_model_records_skipped_total": ("reason", list(MODEL_SKIP_REASONS)),
}


def _scrape(metrics: Metrics) -> dict[str, dict[str, float]]:
    """name -> {label value: sample} of every labelled streamembed counter, parsed from the /metrics text."""
    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for s in fam.samples:
            if fam.type == "counter" and s.name.endswith("_total") and s.labels:
                (value,) = s.labels.values()
                out.setdefault(s.name, {})[value] = s.value
    return out


def test_a_fresh_daemon_exports_every_labelled_counter_series_at_zero(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    fitted_model().save(tmp_path / "model.npz")
    cfg = load_config(None, environ={}, overrides={
        "model.path": str(tmp_path / "model.npz"), "output.root": str(tmp_path / "out"), "metrics.enabled": False,
        "source.kind": "directory",
        "directory.path": str(tmp_path / "in"), "directory.exit_when_idle": True, "drift.enabled": False})
    metrics = Metrics()
    assert run_daemon(cfg, metrics=metrics) == 0  # nothing to read: no event of any kind
    got = _scrape(metrics)
    for name, (_label, values) in EXPECTED.items():
        assert got.get(name) == {v: 0.0 for v in values}, (name, got.get(name))


def test_every_labelled_counter_is_pre_initialised_or_listed_with_the_reason() -> None:
    m = Metrics()
    labelled = {c._name for c in m.registry._collector_to_names
                if isinstance(c, Counter) and c._labelnames}
    got = _scrape(m)
    missing = sorted(n for n in labelled if n + "_total" not in got and n not in OPEN_LABEL_SETS)
    assert not missing, f"labelled counters that are not pre-initialised: {missing}"
    assert set(OPEN_LABEL_SETS) <= labelled
    assert {n + "_total" for n in labelled} - {n + "_total" for n in OPEN_LABEL_SETS} == set(EXPECTED)
