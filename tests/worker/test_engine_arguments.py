"""The options `dragoman worker` passes to vLLM, checked against vLLM's own argument classes."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from cli.worker import add_engine_arguments, engine_options
from worker.engine import EngineOptions
from worker.vllm_engine import cpu_has_bf16, engine_arguments


def _parse(*argv: str) -> EngineOptions:
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    return engine_options(parser.parse_args(list(argv)))


def test_every_argument_is_one_vllm_knows() -> None:
    from vllm import AsyncEngineArgs
    from vllm.config import CompilationConfig

    kwargs = engine_arguments(Path("/models/m"), _parse("--no-enforce-eager", "--max-cudagraph-capture-size", "1536"))
    assert set(kwargs) <= {field.name for field in dataclasses.fields(AsyncEngineArgs)}
    assert kwargs["compilation_config"] == {"max_cudagraph_capture_size": 1536}
    assert CompilationConfig(**kwargs["compilation_config"]).max_cudagraph_capture_size == 1536


def test_graphs_cover_mixed_steps_by_default_and_zero_leaves_it_to_vllm() -> None:
    default = engine_arguments(Path("m"), _parse("--no-enforce-eager"))
    assert default["compilation_config"] == {"max_cudagraph_capture_size": 2048}
    vllm_default = _parse("--no-enforce-eager", "--max-cudagraph-capture-size", "0")
    assert "compilation_config" not in engine_arguments(Path("m"), vllm_default)


def test_capture_size_is_not_passed_when_eager() -> None:
    eager = _parse("--max-cudagraph-capture-size", "1024")  # --enforce-eager is the default: no graphs at all
    assert eager.enforce_eager and "compilation_config" not in engine_arguments(Path("m"), eager)


def test_capture_size_joins_a_compilation_config_given_in_extra() -> None:
    options = EngineOptions(
        enforce_eager=False,
        max_cudagraph_capture_size=1024,
        extra={"compilation_config": {"cudagraph_mode": "PIECEWISE"}},
    )
    kwargs = engine_arguments(Path("m"), options)
    assert kwargs["compilation_config"] == {"cudagraph_mode": "PIECEWISE", "max_cudagraph_capture_size": 1024}
    assert options.extra["compilation_config"] == {"cudagraph_mode": "PIECEWISE"}  # the caller's dict is not changed
    assert kwargs["model"] == "m" and kwargs["disable_log_stats"] is False


@pytest.mark.parametrize("value", ["-1", "big"])
def test_a_capture_size_that_is_not_a_token_count_is_refused_with_the_reason(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _parse("--no-enforce-eager", "--max-cudagraph-capture-size", value)
    assert exit_info.value.code == 2
    assert "--max-cudagraph-capture-size" in capsys.readouterr().err


def test_on_a_cpu_without_bfloat16_auto_means_float32_and_a_fixed_kv_cache() -> None:
    options = _parse("--cpu-kv-cache-gib", "0.5")
    on_avx2 = engine_arguments(Path("m"), options, on_cpu=True, cpu_has_bf16=False)
    assert on_avx2["dtype"] == "float32" and on_avx2["kv_cache_memory_bytes"] == 2**29
    assert engine_arguments(Path("m"), options, on_cpu=True, cpu_has_bf16=True)["dtype"] == "bfloat16"
    assert engine_arguments(Path("m"), _parse("--dtype", "bfloat16"), on_cpu=True)["dtype"] == "bfloat16"  # asked for
    on_gpu = engine_arguments(Path("m"), options)
    assert on_gpu["dtype"] == "auto" and "kv_cache_memory_bytes" not in on_gpu


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_a_cpu_kv_cache_size_that_is_not_positive_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse("--cpu-kv-cache-gib", value)
    assert "--cpu-kv-cache-gib" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [("fpu sse avx2 fma", False), ("fpu avx2 avx512f avx512_bf16", True), ("fpu amx_tile amx_bf16", True)],
)
def test_bfloat16_instructions_are_read_from_the_cpu_flags(flags: str, expected: bool, tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
    assert cpu_has_bf16(cpuinfo) is expected
    assert cpu_has_bf16(tmp_path / "missing") is False
