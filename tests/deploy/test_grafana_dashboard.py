"""deploy/grafana/streamembed-overview.json: structure, PromQL that parses, metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import pytest

from .conftest import Scrape
from .helpers import (DASHBOARD, KAFKA_METRICS, RECORDING, SYNTHETIC_SERIES, exported_names, metric_names,
                      promtool_check_exprs, require_module, require_tool, substitute_grafana)

ROWS = ["Overview", "Throughput", "Latency", "Consumer lag", "Kafka health", "Drift", "Model and refits",
        "Process resources"]


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _panels(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])  # a collapsed row keeps its panels inside


def _exprs(d: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target, annotation query and variable query."""
    out = []
    for p in _panels(d):
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r} target {t['refId']}", t["expr"]))
    for a in d["annotations"]["list"]:
        if "expr" in a:
            out.append((f"annotation {a['name']!r}", a["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*\w+\)", q)
            assert m, f"variable {v['name']}: {q}"
            out.append((f"variable {v['name']!r}", m.group(1)))
    return out


def _recorded() -> dict[str, str]:
    yaml = require_module("yaml")
    doc = yaml.safe_load(RECORDING.read_text())
    return {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def test_fixed_uid_and_title(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "streamembed-overview"
    assert dashboard["title"]


def test_datasource_is_a_prometheus_template_variable_used_by_every_query(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    for p in _panels(dashboard):
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]


def test_rows_in_order_and_panels_that_do_not_overlap(dashboard: dict[str, Any]) -> None:
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ROWS
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    cells: dict[tuple[int, int], str] = {}
    for p in _panels(dashboard):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = p["title"]


def test_every_query_parses_as_promql(dashboard: dict[str, Any], tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    exprs = _exprs(dashboard)
    assert len(exprs) >= 40
    res = promtool_check_exprs(promtool, [substitute_grafana(e) for _, e in exprs], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("bad", [
    'sum(rate(streamembed_records_in_total[$__rate_interval])',  # unbalanced
    'rate(streamembed_records_in_total[$interval])',  # a variable where a duration must be
    'sum by (job) streamembed_records_in_total',
])
def test_the_promql_check_rejects_a_broken_query(bad: str, tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    assert promtool_check_exprs(promtool, [substitute_grafana(bad)], tmp_path).returncode != 0


def test_every_metric_a_query_uses_is_exported_or_recorded(dashboard: dict[str, Any], live_scrape: Scrape) -> None:
    exported = exported_names(live_scrape.families) | set(KAFKA_METRICS) | SYNTHETIC_SERIES
    recorded = _recorded()
    unknown = {}
    for where, expr in _exprs(dashboard):
        names = metric_names(substitute_grafana(expr))
        assert names, where
        bad = names - exported - set(recorded)
        if bad:
            unknown[where] = sorted(bad)
    assert not unknown


def test_every_streamembed_metric_is_on_the_dashboard(dashboard: dict[str, Any], live_scrape: Scrape) -> None:
    recorded = _recorded()

    def expand(name: str) -> set[str]:  # a recorded series stands for the metrics its rule reads
        if name not in recorded:
            return {name}
        return set().union(*(expand(n) for n in metric_names(recorded[name])))

    used: set[str] = set()
    for _, expr in _exprs(dashboard):
        for name in metric_names(substitute_grafana(expr)):
            used |= expand(name)
    families = {n for n, f in live_scrape.families.items()
                if n.startswith("streamembed_") and not n.endswith("_created")}
    missing = [n for n in families if not (live_scrape.families[n].sample_names() & used)]
    assert not missing, f"exported but on no panel: {sorted(missing)}"
