"""``dragoman worker --engines N --gpus ...``: the engine group's layout and what each engine's process is told."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from cli.main import EXIT_BAD_INPUT, build_parser, main, parse_command_line
from cli.setting_flags import overlay_flags
from cli.worker import engine_command
from contract.services import ServiceUrls
from contract.settings import Settings
from worker.engine_args import engine_argv, parse_engine_args, with_overrides
from worker.engine_count import BYTES_PER_PARAMETER, MEMORY_PER_WEIGHT
from worker.engine_group import (
    EngineGroupLayout,
    InteractiveEngine,
    child_ops_host,
    child_specs,
    engine_group_layout,
    gpu_groups,
)
from worker.supervisor import ChildSpec, OpsAddress

URLS = ServiceUrls("redis://cache:6379/0", "postgresql://app@db/dragoman")
PORTS = Path("/run/group-ports")


def _parent(argv: list[str], settings: Settings) -> tuple[argparse.Namespace, Settings, list[str]]:
    """The group's command line as `dragoman worker` reads it: its flags, its settings, its engine arguments."""
    args = parse_command_line(["worker", *argv])
    settings = overlay_flags(settings, args)
    return args, settings, engine_argv(settings.engine_args, args.engine_args)


def _children(
    parent: tuple[argparse.Namespace, Settings, list[str]],
    groups: list[list[str]],
    layout: EngineGroupLayout,
    environ: dict[str, str] | None = None,
) -> list[ChildSpec]:
    args, settings, engine_args = parent
    command = engine_command(args, Path("/models/m"))
    return child_specs(settings, command, engine_args, URLS, groups, layout, PORTS, environ or {})


def _specs(
    argv: list[str], settings: Settings, groups: list[list[str]], engines: int, environ: dict[str, str]
) -> tuple[argparse.Namespace, list[str], list[ChildSpec]]:
    parent = _parent(argv, settings)
    layout = EngineGroupLayout.even(engines, parse_engine_args(parent[2], on_cpu=False)["gpu_memory_utilization"])
    return parent[0], parent[2], _children(parent, groups, layout, environ)


def _engine(argv: list[str]) -> dict[str, Any]:
    """What vLLM's parser makes of a worker's engine arguments, on a GPU."""
    return parse_engine_args(argv, on_cpu=False)


def test_each_engine_runs_the_parents_engine_arguments_then_its_share_of_the_memory() -> None:
    argv = ["--max-num-seqs", "128", "--no-enforce-eager", "--gpu-memory-utilization", "0.8", "--log-format", "json"]
    settings = Settings(engine_args="--enable-prefix-caching --max-num-seqs 64")
    _, engine_args, specs = _specs(argv, settings, [["0"], ["1"]], 4, {})
    assert engine_args == ["--enable-prefix-caching", "--max-num-seqs", "64", *argv[:5]]  # the variable's, then flags
    assert len(specs) == 8
    for spec in specs:
        assert list(spec.argv[1:4]) == ["-m", "cli.main", "worker"]
        child = _child_args(spec)
        assert child.engines == 1 and child.gpus is None and child.model == "/models/m"
        assert spec.env["DRAGOMAN_LOG_FORMAT"] == "json"  # the parent's settings, flags included
        # The parent's engine arguments as given (no option re-rendered), then the child's override.
        assert child.engine_args == [*engine_args[:5], "--no-enforce-eager", "--gpu-memory-utilization=0.2"]
        assert spec.env["DRAGOMAN_ENGINE_ARGS"] == "" and spec.env["DRAGOMAN_ENGINE"] == "vllm"  # not twice
        assert _engine(child.engine_args) == {**_engine(engine_args), "gpu_memory_utilization": 0.2}


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
    # The parent reads each engine's port for the engine group's /metrics and /readyz.
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
    assert {s.env["DRAGOMAN_METRICS_HOST"] for s in specs} == {"127.0.0.1"}  # only the engine group's port is public


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


def test_a_childs_own_flags_and_options_dragoman_never_declared_reach_it_as_given() -> None:
    argv = ["--profile", "chat", "--ignore-eos", "--max-in-flight", "300", "--seed", "7"]
    _, _, specs = _specs(argv, Settings(), [[]], 1, {})
    child = _child_args(specs[0])
    assert (child.profile, child.ignore_eos, specs[0].env["DRAGOMAN_MAX_IN_FLIGHT"]) == ("chat", True, "300")
    assert child.engine_args == ["--seed", "7", "--gpu-memory-utilization=0.9"]  # dragoman's 0.9 on a GPU
    # One engine each, told it is a group's: neither runs a group of its own, and its memory share is the group's.
    assert (child.engines, child.engine_group_member, child.interactive_engine) == (1, True, None)


