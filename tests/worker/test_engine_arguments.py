"""vLLM's engine arguments: the command line and ``DRAGOMAN_ENGINE_ARGS`` through vLLM's own parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli.main import EXIT_BAD_INPUT, main, parse_command_line
from contract.errors import EngineArgumentsError
from contract.settings import Settings
from worker.engine_args import (
    CPU_DEFAULTS,
    GPU_DEFAULTS,
    async_engine_args,
    cpu_has_bf16,
    describe_defaults,
    engine_argv,
    parse_engine_args,
    split_engine_args,
)


def _worker_engine_args(*argv: str) -> list[str]:
    """What `dragoman worker ARGV` hands to vLLM's parser (no DRAGOMAN_ENGINE_ARGS)."""
    args = parse_command_line(["worker", *argv])
    return list(args.engine_args)


def test_options_the_worker_does_not_know_pass_through_to_vllm_in_order() -> None:
    argv = ["--max-num-seqs", "8", "--lane-policy", "bulk", "--no-enforce-eager", "--max-model-len=1024"]
    args = parse_command_line(["worker", *argv])
    assert args.lane_policy == "bulk"  # dragoman's own
    assert args.engine_args == ["--max-num-seqs", "8", "--no-enforce-eager", "--max-model-len=1024"]
    engine = async_engine_args(Path("/models/m"), parse_engine_args(args.engine_args, on_cpu=False))
    assert (engine.model, engine.max_num_seqs, engine.enforce_eager, engine.max_model_len) == (
        "/models/m",
        8,
        False,
        1024,
    )


def test_an_option_vllm_has_needs_no_change_here() -> None:
    """Options dragoman never declared reach vLLM as its own parser reads them."""
    argv = _worker_engine_args("--seed", "7", "--enable-prefix-caching", "--max_num_batched_tokens", "4k")
    engine = async_engine_args(Path("m"), parse_engine_args(argv, on_cpu=False))
    assert (engine.seed, engine.enable_prefix_caching, engine.max_num_batched_tokens) == (
        7,
        True,
        4000,
    )  # vLLM reads 4k as 4,000


def test_the_environments_arguments_come_first_so_a_flag_wins() -> None:
    environment = "--max-num-seqs 256 --gpu-memory-utilization 0.5 --override-generation-config '{\"top_k\": 5}'"
    argv = engine_argv(environment, _worker_engine_args("--max-num-seqs", "8"))
    assert argv[-2:] == ["--max-num-seqs", "8"]
    values = parse_engine_args(argv, on_cpu=False)
    assert (values["max_num_seqs"], values["gpu_memory_utilization"]) == (8, 0.5)
    assert values["override_generation_config"] == {"top_k": 5}  # quoted as a shell quotes it


def test_on_a_cpu_dragomans_defaults_fill_in_only_what_is_left_out() -> None:
    left_out = parse_engine_args([], on_cpu=True)
    assert {name: left_out[name] for name in CPU_DEFAULTS} == CPU_DEFAULTS
    assert left_out["max_cudagraph_capture_size"] is None  # vLLM's: a GPU default only
    # Given, even as vLLM's own default value, an option is the user's.
    given = parse_engine_args(
        ["--no-enforce-eager", "--gpu-memory-utilization", "0.92", "--max-num-seqs=64"], on_cpu=True
    )
    assert (given["enforce_eager"], given["gpu_memory_utilization"], given["max_num_seqs"]) == (False, 0.92, 64)
    assert given["kv_cache_memory_bytes"] == 2**30 and given["max_model_len"] == 2048
    assert parse_engine_args(["--kv-cache-memory-bytes", "512M"], on_cpu=True)["kv_cache_memory_bytes"] == 512 * 2**20


def test_on_a_gpu_vllms_defaults_stand_but_for_cuda_graphs_over_mixed_steps() -> None:
    values = parse_engine_args([], on_cpu=False)
    assert values["max_num_seqs"] is None and values["max_model_len"] is None  # vLLM sizes them for the GPU
    assert values["enforce_eager"] is False and values["kv_cache_memory_bytes"] is None
    assert values["max_cudagraph_capture_size"] == 2048
    assert async_engine_args(Path("m"), values).max_cudagraph_capture_size == 2048
    assert (
        parse_engine_args(["--max-cudagraph-capture-size", "1536"], on_cpu=False)["max_cudagraph_capture_size"] == 1536
    )
    assert parse_engine_args(["--enforce-eager"], on_cpu=False)["max_cudagraph_capture_size"] is None  # no graphs
    config = parse_engine_args(["-cc.max_cudagraph_capture_size=1024"], on_cpu=False)  # vLLM's own spelling of it
    assert (
        config["max_cudagraph_capture_size"] is None and config["compilation_config"].max_cudagraph_capture_size == 1024
    )


