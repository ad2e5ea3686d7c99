"""Shared by the deploy tests: tools, the shipped files, exposition and PromQL parsing."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
ALERTS = PROMETHEUS_DIR / "alerts.yml"
RECORDING = PROMETHEUS_DIR / "recording.yml"
PROMETHEUS_YML = PROMETHEUS_DIR / "prometheus.yml"
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
DASHBOARD = DEPLOY / "grafana" / "streamembed-overview.json"

#: The Kafka metrics (streamembed/kafka/), with their types. A scrape of a
#: daemon without Kafka need not show them (today they are registered in every
#: mode, at zero, but the labelled ones have no sample until used), and the
#: metrics module has no list of them to import: an explicit allow-list, checked
#: against the scrape by test_metrics_naming. Keep in step with the Kafka code.
KAFKA_METRICS: dict[str, str] = {
    "streamembed_kafka_consumer_lag": "gauge",  # {topic, partition}, messages
    "streamembed_kafka_group_lag": "gauge",  # {topic, partition}, messages, every partition of the topic
    "streamembed_kafka_partition_owned": "gauge",  # {topic, partition}, 1 owned by this member, 0 not
    "streamembed_kafka_messages_in_total": "counter",
    "streamembed_kafka_bytes_in_total": "counter",
    "streamembed_kafka_messages_out_total": "counter",  # {topic}
    "streamembed_kafka_produce_errors_total": "counter",
    "streamembed_kafka_retries_total": "counter",
    "streamembed_kafka_rebalances_total": "counter",
    "streamembed_kafka_assigned_partitions": "gauge",
    "streamembed_kafka_paused_partitions": "gauge",
    "streamembed_kafka_commits_total": "counter",
}

#: Series Prometheus itself makes for every target.
SYNTHETIC_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "ALERTS", "ALERTS_FOR_STATE"}


def require_tool(name: str) -> str:
    """The path of a command-line tool; skip without it, but fail when CI is set."""
    path = shutil.which(name)
    if path:
        return path
    msg = f"{name} not found on PATH (Debian package 'prometheus'; .ci/install.sh installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {msg}", pytrace=False)
    pytest.skip(msg)


def require_module(name: str) -> ModuleType:
    """Import a test dependency; skip without it, but fail when CI is set."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        msg = f"python module {name!r} is missing ({exc}); pip install it (test dependency)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {msg}", pytrace=False)
        pytest.skip(msg)


def run(cmd: list[str], *, stdin: str | None = None, timeout: float = 60.0,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, cwd=cwd)


# ---------------------------------------------------------------- exposition format

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def sample_names(self) -> set[str]:
        """Names the family's samples can have, whether or not it has any yet."""
        if self.type == "histogram":
            return {f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count"}
        if self.type == "summary":
            return {self.name, f"{self.name}_sum", f"{self.name}_count"}
        return {self.name}


def parse_exposition(text: str) -> dict[str, Family]:
    """Families of a Prometheus text-format scrape (0.0.4), by the name in their TYPE line."""
    fams: dict[str, Family] = {}
    current: Family | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# HELP "):
            name, _, doc = line[7:].partition(" ")
            current = fams.setdefault(name, Family(name))
            current.help = doc
        elif line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            current = fams.setdefault(name, Family(name))
            current.type = typ.strip()
        elif line.startswith("#"):
            continue
        else:
            m = _SAMPLE.match(line)
            assert m, f"unparsable sample line: {line!r}"
            name, labels, value = m.group(1), dict(_LABEL.findall(m.group(3) or "")), float(m.group(4))
            owner = current if current is not None and name in current.sample_names() else None
            if owner is None:
                owner = fams.setdefault(name, Family(name))
            owner.samples.append((name, labels, value))
    return fams


def exported_names(fams: dict[str, Family]) -> set[str]:
    """Every series name a scrape with these families can produce."""
    out: set[str] = set()
    for f in fams.values():
        out |= f.sample_names()
    return out


# ---------------------------------------------------------------- PromQL

_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
             "offset", "inf", "nan", "atan2"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![A-Za-z0-9_:.])([A-Za-z_:][A-Za-z0-9_:]*)")
GRAFANA_MACROS = {
    "$__rate_interval": "5m", "${__rate_interval}": "5m",
    "$__interval": "1m", "${__interval}": "1m",
    "$__range": "1h", "${__range}": "1h",
}


def substitute_grafana(expr: str) -> str:
    """Replace Grafana's interval macros by durations so the query is plain PromQL.

    Template variables inside label matchers ("$job") are left alone: they are
    string literals to the parser. One left anywhere else makes the query fail to parse.
    """
    for macro, value in GRAFANA_MACROS.items():
        expr = expr.replace(macro, value)
    return expr


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (functions, keywords and labels excluded)."""
    s = _STRING.sub('""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # range and subquery durations
    s = _GROUPING.sub(" ", s)
    names = set()
    for m in _IDENT.finditer(s):
        tok = m.group(1)
        if tok.lower() in _KEYWORDS:
            continue
        if re.match(r"\s*\(", s[m.end():]):  # a function or aggregation
            continue
        names.add(tok)
    # a selector that starts with a matcher block has its name as __name__
    names |= set(re.findall(r'__name__\s*=\s*"([^"]+)"', expr))
    return names


def promtool_check_exprs(promtool: str, exprs: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    """Parse each expression with Prometheus's own parser: as recording rules run through `promtool check rules`."""
    import json

    rules = [{"record": f"check:expr_{i}:value", "expr": e} for i, e in enumerate(exprs)]
    path = tmp / "exprs.rules.yml"
    # JSON is YAML: no YAML library needed to write it
    path.write_text(json.dumps({"groups": [{"name": "dashboard-exprs", "rules": rules}]}, indent=1))
    return run([promtool, "check", "rules", str(path)])
