"""dragoman's defaults from the device (issue 32): the rules, overrides, the start line, the heartbeat summary.

All on plain values: :func:`plan_engines` needs no GPU and no vLLM.
"""

from __future__ import annotations

import pytest

from worker.device_defaults import (
    GPU_MEMORY_UTILIZATION,
    Chosen,
    Device,
    EnginePlan,
    gpu_vllm_defaults,
    plan_engines,
)
from worker.engine_args import CPU_DEFAULTS

H100 = Device(80 * 2**30, "NVIDIA H100 80GB HBM3")
A100 = Device(80 * 2**30, "NVIDIA A100-SXM4-80GB")
L4 = Device(24 * 2**30, "NVIDIA L4")
B200 = Device(180 * 2**30, "NVIDIA B200")
CPU = Device()
SMALL, ONE_B, EIGHT_B = 135_000_000, 1_240_000_000, 8_030_000_000


def test_on_a_cpu_the_small_fixed_defaults_and_one_engine() -> None:
    plan = plan_engines(CPU, ONE_B, {})
    assert dict(plan.vllm_defaults) == dict(CPU_DEFAULTS)
    assert plan.engines == Chosen(1, "default") and plan.interactive == Chosen(False, "default")
    assert plan.eager == Chosen(True, "default") and plan.max_num_seqs == Chosen(64, "default")
    assert plan.max_in_flight == Chosen(128, "default") and not plan.engine_group
    assert plan_engines(CPU, ONE_B, {}, engines="auto").engines.value == 1  # auto on a CPU is one engine


def test_on_an_h100_with_no_flags_a_small_model_gets_graphs_several_engines_and_an_interactive_one() -> None:
    plan = plan_engines(H100, ONE_B, {})
    assert plan.eager == Chosen(False, "default")  # CUDA graphs: never eager on a GPU
    assert plan.engines == Chosen(3, "default") and plan.interactive == Chosen(True, "default")
    assert plan.memory == Chosen(GPU_MEMORY_UTILIZATION, "default") and GPU_MEMORY_UTILIZATION == 0.9
    assert plan.max_num_seqs == Chosen(256, "default")  # measured best per engine for 1B
    assert plan.max_num_batched_tokens == Chosen(8192, "default")  # vllm serve's on a 70 GiB+ GPU
    assert plan.max_in_flight == Chosen(512, "default") and plan.engine_group
    assert "kv_cache_memory_bytes" not in plan.vllm_defaults  # the fixed KV cache stays CPU-only
    assert plan.vllm_defaults["max_cudagraph_capture_size"] == 2048


def test_a_large_model_runs_one_engine_with_a_larger_batch_and_no_interactive_engine() -> None:
    plan = plan_engines(H100, EIGHT_B, {})
    assert (plan.engines.value, plan.interactive.value, plan.max_num_seqs.value) == (1, False, 512)
    assert not plan.engine_group and "one engine per GPU" in plan.interactive_off_reason
    assert plan.max_in_flight.value == 1024


@pytest.mark.parametrize(
    ("device", "seqs", "tokens"),
    [(A100, 256, 2048), (L4, 256, 2048), (B200, 512, 16384), (H100, 512, 8192)],
)
def test_the_batch_follows_the_gpu_as_vllm_serve_does(device: Device, seqs: int, tokens: int) -> None:
    defaults = gpu_vllm_defaults(device, EIGHT_B)
    assert (defaults["max_num_seqs"], defaults["max_num_batched_tokens"]) == (seqs, tokens)
    assert gpu_vllm_defaults(device, None)["max_num_seqs"] == 256  # size unknown: the small model's batch


def test_every_default_gives_way_to_the_users_arguments() -> None:
    given = {"enforce_eager": True, "max_num_seqs": 128, "gpu_memory_utilization": 0.6, "max_num_batched_tokens": 4096}
    plan = plan_engines(H100, ONE_B, given, engines=2, interactive=False, max_in_flight=100)
    assert plan.eager == Chosen(True, "flag") and plan.max_num_seqs == Chosen(128, "flag")
    assert plan.memory == Chosen(0.6, "flag") and plan.max_num_batched_tokens == Chosen(4096, "flag")
    assert plan.engines == Chosen(2, "flag") and plan.interactive == Chosen(False, "flag")
    assert plan.max_in_flight == Chosen(100, "flag")
    assert set(plan.vllm_defaults).isdisjoint(given)  # only what the arguments leave out is filled in
    assert plan_engines(H100, ONE_B, {"max_num_seqs": 64}).max_in_flight == Chosen(128, "default")  # 2 x theirs


def test_the_interactive_engine_is_on_by_default_only_where_it_pays() -> None:
    assert plan_engines(H100, SMALL, {}).interactive == Chosen(True, "default")
    assert plan_engines(H100, SMALL, {}, engines=1).interactive.value is False  # one engine asked for
    assert plan_engines(H100, SMALL, {}, engines=4).interactive == Chosen(True, "default")
    lanes = plan_engines(H100, SMALL, {}, lanes_given=True)
    assert lanes.interactive.value is False and "lane policy" in lanes.interactive_off_reason
    assert plan_engines(H100, EIGHT_B, {}, interactive=True).interactive == Chosen(True, "flag")  # asked for
    assert plan_engines(H100, SMALL, {}, interactive=False).interactive == Chosen(False, "flag")


def test_an_engine_group_member_runs_one_engine_with_the_groups_memory_share() -> None:
    plan = plan_engines(H100, ONE_B, {"gpu_memory_utilization": 0.2691}, engines=1, group_member=True)
    assert plan.engines == Chosen(1, "engine group") and plan.interactive.value is False
    assert plan.memory == Chosen(0.2691, "engine group")
    assert plan.max_num_seqs == Chosen(256, "default") and not plan.engine_group


def test_the_start_line_and_the_heartbeat_say_each_value_and_its_source() -> None:
    line = plan_engines(H100, ONE_B, {"max_num_seqs": 128}).describe(memory_per_engine=0.2017)
    assert line.startswith("engine plan on GPU NVIDIA H100 80GB HBM3 (80 GiB), model 1.24B parameters: ")
    for part in (
        "3 engine(s) + 1 interactive [default]",
        "memory 0.9 in total [default], 0.2017 per engine",
        "max_num_seqs 128 [flag]",
        "max_num_batched_tokens 8192 [default]",
        "CUDA graphs [default]",
        "256 jobs in flight per engine [default]",
    ):
        assert part in line
    cpu = plan_engines(CPU, None, {"enforce_eager": False}).describe()
    assert "engine plan on CPU, model size unknown: 1 engine(s) [default]" in cpu and "CUDA graphs [flag]" in cpu
    summary = plan_engines(H100, EIGHT_B, {}).summary()
    assert summary == "graphs(default) seqs=512(default) mem=0.9(default) in_flight=1024(default)"


def test_a_plan_without_vllms_batch_size_says_vllm_chooses_it() -> None:
    plan = EnginePlan(
        device=H100,
        parameters=None,
        engines=Chosen(1, "flag"),
        interactive=Chosen(False, "flag"),
        memory=Chosen(0.9, "vLLM"),
        max_num_seqs=Chosen(None, "vLLM"),
        max_num_batched_tokens=Chosen(None, "vLLM"),
        eager=Chosen(False, "vLLM"),
        max_in_flight=Chosen(None, "default"),
    )
    assert "max_num_seqs vLLM's [vLLM]" in plan.describe() and "2 x vLLM's max_num_seqs" in plan.describe()
    assert "seqs=vllm(vLLM)" in plan.summary()