def test_the_defaults_the_help_shows_are_the_ones_applied() -> None:
    """`dragoman worker --help` spells dragoman's defaults as flags: given as such on a GPU, they are the CPU's."""
    shown = describe_defaults(CPU_DEFAULTS)
    assert "--kv-cache-memory-bytes 1G" in shown and "--enforce-eager" in shown
    values = parse_engine_args(shown.replace(",", "").split(), on_cpu=False)
    assert {name: values[name] for name in CPU_DEFAULTS} == CPU_DEFAULTS
    assert describe_defaults(GPU_DEFAULTS) == (
        "--no-enforce-eager, --gpu-memory-utilization 0.9, --max-cudagraph-capture-size 2048"
    )


def test_on_a_cpu_without_bfloat16_auto_means_float32() -> None:
    assert parse_engine_args([], on_cpu=True, cpu_has_bf16=False)["dtype"] == "float32"
    assert parse_engine_args([], on_cpu=True, cpu_has_bf16=True)["dtype"] == "bfloat16"
    assert parse_engine_args(["--dtype", "bfloat16"], on_cpu=True)["dtype"] == "bfloat16"  # asked for
    assert parse_engine_args([], on_cpu=False)["dtype"] == "auto"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-num-seqs", "many"], "argument --max-num-seqs: invalid int value: 'many'"),
        (["--no-such-engine-option", "1"], "unrecognized arguments: --no-such-engine-option 1"),
        (["--cpu-kv-cache-gib", "0.5"], "--kv-cache-memory-bytes sizes the KV cache"),
        (["--no-log-stats"], "vLLM's own flag is --disable-log-stats"),
        (["--model", "/models/x"], "give it as `dragoman worker --model PATH`"),
    ],
)
def test_arguments_vllm_refuses_raise_with_the_reason(argv: list[str], message: str) -> None:
    with pytest.raises(EngineArgumentsError) as raised:
        parse_engine_args(argv, on_cpu=False)
    assert message in str(raised.value)


def test_an_environment_value_that_does_not_split_is_refused() -> None:
    with pytest.raises(EngineArgumentsError, match="DRAGOMAN_ENGINE_ARGS cannot be split"):
        split_engine_args("--served-model-name 'unclosed")


def test_a_bad_engine_argument_exits_2_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cli.worker.require_engine_for", lambda *args: None)
    monkeypatch.setattr("cli.worker.resolve_model", _must_not_start)
    assert main(["worker", "--max-num-seqs", "many"]) == EXIT_BAD_INPUT
    assert "invalid int value: 'many'" in capsys.readouterr().err
    monkeypatch.setenv("DRAGOMAN_ENGINE_ARGS", "--gpu-memory-utilization lots")
    assert main(["worker"]) == EXIT_BAD_INPUT
    assert "invalid float value: 'lots'" in capsys.readouterr().err


def _must_not_start(*args: Any) -> None:
    raise AssertionError("the worker went on to start")


def test_other_commands_refuse_options_they_do_not_know(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_command_line(["submit", "Hello", "--from", "en", "--to", "fr", "--max-num-seqs", "8"])
    assert exited.value.code == 2 and "unrecognized arguments: --max-num-seqs 8" in capsys.readouterr().err


def test_help_engine_lists_vllms_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--help-engine"]) == 0
    listing = capsys.readouterr().out
    assert "--max-num-seqs" in listing and "--gpu-memory-utilization" in listing and "--enforce-eager" in listing


def test_the_setting_holds_the_environments_engine_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_ENGINE_ARGS", "--max-num-seqs 256 --no-enforce-eager")
    assert split_engine_args(Settings().engine_args) == ["--max-num-seqs", "256", "--no-enforce-eager"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [("fpu sse avx2 fma", False), ("fpu avx2 avx512f avx512_bf16", True), ("fpu amx_tile amx_bf16", True)],
)
def test_bfloat16_instructions_are_read_from_the_cpu_flags(flags: str, expected: bool, tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
    assert cpu_has_bf16(cpuinfo) is expected
    assert cpu_has_bf16(tmp_path / "missing") is False
