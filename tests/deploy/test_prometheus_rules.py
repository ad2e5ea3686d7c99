"""deploy/prometheus: the scrape config, recording and alerting rules, and their promtool unit tests."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from streamembed.config import Config

from .conftest import Scrape
from .helpers import (ALERTS, KAFKA_METRICS, PROMETHEUS_DIR, PROMETHEUS_YML, RECORDING, RULE_TESTS, SYNTHETIC_SERIES,
                      exported_names, metric_names, require_module, require_tool, run)

SEVERITIES = {"critical", "warning"}


def _yaml() -> Any:
    return require_module("yaml")


def _load(path: Path) -> Any:
    return _yaml().safe_load(path.read_text())


def _rules(path: Path) -> list[dict[str, Any]]:
    return [r for g in _load(path)["groups"] for r in g["rules"]]


def _alerts() -> list[dict[str, Any]]:
    return [r for r in _rules(ALERTS) if "alert" in r]


def _alert_cases() -> list[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """(file, test, alert_rule_test entry) for every alert case of every unit-test file."""
    out = []
    for path in RULE_TESTS:
        for test in _load(path).get("tests", []):
            for case in test.get("alert_rule_test", []):
                out.append((path, test, case))
    return out


# ---------------------------------------------------------------- promtool


def test_promtool_checks_the_scrape_config_and_its_rule_files() -> None:
    promtool = require_tool("promtool")
    res = run([promtool, "check", "config", str(PROMETHEUS_YML)])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 rule files found" in res.stdout + res.stderr


def test_promtool_checks_the_rules() -> None:
    promtool = require_tool("promtool")
    res = run([promtool, "check", "rules", str(RECORDING), str(ALERTS)])
    assert res.returncode == 0, res.stdout + res.stderr


def test_promtool_unit_tests_pass() -> None:
    promtool = require_tool("promtool")
    assert len(RULE_TESTS) >= 3
    res = run([promtool, "test", "rules", *[str(p.relative_to(PROMETHEUS_DIR)) for p in RULE_TESTS]],
              cwd=PROMETHEUS_DIR, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(RULE_TESTS), res.stdout


# ---------------------------------------------------------------- the rules' shape


def test_the_scrape_config_targets_the_default_metrics_port() -> None:
    cfg = _load(PROMETHEUS_YML)
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "streamembed"]
    targets = [t for sc in job["static_configs"] for t in sc["targets"]]
    defaults = Config().metrics
    assert targets == [f"{defaults.host}:{defaults.port}"]
    assert sorted(cfg["rule_files"]) == ["alerts.yml", "recording.yml"]


def test_every_alert_has_a_severity_a_summary_and_a_description() -> None:
    alerts = _alerts()
    assert len(alerts) >= 10
    for a in alerts:
        assert re.fullmatch(r"Streamembed[A-Z][A-Za-z0-9]+", a["alert"]), a["alert"]
        assert a.get("labels", {}).get("severity") in SEVERITIES, a["alert"]
        ann = a.get("annotations", {})
        assert ann.get("summary") and ann.get("description"), a["alert"]
    assert len({a["alert"] for a in alerts}) == len(alerts), "duplicate alert names"


def test_the_alerts_the_operators_guide_promises_exist() -> None:
    names = {a["alert"] for a in _alerts()}
    assert {"StreamembedDown", "StreamembedNoProgressWhileLagGrows", "StreamembedConsumerLagHigh",
            "StreamembedDeadLetterRatioHigh", "StreamembedLatencyP99High", "StreamembedDriftGapRatioHigh",
            "StreamembedDriftAboveTrigger", "StreamembedRefitFailing", "StreamembedRefitStale",
            "StreamembedRebalanceStorm"} <= names
    readme = (PROMETHEUS_DIR.parent / "README.md").read_text()
    assert not [n for n in names if n not in readme], "every alert is explained in deploy/README.md"


def test_recorded_names_follow_level_metric_operations() -> None:
    for r in _rules(RECORDING):
        assert "record" in r
        assert re.fullmatch(r"[a-z_]+:streamembed_[a-z0-9_]+:[a-z0-9_]+", r["record"]), r["record"]


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for _, _, case in _alert_cases():
        (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert not names - fires, f"no firing case: {sorted(names - fires)}"
    assert not names - quiet, f"no quiet case: {sorted(names - quiet)}"
    assert not (fires | quiet) - names, "cases for alerts that do not exist"


def _mutated_run(tmp_path: Path, mutate: str, keep_firing: bool) -> tuple[set[str], str]:
    """Replace every alert's expression, run only the firing (or only the quiet) cases.

    Returns the alert names with a failing case, and promtool's output.
    """
    promtool = require_tool("promtool")
    yaml = _yaml()
    doc = _load(ALERTS)
    for g in doc["groups"]:
        for r in g["rules"]:
            r["expr"] = mutate
            r.pop("for", None)
    alerts = tmp_path / "alerts.yml"
    alerts.write_text(yaml.safe_dump(doc))
    files = []
    for path in RULE_TESTS:
        t = _load(path)
        tests = []
        for test in t.get("tests", []):
            cases = [c for c in test.get("alert_rule_test", []) if bool(c.get("exp_alerts")) is keep_firing]
            if cases:
                test = copy.deepcopy(test)
                test["alert_rule_test"] = cases
                test.pop("promql_expr_test", None)
                tests.append(test)
        if tests:
            out = tmp_path / path.name
            out.write_text(yaml.safe_dump({**t, "rule_files": [str(alerts)], "tests": tests}))
            files.append(str(out))
    res = run([promtool, "test", "rules", *files], timeout=120)
    failed = set(re.findall(r"alertname: (\w+)", res.stdout + res.stderr))
    return failed, res.stdout + res.stderr


def test_each_firing_case_fails_when_its_alert_never_fires(tmp_path: Path) -> None:
    failed, out = _mutated_run(tmp_path, "vector(1) < 0", keep_firing=True)
    missing = {a["alert"] for a in _alerts()} - failed
    assert not missing, f"firing cases that pass although the alert cannot fire: {sorted(missing)}\n{out}"


def test_each_quiet_case_fails_when_its_alert_always_fires(tmp_path: Path) -> None:
    failed, out = _mutated_run(tmp_path, "vector(1)", keep_firing=False)
    missing = {a["alert"] for a in _alerts()} - failed
    assert not missing, f"quiet cases that pass although the alert always fires: {sorted(missing)}\n{out}"


# ---------------------------------------------------------------- against the daemon


def test_rules_only_use_metrics_the_daemon_exports(live_scrape: Scrape) -> None:
    known = exported_names(live_scrape.families) | set(KAFKA_METRICS) | SYNTHETIC_SERIES
    recorded = {r["record"] for r in _rules(RECORDING)}
    unknown = {}
    for path in (RECORDING, ALERTS):
        for r in _rules(path):
            names = metric_names(r["expr"])
            assert names, r
            bad = names - known - recorded
            if bad:
                unknown[r.get("record") or r.get("alert")] = sorted(bad)
    assert not unknown


@pytest.mark.parametrize("expr,names", [
    ('sum by (job) (rate(foo_total{a="b", c=~"x|y"}[5m])) / on (job) group_left bar_seconds',
     {"foo_total", "bar_seconds"}),
    ('histogram_quantile(0.99, sum by (le) (rate(h_bucket{job=~"$job"}[$__rate_interval])))', {"h_bucket"}),
    ('up{job="streamembed"} == 0 unless absent(x:y:rate5m)', {"up", "x:y:rate5m"}),
    ('{__name__="only_by_name"} offset 5m and bool 1e3', {"only_by_name"}),
])
def test_metric_names_are_extracted_from_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names
