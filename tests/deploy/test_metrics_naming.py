"""The daemon's /metrics follows Prometheus naming practice (STYLE.md, prometheus.io/docs/practices/naming).

A real daemon (embedded default, bounded run) is scraped once per session
(conftest.live_scrape); `promtool check metrics` lints the scrape, and the
rules promtool does not know are asserted here.
"""

from __future__ import annotations

from itertools import pairwise

import math
import re

import pytest

from streamembed.core.flags import FLAG_NAMES
from streamembed.core.place.methods import PLACEMENT_METHODS
from streamembed.stream.records import REASONS

from .conftest import Scrape
from .helpers import KAFKA_METRICS, Family, parse_exposition, require_tool, run

#: Families the client library adds (process and platform collectors).
CLIENT_PREFIXES = ("process_", "python_")
#: Dimensionless quotients named *_ratio that may legitimately exceed 1 (the
#: other *_ratio metrics are shares in [0, 1]).
QUOTIENTS_ABOVE_ONE = {
    "streamembed_drift_gap_ratio": "||k0||_2 / eigengap; 1 and above is the alarm level",
}
#: Label names that would carry unbounded values (object ids, offsets, paths, messages).
UNBOUNDED_LABELS = {"id", "object_id", "record_id", "key", "offset", "uuid", "path", "file", "filename",
                    "error", "message", "exception", "timestamp", "event_time"}
#: Known closed sets of label values, from the code that defines them.
CLOSED_LABEL_VALUES = {
    ("streamembed_records_failed_total", "reason"): set(REASONS),
    ("streamembed_flags_total", "flag"): set(FLAG_NAMES.values()),
    ("streamembed_refits_total", "trigger"): {"auto", "manual", "remote"},
    # every placement method the registry holds, the block solver included
    ("streamembed_records_embedded_total", "method"): {m.name for m in PLACEMENT_METHODS},
    ("streamembed_output_files_total", "kind"): {"output", "dead_letter"},
}
MAX_SERIES_PER_FAMILY = 64
#: Hash-like label values that are bounded: the info metric has one series, naming the map in use.
HASH_LABELS_ALLOWED = {("streamembed_model_info", "lineage")}
UNIT_WORDS_FORBIDDEN = re.compile(r"(^|_)(ms|millis|milliseconds|us|microseconds|ns|nanoseconds|minutes|hours|days|"
                                  r"percent|percentage|kb|mb|gb|kib|mib|kilobytes|megabytes|count)(_|$)")
TIME_WORDS = re.compile(r"(^|_)(duration|latency|time|timestamp|age|elapsed|seconds)(_|$)")


def _own(fams: dict[str, Family]) -> dict[str, Family]:
    """The daemon's families, without the client's *_created companions and collectors."""
    return {n: f for n, f in fams.items() if not n.startswith(CLIENT_PREFIXES) and not _is_created(n, fams)}


def _is_created(name: str, fams: dict[str, Family]) -> bool:
    """prometheus-client's creation-time gauge of a counter or histogram (X_created for X_total / X)."""
    if not name.endswith("_created") or fams[name].type != "gauge":
        return False
    base = name[: -len("_created")]
    return (base + "_total") in fams and fams[base + "_total"].type == "counter" or \
        base in fams and fams[base].type in ("histogram", "summary")


def naming_problems(name: str, typ: str) -> list[str]:
    """Violations of the naming rules by a metric family's name and type alone."""
    p = []
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        p.append("not snake_case (colons are for recording rules)")
    if not name.startswith("streamembed_"):
        p.append("no streamembed_ prefix")
    if typ == "counter" and not name.endswith("_total"):
        p.append("counter without _total")
    if typ != "counter" and name.endswith("_total"):
        p.append(f"{typ} ending in _total")
    if typ in ("summary", "untyped", "unknown"):
        p.append(f"type {typ} (use a histogram, counter or gauge)")
    if UNIT_WORDS_FORBIDDEN.search(name):
        p.append("non-base unit or vague unit word (use seconds, bytes, ratio; counters end in _total)")
    if TIME_WORDS.search(name) and not re.search(r"_seconds(_total)?$", name):
        p.append("a time quantity not ending in _seconds")
    if "timestamp" in name and not name.endswith("_timestamp_seconds"):
        p.append("a timestamp not named *_timestamp_seconds")
    if name.endswith("_info") and typ != "gauge":
        p.append("an _info metric that is not a gauge")
    return p