def test_an_override_replaces_the_parents_value_however_it_was_spelled() -> None:
    argv = ["--max-num-seqs", "256", "--gpu_memory_utilization=0.9", "--seed", "3", "--max-num-seqs=128"]
    assert with_overrides(argv, {"--max-num-seqs": 32, "--gpu-memory-utilization": 0.1}) == [
        "--seed",
        "3",
        "--max-num-seqs=32",
        "--gpu-memory-utilization=0.1",
    ]
    assert with_overrides(argv, {}) == argv


def test_engines_is_auto_or_a_positive_number() -> None:
    assert build_parser().parse_args(["worker", "--engines", "auto"]).engines == "auto"
    assert build_parser().parse_args(["worker", "--engines", "3"]).engines == 3
    for bad in ("0", "many"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["worker", "--engines", bad])


# --interactive-engine ----------------------------------------------------------------------------

H100 = 80 * 2**30


def _layout(
    argv: list[str], settings: Settings, parameters: int | None, memory: int | None, *, on_cpu: bool = False
) -> tuple[tuple[argparse.Namespace, Settings, list[str]], EngineGroupLayout]:
    parent = args, settings, engine_args = _parent(argv, settings)
    whole = parse_engine_args(engine_args, on_cpu=on_cpu)["gpu_memory_utilization"]
    layout = engine_group_layout(
        args.engines,
        settings,
        whole,
        parameters,
        memory,
        interactive=args.interactive_engine,
        interactive_max_seqs=args.interactive_max_seqs,
    )
    return parent, layout


def _child_args(spec: ChildSpec) -> argparse.Namespace:
    assert list(spec.argv[1:4]) == ["-m", "cli.main", "worker"]
    return parse_command_line(list(spec.argv[3:]))


def test_an_interactive_engine_joins_each_gpus_regular_engines_with_its_policy_batch_and_memory() -> None:
    argv = ["--engines", "auto", "--interactive-engine", "--gpu-memory-utilization", "0.85", "--max-num-seqs", "256"]
    settings = Settings(consumer_name="pod-0", metrics_port=9464)
    parent, layout = _layout(argv, settings, 135_000_000, H100)  # a 135M model: 5 engines per GPU
    engine_args = parent[2]
    assert (layout.engines, layout.memory) == (5, 0.16)
    assert layout.interactive == InteractiveEngine(max_num_seqs=32, max_in_flight=32, memory=0.05)
    specs = _children(parent, [["0"], ["1"]], layout)
    names = [f"gpu{g}-e{e}" for g in (0, 1) for e in range(5)]
    assert [s.name for s in specs] == [*names[:5], "gpu0-interactive", *names[5:], "gpu1-interactive"]
    # Started one after the other on each GPU, the interactive engine after that GPU's regular ones.
    assert [s.start_after for s in specs[:6]] == [None, "gpu0-e0", "gpu0-e1", "gpu0-e2", "gpu0-e3", "gpu0-e4"]
    assert specs[11].start_after == "gpu1-e4" and specs[6].start_after is None
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0"] * 6 + ["1"] * 6
    assert specs[5].env["DRAGOMAN_CONSUMER_NAME"] == "pod-0-gpu0-interactive"  # metrics say what it is
    assert [s.env["DRAGOMAN_METRICS_PORT"] for s in specs] == [str(9465 + i) for i in range(12)]
    children = [_child_args(spec) for spec in specs]
    for gpu, envs in ((children[:6], [s.env for s in specs[:6]]), (children[6:], [s.env for s in specs[6:]])):
        interactive = gpu[-1]
        engines = [_engine(c.engine_args) for c in gpu]
        lanes = [(env["DRAGOMAN_LANE_POLICY"], env.get("DRAGOMAN_MAX_IN_FLIGHT")) for env in envs]
        assert set(lanes[:-1]) == {("bulk", None)} and lanes[-1] == ("interactive", "32")
        assert {e["max_num_seqs"] for e in engines[:-1]} == {256} and engines[-1]["max_num_seqs"] == 32
        assert round(sum(e["gpu_memory_utilization"] for e in engines), 9) <= 0.85
        assert not any(c.interactive_engine for c in gpu) and {c.engines for c in gpu} == {1}
        # The parent's --gpu-memory-utilization 0.85 --max-num-seqs 256, both replaced by the engine's own.
        assert engine_args == ["--gpu-memory-utilization", "0.85", "--max-num-seqs", "256"]
        assert interactive.engine_args == ["--gpu-memory-utilization=0.05", "--max-num-seqs=32"]
        assert engines[-1] == {**_engine(engine_args), "max_num_seqs": 32, "gpu_memory_utilization": 0.05}
    line = layout.describe([["0"], ["1"]])
    assert line.startswith("running 12 engines (5 per GPU group + 1 interactive, groups ['0', '1'])")
    assert "interactive engine with 0.05, 32 sequences and 32 jobs in flight" in line
    from bench.engines import GROUP_LINE

    match = GROUP_LINE.search(line)
    assert match and match.group(1) == "12"  # what bench.engines waits for


