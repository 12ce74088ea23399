"""The options `dragoman worker` passes to vLLM, checked against vLLM's own argument classes."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from cli.worker import add_engine_arguments, engine_options
from worker.engine import EngineOptions
from worker.vllm_engine import engine_arguments


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