# ---------------------------------------------------------------- the rules themselves


@pytest.mark.parametrize("name,typ,bad", [
    ("streamembed_records_total", "counter", False),
    ("streamembed_records", "counter", True),
    ("streamembed_lag_total", "gauge", True),
    ("streamembed_batch_ms", "histogram", True),
    ("streamembed_batch_duration", "histogram", True),
    ("streamembed_batch_duration_seconds", "histogram", False),
    ("streamembed_last_refit_timestamp", "gauge", True),
    ("streamembed_last_refit_timestamp_ms", "gauge", True),
    ("streamembed_latency_seconds", "summary", True),
    ("streamembedRecords_total", "counter", True),
    ("records_total", "counter", True),
    ("streamembed_error_percent", "gauge", True),
])
def test_naming_rules_reject_what_they_should(name: str, typ: str, bad: bool) -> None:
    assert bool(naming_problems(name, typ)) is bad, naming_problems(name, typ)


def test_the_exposition_parser_groups_histogram_samples() -> None:
    fams = parse_exposition('# HELP a_seconds x\n# TYPE a_seconds histogram\na_seconds_bucket{le="1"} 2\n'
                            'a_seconds_bucket{le="+Inf"} 3\na_seconds_count 3\na_seconds_sum 1.5\n')
    assert list(fams) == ["a_seconds"] and len(fams["a_seconds"].samples) == 4


# ---------------------------------------------------------------- the live scrape


#: promtool lint findings accepted (none).
KNOWN_LINT: set[str] = set()


def test_promtool_check_metrics_passes_on_a_live_scrape(live_scrape: Scrape) -> None:
    promtool = require_tool("promtool")
    res = run([promtool, "check", "metrics"], stdin=live_scrape.text)
    findings = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    assert all(ln in KNOWN_LINT for ln in findings), "\n".join(findings)
    assert res.returncode == (3 if findings else 0), res.stdout + res.stderr


def test_only_summaries_use_the_quantile_label(live_scrape: Scrape) -> None:
    bad = [n for n, f in live_scrape.families.items() if f.type != "summary"
           and any("quantile" in lab for _, lab, _ in f.samples)]
    assert not bad


def test_promtool_check_metrics_catches_a_misnamed_counter() -> None:
    promtool = require_tool("promtool")
    bad = "# HELP streamembed_records counted things\n# TYPE streamembed_records counter\nstreamembed_records 1\n"
    res = run([promtool, "check", "metrics"], stdin=bad)
    assert res.returncode != 0 and "_total" in res.stdout + res.stderr


def test_every_family_has_help_and_a_type(live_scrape: Scrape) -> None:
    missing = [n for n, f in live_scrape.families.items() if not f.help or f.type == "untyped"]
    assert not missing


def test_every_daemon_metric_is_named_by_the_rules(live_scrape: Scrape) -> None:
    own = _own(live_scrape.families)
    assert len(own) >= 20, sorted(own)
    problems = {n: naming_problems(n, f.type) for n, f in own.items()}
    assert not {n: p for n, p in problems.items() if p}


def test_the_kafka_metrics_are_named_by_the_rules_and_exported_with_their_types(live_scrape: Scrape) -> None:
    problems = {n: naming_problems(n, t) for n, t in KAFKA_METRICS.items()}
    assert not {n: p for n, p in problems.items() if p}
    exported = {n: f.type for n, f in live_scrape.families.items() if n.startswith("streamembed_kafka_")
                and not n.endswith("_created")}
    # registered in every mode today; were they registered in Kafka mode only, none would show here
    assert exported.items() <= KAFKA_METRICS.items(), "a Kafka metric missing from KAFKA_METRICS, or a type changed"