def test_the_interactive_engines_batch_and_bulk_cap_make_its_jobs_in_flight() -> None:
    argv = ["--engines", "2", "--interactive-engine", "--interactive-max-seqs", "16", "--max-in-flight", "300"]
    parent, layout = _layout(argv, Settings(interactive_bulk_in_flight=4), None, None)
    assert layout.interactive == InteractiveEngine(max_num_seqs=16, max_in_flight=20, memory=0.05)
    specs = _children(parent, [[]], layout)
    seqs = [_engine(_child_args(s).engine_args)["max_num_seqs"] for s in specs]  # None: vLLM's own default
    in_flight = [s.env["DRAGOMAN_MAX_IN_FLIGHT"] for s in specs]
    assert list(zip(seqs, in_flight, strict=True)) == [(None, "300"), (None, "300"), (16, "20")]


def test_without_a_gpu_one_engine_and_an_interactive_one_are_a_group_of_two() -> None:
    """The same layout on a CPU: the memory shares are unused there but still add up."""
    parent, layout = _layout(["--engines", "1", "--interactive-engine"], Settings(), None, None, on_cpu=True)
    assert layout.engines_per_group == 2 and layout.memory + layout.interactive.memory <= 0.25  # type: ignore[union-attr]
    specs = _children(parent, [[]], layout)
    assert [(s.name, s.start_after) for s in specs] == [("e0", None), ("interactive", "e0")]
    assert [s.env["DRAGOMAN_LANE_POLICY"] for s in specs] == ["bulk", "interactive"]
    assert "running 2 engines (1 per GPU group + 1 interactive" in layout.describe([[]])


def test_the_interactive_engines_memory_leaves_the_regular_engines_what_they_need() -> None:
    weights = 8_030_000_000 * BYTES_PER_PARAMETER
    need = weights * MEMORY_PER_WEIGHT / H100
    _, layout = _layout(["--interactive-engine", "--gpu-memory-utilization", "0.95"], Settings(), 8_030_000_000, H100)
    assert layout.interactive is not None
    assert layout.interactive.memory < need <= layout.memory  # capped: the bulk engine keeps its share
    assert layout.memory + layout.interactive.memory <= 0.95
    with pytest.raises(ValueError, match="leave --interactive-engine out"):  # 0.8: no room for its weights
        _layout(["--interactive-engine", "--gpu-memory-utilization", "0.8"], Settings(), 8_030_000_000, H100)
    argv = ["--interactive-engine", "--engines", "3", "--gpu-memory-utilization", "0.85"]
    _, small = _layout(argv, Settings(), 1_240_000_000, H100)
    assert small.interactive is not None and small.interactive.memory > 0.05  # weights x 3 above 5%


def test_without_interactive_engine_the_engines_keep_their_policy_flag_and_even_shares() -> None:
    parent, layout = _layout(["--engines", "4", "--lane-policy", "bulk"], Settings(), None, None, on_cpu=True)
    assert layout == EngineGroupLayout(4, 0.0625)
    specs = _children(parent, [[]], layout)
    assert {s.env["DRAGOMAN_LANE_POLICY"] for s in specs} == {"bulk"}
    assert not any(_child_args(s).lane_policy for s in specs)  # a setting, not a flag, in the child
    _, plain = _layout(["--engines", "2"], Settings(), None, None, on_cpu=True)
    specs = _children(parent, [[]], plain)
    assert plain == EngineGroupLayout(2, 0.125) and len(specs) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--interactive-max-seqs", "0"], "must be 1 or more, got 0"),
        (["--interactive-max-seqs", "many"], "expected a whole number"),
        (["--lane-policy", "urgent"], "invalid choice: 'urgent'"),
    ],
)
def test_a_bad_lane_flag_value_exits_2_with_the_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--interactive-engine", *argv])
    assert exited.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--interactive-engine", "--lane-policy", "bulk"], "leave --lane-policy out"),
        (["--no-interactive-engine", "--interactive-max-seqs", "8"], "not with --no-interactive-engine"),
    ],
)
def test_lane_flags_that_contradict_each_other_exit_2_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cli.worker.require_engine_for", _must_not_start)
    assert main(["worker", *argv]) == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def _must_not_start(*args: object) -> None:
    raise AssertionError("the worker went on to start")


