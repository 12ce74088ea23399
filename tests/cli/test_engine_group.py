"""``dragoman worker --engines N --gpus ...``: what each engine's worker process is told."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from cli.engine_group import child_ops_host, child_specs, gpu_groups
from cli.main import build_parser
from cli.worker import engine_options
from contract.services import ServiceUrls
from contract.settings import Settings
from worker.engine import EngineOptions
from worker.supervisor import ChildSpec, OpsAddress

URLS = ServiceUrls("redis://cache:6379/0", "postgresql://app@db/dragoman")
PORTS = Path("/run/group-ports")


def _specs(
    argv: list[str], settings: Settings, groups: list[list[str]], engines: int, environ: dict[str, str]
) -> tuple[argparse.Namespace, EngineOptions, list[ChildSpec]]:
    args = build_parser().parse_args(["worker", *argv])
    options = engine_options(args)
    specs = child_specs(args, settings, options, Path("/models/m"), URLS, groups, engines, PORTS, environ)
    return args, options, specs


def test_each_engine_runs_the_parents_options_with_its_share_of_the_memory() -> None:
    argv = ["--max-num-seqs", "128", "--no-enforce-eager", "--gpu-memory-utilization", "0.8", "--log-format", "json"]
    _, options, specs = _specs(argv, Settings(), [["0"], ["1"]], 4, {})
    assert len(specs) == 8
    for spec in specs:
        assert list(spec.argv[1:4]) == ["-m", "cli.main", "worker"]
        child = build_parser().parse_args(list(spec.argv[3:]))
        assert child.engines == 1 and child.gpus is None and child.log_format == "json"
        expected = dataclasses.replace(options, model="/models/m", gpu_memory_utilization=0.2)
        assert engine_options(child) == expected


def test_engines_get_their_gpu_their_own_port_and_consumer_name_and_the_services() -> None:
    settings = Settings(consumer_name="pod-0", metrics_port=9464)
    _, _, specs = _specs([], settings, [["0"], ["1"]], 2, {})
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0", "0", "1", "1"]
    assert [s.env["DRAGOMAN_METRICS_PORT"] for s in specs] == ["9465", "9466", "9467", "9468"]
    assert [s.env["DRAGOMAN_CONSUMER_NAME"] for s in specs] == [
        "pod-0-gpu0-e0",
        "pod-0-gpu0-e1",
        "pod-0-gpu1-e0",
        "pod-0-gpu1-e1",
    ]
    assert all(s.env["DRAGOMAN_REDIS_URL"] == URLS.redis_url for s in specs)
    assert all(s.env["DRAGOMAN_DATABASE_URL"] == URLS.database_url for s in specs)
    # The parent reads each engine's port for the group's /metrics and /readyz.
    assert [s.ops for s in specs] == [OpsAddress("127.0.0.1", port) for port in (9465, 9466, 9467, 9468)]
    assert {s.env["DRAGOMAN_METRICS_HOST"] for s in specs} == {"127.0.0.1"}


def test_gpu_numbers_are_the_ones_this_process_sees() -> None:
    """With CUDA_VISIBLE_DEVICES=4,5 set, --gpus 1 means physical GPU 5."""
    _, _, specs = _specs([], Settings(), [["1"]], 1, {"CUDA_VISIBLE_DEVICES": "4,5"})
    assert specs[0].env["CUDA_VISIBLE_DEVICES"] == "5"


def test_without_gpus_or_a_consumer_name_the_engines_leave_them_alone() -> None:
    _, _, specs = _specs([], Settings(), [[]], 3, {})
    assert [s.name for s in specs] == ["e0", "e1", "e2"]
    assert all("CUDA_VISIBLE_DEVICES" not in s.env and "DRAGOMAN_CONSUMER_NAME" not in s.env for s in specs)


def test_with_any_free_port_each_engine_binds_one_and_writes_it_where_the_parent_reads_it() -> None:
    """No port chosen by the parent: another process could take it before the engine binds, minutes later."""
    _, _, specs = _specs([], Settings(metrics_port=0, metrics_host="0.0.0.0"), [["0"], ["1"]], 2, {})
    assert {s.env["DRAGOMAN_METRICS_PORT"] for s in specs} == {"0"}
    files = [PORTS / f"{name}.port" for name in ("gpu0-e0", "gpu0-e1", "gpu1-e0", "gpu1-e1")]
    assert [s.env["DRAGOMAN_OPS_PORT_FILE"] for s in specs] == [str(f) for f in files]
    assert [s.ops for s in specs] == [OpsAddress("127.0.0.1", 0, port_file=f) for f in files]
    assert {s.env["DRAGOMAN_METRICS_HOST"] for s in specs} == {"127.0.0.1"}  # only the group's port is public


def test_engines_listen_on_loopback_unless_one_address_is_named() -> None:
    assert [child_ops_host(host) for host in ("0.0.0.0", "::", "", "127.0.0.1")] == ["127.0.0.1"] * 4
    assert child_ops_host("10.0.0.5") == "10.0.0.5"
    _, _, specs = _specs([], Settings(metrics_host="10.0.0.5", metrics_port=9000), [[]], 2, {})
    assert [s.ops for s in specs] == [OpsAddress("10.0.0.5", 9001), OpsAddress("10.0.0.5", 9002)]
    assert {s.env["DRAGOMAN_METRICS_HOST"] for s in specs} == {"10.0.0.5"}


def test_with_metrics_off_the_engines_still_answer_on_loopback_for_the_staggered_start() -> None:
    _, _, specs = _specs([], Settings(metrics_enabled=False, metrics_port=9464, metrics_host="0.0.0.0"), [[]], 2, {})
    # Free ports, each engine's own: nothing was asked to listen on the usual ones.
    assert [s.ops for s in specs] == [OpsAddress("127.0.0.1", 0, port_file=PORTS / f"e{i}.port") for i in (0, 1)]
    assert {s.env["DRAGOMAN_METRICS_PORT"] for s in specs} == {"0"}
    assert {s.env["DRAGOMAN_METRICS_ENABLED"] for s in specs} == {"true"}


def test_engines_on_one_gpu_start_one_after_the_other_and_gpus_in_parallel() -> None:
    _, _, specs = _specs([], Settings(), [["0"], ["1"]], 2, {})
    assert [(s.name, s.start_after) for s in specs] == [
        ("gpu0-e0", None),
        ("gpu0-e1", "gpu0-e0"),
        ("gpu1-e0", None),
        ("gpu1-e1", "gpu1-e0"),
    ]


def test_tensor_parallel_groups_span_several_gpus() -> None:
    assert gpu_groups(["0", "1", "2", "3"], 2) == [["0", "1"], ["2", "3"]]
    assert gpu_groups(None, 2) == [[]]
    with pytest.raises(ValueError, match="groups of --tensor-parallel-size 2"):
        gpu_groups(["0", "1", "2"], 2)


def test_engines_is_auto_or_a_positive_number() -> None:
    assert build_parser().parse_args(["worker", "--engines", "auto"]).engines == "auto"
    assert build_parser().parse_args(["worker", "--engines", "3"]).engines == 3
    for bad in ("0", "many"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["worker", "--engines", bad])