def test_histograms_not_summaries_with_well_formed_buckets(live_scrape: Scrape) -> None:
    fams = live_scrape.families
    assert not [n for n, f in fams.items() if f.type == "summary"]
    hists = [f for f in _own(fams).values() if f.type == "histogram"]
    assert {"streamembed_batch_processing_seconds", "streamembed_end_to_end_latency_seconds"} <= {f.name for f in hists}
    for f in hists:
        buckets = [(float(lab["le"]), v) for n, lab, v in f.samples if n.endswith("_bucket")]
        count = [v for n, _, v in f.samples if n.endswith("_count")]
        assert buckets and buckets[-1][0] == math.inf, f.name
        assert [b for b, _ in buckets] == sorted(b for b, _ in buckets), f.name
        assert all(a[1] <= b[1] for a, b in pairwise(buckets)), f"{f.name}: buckets not cumulative"
        assert count == [buckets[-1][1]], f.name


def test_histograms_that_matter_saw_observations(live_scrape: Scrape) -> None:
    # the scrape is taken after the first checkpoint: a zero here means the metric is not fed
    for name in ("streamembed_batch_processing_seconds", "streamembed_end_to_end_latency_seconds",
                 "streamembed_relative_unexplained"):
        count = [v for n, _, v in live_scrape.families[name].samples if n == name + "_count"]
        assert count and count[0] > 0, name


def test_labels_are_bounded_and_never_object_ids(live_scrape: Scrape) -> None:
    for name, f in _own(live_scrape.families).items():
        label_sets = {tuple(sorted((k, v) for k, v in lab.items() if k != "le")) for _, lab, _ in f.samples}
        assert len(label_sets) <= MAX_SERIES_PER_FAMILY, f"{name}: {len(label_sets)} series"
        for labels in label_sets:
            for k, v in labels:
                assert k not in UNBOUNDED_LABELS, f"{name}: label {k}"
                if (name, k) in HASH_LABELS_ALLOWED:
                    assert len(label_sets) == 1, f"{name}: one series expected"
                    continue
                assert not re.search(r"[0-9a-f]{12,}|\d{6,}|gen-\d+-\d+", v), f"{name}{{{k}={v!r}}}: id-like value"
                closed = CLOSED_LABEL_VALUES.get((name, k))
                if closed is not None:
                    assert v in closed, f"{name}{{{k}={v!r}}} outside {sorted(closed)}"


def test_ratios_lie_between_0_and_1(live_scrape: Scrape) -> None:
    ratios = {n: f for n, f in _own(live_scrape.families).items()
              if n.endswith("_ratio") and n not in QUOTIENTS_ABOVE_ONE}
    assert "streamembed_drift_negative_k0_ratio" in ratios
    for name, f in ratios.items():
        for _, _, v in f.samples:
            assert math.isnan(v) or 0.0 <= v <= 1.0, f"{name} = {v}"
    # the per-record ratio histogram's buckets stop at 1
    le = [float(lab["le"]) for n, lab, _ in live_scrape.families["streamembed_relative_unexplained"].samples
          if n.endswith("_bucket")]
    assert max(b for b in le if b != math.inf) == 1.0


def test_info_metrics_have_value_1_and_timestamps_are_plausible(live_scrape: Scrape) -> None:
    fams = _own(live_scrape.families)
    info = fams["streamembed_model_info"].samples
    assert info and all(v == 1.0 for _, _, v in info)
    last = fams["streamembed_last_batch_timestamp_seconds"].samples[0][2]
    assert 1.6e9 < last < 4.1e9, "a Unix time in seconds, not milliseconds"


def test_process_metrics_are_exported(live_scrape: Scrape) -> None:
    fams = live_scrape.families
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                 "process_start_time_seconds", "process_max_fds"):
        assert name in fams and fams[name].samples, name
    rss = fams["process_resident_memory_bytes"].samples[0][2]
    assert 20e6 < rss < 4e9, rss
