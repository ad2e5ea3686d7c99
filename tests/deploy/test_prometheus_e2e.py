"""A real Prometheus (Debian's package) scrapes a real daemon with the shipped config and rules.

Prometheus listens on 127.0.0.1 on a free port, scrapes every second and
evaluates the shipped recording and alerting rules every second; the daemon
runs its embedded default with drift monitoring on. The test polls the HTTP
API until the throughput and drift series are there and every rule has been
evaluated without error, within about a minute.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

import pytest

from tools.process import stop_process

from ..e2e.daemon import Daemon
from .helpers import ALERTS, PROMETHEUS_YML, RECORDING, require_module, require_tool

pytestmark = pytest.mark.e2e

DEADLINE_SECONDS = 60.0
#: A rule that fails at every evaluation (two right-hand series for one match
#: group), loaded beside the shipped ones: proves that rule errors are seen.
CANARY_GROUP = "canary-must-fail"
CANARY_EXPR = ('up * on () group_left () (label_replace(up, "copy", "a", "", "") '
               'or label_replace(up, "copy", "b", "", ""))')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(self, binary: str, config: Path, workdir: Path) -> None:
        self.port = _free_port()
        self.log_path = workdir / "prometheus.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - the child's log stays open for its lifetime
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=info"],
            cwd=workdir, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read().decode()) if path.startswith("/api/") else r.status

    def query(self, expr: str) -> list[dict[str, Any]]:
        doc = self.get("/api/v1/query", query=expr)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()


def _config(daemon_port: int, workdir: Path) -> Path:
    """The shipped prometheus.yml, scraping and evaluating every second, aimed at the daemon."""
    yaml = require_module("yaml")
    cfg = yaml.safe_load(PROMETHEUS_YML.read_text())
    cfg["global"].update(scrape_interval="1s", evaluation_interval="1s")
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "streamembed"]
    job.update(scrape_interval="1s", scrape_timeout="1s", static_configs=[{"targets": [f"127.0.0.1:{daemon_port}"]}])
    canary = workdir / "canary.yml"
    canary.write_text(json.dumps({"groups": [{"name": CANARY_GROUP, "rules": [
        {"record": "canary:up:duplicate_match", "expr": CANARY_EXPR}]}]}))
    cfg["rule_files"] = [str(RECORDING), str(ALERTS), str(canary)]
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture()
def stack(live_daemon: Daemon, tmp_path: Path) -> Iterator[tuple[Daemon, Prometheus]]:
    """Prometheus scraping the package's running daemon (conftest.live_daemon)."""
    binary = require_tool("prometheus")
    assert live_daemon.port is not None
    prom = Prometheus(binary, _config(live_daemon.port, tmp_path), tmp_path)
    try:
        yield live_daemon, prom
    finally:
        prom.stop()


def _rules_report(prom: Prometheus) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """(rules not evaluated yet, (rule, error) of the rules in error, alerts not inactive)."""
    groups = prom.get("/api/v1/rules")["data"]["groups"]
    pending, errors, active = [], [], []
    for g in groups:
        for r in g["rules"]:
            if r.get("lastError") or r["health"] == "err":
                errors.append((f"{g['name']}/{r['name']}", str(r.get("lastError"))))
            elif r["health"] != "ok":
                pending.append(f"{g['name']}/{r['name']}")
            if r["type"] == "alerting" and r.get("state") != "inactive":
                active.append(f"{r['name']}: {r.get('state')}")
    return pending, errors, active


@pytest.mark.slow
def test_prometheus_scrapes_the_daemon_and_evaluates_every_rule(stack: tuple[Daemon, Prometheus]) -> None:
    daemon, prom = stack
    end = time.monotonic() + DEADLINE_SECONDS

    def first(expr: str) -> float | None:
        res = prom.query(expr)
        return float(res[0]["value"][1]) if res else None

    checks: dict[str, Callable[[], bool]] = {
        "target up": lambda: first('up{job="streamembed"}') == 1.0,
        "throughput rate": lambda: (first('sum(rate(streamembed_records_embedded_total{job="streamembed"}[10s]))')
                                    or 0) > 0,
        "throughput recording rule": lambda: (first("job:streamembed_records_embedded:rate5m") or 0) > 0,
        "latency quantiles": lambda: len(prom.query("job:streamembed_end_to_end_latency_seconds:histogram_quantile5m"
                                                    " >= 0")) == 3,
        "drift window": lambda: (first("streamembed_drift_window_objects") or 0) > 0,
        "drift mean": lambda: 0 < (first("streamembed_drift_relative_unexplained_mean") or 0) < 1,
        "refit trigger level known": lambda: math.isfinite(first("streamembed_refit_trigger_level") or math.nan),
        "drift quantiles recorded": lambda: len(prom.query("job:streamembed_relative_unexplained:histogram_quantile5m"
                                                           " >= 0")) == 3,
    }
    done: set[str] = set()
    report: tuple[list[str], list[tuple[str, str]], list[str]] = (["(not asked yet)"], [], [])
    while time.monotonic() < end:
        assert prom.proc.poll() is None, f"prometheus exited ({prom.proc.returncode}):\n{prom.log()}"
        assert not daemon.dead(), f"daemon exited ({daemon.proc.returncode}):\n{daemon.log()}"
        try:
            if prom.get("/-/ready") == 200:
                done |= {name for name, check in checks.items() if name not in done and check()}
                report = _rules_report(prom)
                if done == set(checks) and not report[0] and report[1]:
                    break
        except (urllib.error.URLError, ConnectionError):
            pass  # not listening yet
        time.sleep(0.5)
    missing = sorted(set(checks) - done)
    assert not missing, f"not seen within {DEADLINE_SECONDS} s: {missing}\n--- prometheus ---\n{prom.log()}"
    pending, errors, active = report
    # the shipped rules evaluate cleanly; the canary's error is reported
    assert [rule for rule, _ in errors] == [f"{CANARY_GROUP}/canary:up:duplicate_match"], errors
    assert not pending, f"rules never evaluated: {pending}"
    # a healthy daemon on stationary data puts no alert even into pending
    assert not active, active