def test_lane_policy_overrides_the_setting_for_this_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_LANE_POLICY", "bulk")
    seen: list[Settings] = []

    def stop_here(command: str, settings: Settings, model: str | None) -> None:
        seen.append(settings)
        raise ValueError("stopped before the engine")

    monkeypatch.setattr("cli.worker.require_engine_for", stop_here)
    assert main(["worker", "--lane-policy", "interactive"]) == EXIT_BAD_INPUT
    assert main(["worker"]) == EXIT_BAD_INPUT
    assert [s.lane_policy for s in seen] == ["interactive", "bulk"]


def test_bench_mixed_runs_the_worker_with_the_group_flags_and_counts_its_engines(tmp_path: Path) -> None:
    from typing import Any, cast

    from bench.engines import WorkerProcess, engine_count, parse_args, worker_argv

    args = parse_args(["mixed", "--model", "/m", "--engines", "auto", "--interactive-engine"])
    argv = worker_argv(args, args.engines, args.gpu_memory_utilization)
    child = parse_command_line(argv[3:])
    assert (child.engines, child.interactive_engine, child.interactive_max_seqs) == ("auto", True, None)
    plain = parse_args(["mixed", "--model", "/m"])
    assert (plain.engines, plain.interactive_engine) == ("1", False)
    assert "--interactive-engine" not in worker_argv(plain, plain.engines, 0.85)
    log = tmp_path / "group.log"
    _, layout = _layout(["--engines", "1", "--interactive-engine"], Settings(), None, None, on_cpu=True)
    log.write_text(f"... {layout.describe([['0']])}\n")
    worker = WorkerProcess("w", cast(Any, None), log)
    assert engine_count(worker, "1", 1.0, interactive=True) == 2  # not the 1 of --engines: read from the log
    assert engine_count(worker, "1", 1.0) == 1
    with pytest.raises(SystemExit):
        parse_args(["mixed", "--model", "/m", "--interactive-engine", "--lanes", "off"])


def _llama_1b(folder: Path) -> Path:
    """A model folder with the Llama-3.2-1B shape's config.json (1.24B parameters), nothing else."""
    import json

    config = {"hidden_size": 2048, "num_hidden_layers": 16, "vocab_size": 128256, "intermediate_size": 8192}
    config |= {"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _plan_on(
    device: Any, argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> tuple[Any, Any]:
    import logging

    from cli.worker import _engine_plan
    from worker.device_defaults import Device

    monkeypatch.setattr("worker.device_defaults.detect_device", lambda gpu, on_cpu: device or Device())
    args, settings, engine_args = _parent(argv, Settings())
    with caplog.at_level(logging.INFO, logger="dragoman.worker"):
        plan, group = _engine_plan(
            args, settings, logging.getLogger("dragoman.worker"), engine_args, _llama_1b(tmp_path)
        )
    return plan, group


def test_a_worker_with_no_flags_on_an_h100_runs_an_engine_group_with_an_interactive_engine_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from worker.device_defaults import Device

    plan, group = _plan_on(Device(H100, "NVIDIA H100 80GB HBM3"), [], tmp_path, monkeypatch, caplog)
    assert group is not None and plan.interactive.source == "default"
    groups, layout = group
    assert (layout.engines, layout.interactive is not None) == (3, True)
    assert layout.memory * 3 + layout.interactive.memory <= 0.9  # the 0.9 is shared, never exceeded
    start = [r.getMessage() for r in caplog.records if r.getMessage().startswith("engine plan on GPU")]
    assert len(start) == 1 and "3 engine(s) + 1 interactive [default]" in start[0]
    assert f"{layout.memory:.4g} per engine" in start[0]
    # Each child runs one engine of the plan's batch, with the group's memory share after the parent's arguments.
    specs = _children((*_parent([], Settings())[:2], []), groups, layout)
    assert [_child_args(s).engines for s in specs] == [1, 1, 1, 1]
    assert {s.env["DRAGOMAN_LANE_POLICY"] for s in specs} == {"bulk", "interactive"}


def test_a_flag_keeps_the_worker_to_one_engine_in_process_on_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from worker.device_defaults import Device

    plan, group = _plan_on(
        Device(H100, "NVIDIA H100 80GB HBM3"), ["--engines", "1", "--max-num-seqs", "96"], tmp_path, monkeypatch, caplog
    )
    assert group is None and plan.max_num_seqs.value == 96 and plan.max_num_seqs.source == "flag"
    assert plan.vllm_defaults["enforce_eager"] is False and "max_num_seqs" not in plan.vllm_defaults
    assert any("max_num_seqs 96 [flag]" in r.getMessage() for r in caplog.records)


def test_on_a_cpu_the_worker_stays_one_eager_engine_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    plan, group = _plan_on(None, [], tmp_path, monkeypatch, caplog)
    assert group is None and plan.eager.value is True and plan.engines.value == 1
    assert plan.vllm_defaults["kv_cache_memory_bytes"] == 2**30
