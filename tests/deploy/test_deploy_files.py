"""deploy/{kubernetes,container,systemd}: files that parse, agree with each other and with the daemon."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from streamembed.cli import build_parser
from streamembed.config import ConfigError, env_overrides, load_config

from ..e2e.daemon import Daemon
from .conftest import Scrape
from .helpers import DEPLOY, require_module, run

K8S = DEPLOY / "kubernetes"
CONTAINERFILE = DEPLOY / "container" / "Containerfile"
UNIT = DEPLOY / "systemd" / "streamembed.service"
STATE_DIR = "/var/lib/streamembed"
CONFIG_PATH = "/etc/streamembed/streamembed.toml"


def _yaml() -> Any:
    return require_module("yaml")


def _k8s() -> dict[str, dict[str, Any]]:
    """kind (or kind/name for the Deployments) -> object, over every manifest in deploy/kubernetes."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in _yaml().safe_load_all(path.read_text()):
            key = doc["kind"] if doc["kind"] != "Deployment" else f"Deployment/{doc['metadata']['name']}"
            assert key not in out, f"two {key} objects"
            out[key] = doc
    out["Deployment"] = out["Deployment/streamembed"]
    return out


def _deployments(objs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for k, o in objs.items() if k.startswith("Deployment/")]


def _container(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (c,) = objs["Deployment"]["spec"]["template"]["spec"]["containers"]
    return c


def _configmap_toml(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return tomllib.loads(objs["ConfigMap"]["data"]["streamembed.toml"])


def _quantity(q: str | int) -> float:
    units = {"m": 1e-3, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "k": 1e3, "M": 1e6, "G": 1e9}
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(q))
    assert m, q
    return float(m.group(1)) * units.get(m.group(2), 1.0) if m.group(2) else float(m.group(1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- YAML


def test_every_yaml_file_under_deploy_parses() -> None:
    yaml = _yaml()
    files = sorted(DEPLOY.rglob("*.yml")) + sorted(DEPLOY.rglob("*.yaml"))
    assert len(files) >= 10
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs and all(isinstance(d, dict) for d in docs), path


def test_the_yaml_check_rejects_a_broken_file(tmp_path: Path) -> None:
    with pytest.raises(_yaml().YAMLError):
        _yaml().safe_load("a: [1, 2\nb: c\n")


# ---------------------------------------------------------------- Kubernetes


def test_the_manifests_hold_the_expected_objects_and_kustomize_lists_them() -> None:
    objs = _k8s()
    assert set(objs) == {"ConfigMap", "Deployment", "Deployment/streamembed", "Deployment/streamembed-refitter",
                         "Service", "ServiceMonitor", "PodDisruptionBudget", "Kustomization"}
    for kind, o in objs.items():
        assert o["apiVersion"] and (kind == "Kustomization" or o["metadata"]["name"]), kind
    resources = objs["Kustomization"]["resources"]
    for res in resources:
        assert (K8S / res).is_file(), res
    # everything but the ServiceMonitor, which needs the Prometheus operator's CRDs
    assert sorted(resources) == sorted(p.name for p in K8S.glob("*.yaml")
                                       if p.name not in ("kustomization.yaml", "servicemonitor.yaml"))


def test_one_member_refits_and_its_pod_is_otherwise_the_embedders() -> None:
    objs = _k8s()
    emb, ref = objs["Deployment/streamembed"], objs["Deployment/streamembed-refitter"]
    assert ref["spec"]["replicas"] == 1 and emb["spec"]["replicas"] >= 1
    assert _configmap_toml(objs)["refit"]["auto"] is False

    def env(d: dict[str, Any]) -> dict[str, str]:
        return {e["name"]: e["value"] for e in _container({"Deployment": d})["env"]}

    assert env(ref).pop("STREAMEMBED_REFIT__AUTO") == "true" and "STREAMEMBED_REFIT__AUTO" not in env(emb)
    assert load_config(environ=env(ref)).refit.auto is True

    def normalised(d: dict[str, Any]) -> str:
        t = json.loads(json.dumps(d["spec"]["template"]))
        t["metadata"]["labels"].pop("app.kubernetes.io/component")
        t["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"].pop("app.kubernetes.io/component")
        t["spec"]["containers"][0]["env"] = [e for e in t["spec"]["containers"][0]["env"]
                                             if e["name"] != "STREAMEMBED_REFIT__AUTO"]
        return json.dumps(t, sort_keys=True)

    assert normalised(emb) == normalised(ref), "deployment-refitter.yaml drifted from deployment.yaml"
    # their selectors do not overlap: each Deployment owns its own pods
    assert emb["spec"]["selector"]["matchLabels"] != ref["spec"]["selector"]["matchLabels"]


def test_selectors_and_ports_line_up() -> None:
    objs = _k8s()
    svc, sm, pdb = objs["Service"], objs["ServiceMonitor"], objs["PodDisruptionBudget"]
    for dep in _deployments(objs):
        pod_labels = dep["spec"]["template"]["metadata"]["labels"]
        for selector in (dep["spec"]["selector"]["matchLabels"], svc["spec"]["selector"],
                         pdb["spec"]["selector"]["matchLabels"]):
            assert selector.items() <= pod_labels.items(), dep["metadata"]["name"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    c = _container(objs)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert ports == {"metrics": 9108}
    assert svc_ports["metrics"]["targetPort"] == "metrics" and svc_ports["metrics"]["port"] == 9108
    assert [e["port"] for e in sm["spec"]["endpoints"]] == ["metrics"]
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    # the job label of a ServiceMonitor is the Service's name: the alerts select job="streamembed"
    assert svc["metadata"]["name"] == "streamembed"
    ann = objs["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == "9108"
    assert ann["prometheus.io/path"] == "/metrics"


def test_probes_hit_healthz_and_readyz_on_the_metrics_port() -> None:
    c = _container(_k8s())
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"


def test_the_probe_paths_answer_200_on_a_running_daemon(live_daemon: Daemon) -> None:
    c = _container(_k8s())
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        status, body = live_daemon.get(c[probe]["httpGet"]["path"])
        assert status == 200, (probe, body)
    assert live_daemon.get("/nonexistent")[0] == 404


def test_the_pod_runs_non_root_on_a_read_only_root_with_an_empty_dir_for_state() -> None:
    objs = _k8s()
    spec = objs["Deployment"]["spec"]["template"]["spec"]
    c = _container(objs)
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    state = _configmap_toml(objs)["output"]["root"]
    assert state == STATE_DIR and "emptyDir" in volumes[mounts[state]]
    assert "emptyDir" in volumes[mounts["/tmp"]]
    # every other mount is read-only configuration
    for m in c["volumeMounts"]:
        if "emptyDir" not in volumes[m["name"]]:
            assert m.get("readOnly") is True, m
    assert spec["terminationGracePeriodSeconds"] >= 30


def test_the_container_args_are_accepted_by_the_cli_and_point_at_the_configmap() -> None:
    objs = _k8s()
    c = _container(objs)
    args = build_parser().parse_args(["run", *c["args"]])
    assert args.config == CONFIG_PATH
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert str(Path(args.config).parent) == mounts["config"]
    volumes = {v["name"]: v for v in objs["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == objs["ConfigMap"]["metadata"]["name"]
    assert Path(args.config).name in objs["ConfigMap"]["data"]


def test_resources_have_requests_below_limits(live_scrape: Scrape) -> None:
    res = _container(_k8s())["resources"]
    for what in ("cpu", "memory"):
        assert _quantity(res["requests"][what]) <= _quantity(res["limits"][what]), what
    # the request covers what the daemon really uses (measured figures: deployment.yaml's header)
    rss = live_scrape.families["process_resident_memory_bytes"].samples[0][2]
    assert rss < _quantity(res["requests"]["memory"]), f"RSS {rss / 2**20:.0f} MiB"


def test_the_configmap_holds_a_kafka_mode_config_the_daemon_accepts(tmp_path: Path) -> None:
    objs = _k8s()
    doc = _configmap_toml(objs)
    assert doc["source"]["kind"] == "kafka"
    assert doc["metrics"]["host"] == "0.0.0.0", "probes and Prometheus connect from outside the container"
    assert doc["metrics"]["port"] == _container(objs)["ports"][0]["containerPort"]
    path = tmp_path / "streamembed.toml"
    path.write_text(objs["ConfigMap"]["data"]["streamembed.toml"])
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        pytest.fail(f"deploy/kubernetes/configmap.yaml is refused: {exc}")
    assert cfg.source.kind == "kafka" and cfg.kafka.input_topic and cfg.kafka.model_topic
    assert cfg.output.kafka_topic and cfg.output.parquet is False, "Parquet files would fill the emptyDir"
    mounts = {m["mountPath"] for m in _container(objs)["volumeMounts"]}
    assert str(Path(cfg.model.path).parent) in mounts, "model.path lies on a mounted volume"


# ---------------------------------------------------------------- container


def _instructions() -> list[tuple[str, str]]:
    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln.strip() else "")
            for ln in (x.strip() for x in text.splitlines()) if ln and not ln.startswith("#")]


def _one(instr: list[tuple[str, str]], name: str) -> str:
    found = [a for i, a in instr if i == name]
    assert len(found) == 1, (name, found)
    return found[0]


def test_containerfile_basics() -> None:
    instr = _instructions()
    assert [a.split()[0] for i, a in instr if i == "FROM"] == ["python:3.11-slim", "python:3.11-slim"]
    user = _one(instr, "USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and uid != "0", "a numeric non-root user (runAsNonRoot can check it)"
    assert int(uid) == _k8s()["Deployment"]["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert _one(instr, "EXPOSE") == "9108"
    assert _one(instr, "VOLUME") == f'["{STATE_DIR}"]'
    assert [a for i, a in instr if i == "WORKDIR"][-1] == STATE_DIR
    assert json.loads(_one(instr, "ENTRYPOINT")) == ["streamembed", "run"]
    assert any(i == "RUN" and "pip install" in a and "streamembed" in a for i, a in instr)
    build_parser().parse_args(["run", *json.loads(_one(instr, "CMD"))])


def test_containerfile_environment_is_valid_daemon_configuration() -> None:
    env_line = _one(_instructions(), "ENV")
    env = dict(tok.split("=", 1) for tok in shlex.split(env_line))
    assert env["STREAMEMBED_METRICS__HOST"] == "0.0.0.0"
    assert {k for k, _ in env_overrides(env)} >= {"metrics.host", "metrics.port"}
    cfg = load_config(environ=env)
    assert cfg.metrics.port == 9108


def _healthcheck_cmd() -> list[str]:
    hc = _one(_instructions(), "HEALTHCHECK")
    cmd = json.loads(hc[hc.index("CMD") + 3:].strip())
    assert cmd[0] == "python" and "urllib" in cmd[-1] and "/healthz" in cmd[-1]
    return [sys.executable, *cmd[1:]]


def test_the_healthcheck_passes_on_a_healthy_daemon(live_daemon: Daemon) -> None:
    env = {**os.environ, "STREAMEMBED_METRICS__PORT": str(live_daemon.port)}
    res = subprocess.run(_healthcheck_cmd(), env=env, capture_output=True, text=True, timeout=10)
    assert res.returncode == 0, res.stderr


def test_the_healthcheck_fails_when_nothing_answers() -> None:
    env = {**os.environ, "STREAMEMBED_METRICS__PORT": str(_free_port())}
    res = subprocess.run(_healthcheck_cmd(), env=env, capture_output=True, text=True, timeout=10)
    assert res.returncode != 0


# ---------------------------------------------------------------- systemd


def _unit() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ln in UNIT.read_text().splitlines():
        ln = ln.strip()
        if ln and not ln.startswith(("#", "[")):
            k, _, v = ln.partition("=")
            out.setdefault(k, []).append(v)
    return out


def test_unit_runs_the_daemon_with_the_config_and_restarts_with_backoff() -> None:
    u = _unit()
    assert u["Type"] == ["simple"]
    exec_start = shlex.split(u["ExecStart"][0])
    assert Path(exec_start[0]).name == "streamembed"
    args = build_parser().parse_args(exec_start[1:])
    assert args.command == "run" and args.config == CONFIG_PATH
    assert u["Restart"] == ["on-failure"] and u["RestartPreventExitStatus"] == ["2"]
    assert "RestartSec" in u and "RestartSteps" in u and "RestartMaxDelaySec" in u
    assert u["KillSignal"] == ["SIGTERM"] and "TimeoutStopSec" in u


def test_unit_is_hardened() -> None:
    u = _unit()
    expected = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes", "ProtectHome": "yes",
                "DynamicUser": "yes", "PrivateDevices": "yes", "RestrictSUIDSGID": "yes",
                "WorkingDirectory": STATE_DIR, "ReadWritePaths": STATE_DIR, "StateDirectory": "streamembed"}
    assert {k: u.get(k, [None])[-1] for k in expected} == expected
    assert u["CapabilityBoundingSet"] == [""]


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (package systemd)")
    exe = shutil.which("streamembed")
    assert exe, "the streamembed entry point is installed (pip install -e .)"
    unit = tmp_path / "streamembed.service"
    unit.write_text(UNIT.read_text().replace("/opt/streamembed/bin/streamembed", exe))
    res = run([analyze, "verify", str(unit)], timeout=60)
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if str(unit) in ln]
    # systemd < 254 does not know the backoff keys and ignores them
    unexpected = [ln for ln in lines if not re.search(r"Unknown key '(RestartSteps|RestartMaxDelaySec)'", ln)]
    assert res.returncode == 0 and not unexpected, res.stdout + res.stderr
