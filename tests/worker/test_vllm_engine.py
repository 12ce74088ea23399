"""The vLLM adapter's own rules, with a stand-in for ``AsyncLLM`` (the real one runs in the e2e tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from contract.errors import EngineUnavailableError
from worker.engine import GenerationRequest
from worker.vllm_engine import VllmEngine


class _StandInLLM:
    """Answers every request with the same three tokens, like ``AsyncLLM.generate`` with ``FINAL_ONLY``."""

    async def generate(self, prompt: Any, params: Any, request_id: str, priority: int = 0) -> AsyncIterator[Any]:
        yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1, 2, 3], finish_reason="stop")])


def _request() -> GenerationRequest:
    return GenerationRequest(request_id="r1", prompt_token_ids=[5, 6], max_tokens=8, stop_token_ids=())


def test_the_engine_refuses_a_second_event_loop_instead_of_hanging() -> None:
    pytest.importorskip("vllm")
    engine = VllmEngine(_StandInLLM(), "m", tokenizer=None)  # type: ignore[arg-type]

    async def two_requests() -> list[list[int]]:
        return [list((await engine.generate(_request())).token_ids) for _ in range(2)]

    assert asyncio.run(two_requests()) == [[1, 2, 3], [1, 2, 3]]  # the same loop, any number of times
    with pytest.raises(EngineUnavailableError, match="bound to the event loop that first used it"):
        asyncio.run(engine.generate(_request()))


class _CutOffLLM:
    """Every request stops at its budget, as all do with ``ignore_eos``; remembers the priorities it got."""

    def __init__(self) -> None:
        self.priorities: list[int] = []

    async def generate(self, prompt: Any, params: Any, request_id: str, priority: int = 0) -> AsyncIterator[Any]:
        self.priorities.append(priority)
        yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1, 2, 3], finish_reason="length")])


@pytest.mark.parametrize(("ignore_eos", "expected"), [(False, "length"), (True, "stop")])
async def test_a_budget_stop_is_the_intended_end_only_when_eos_is_ignored(ignore_eos: bool, expected: str) -> None:
    pytest.importorskip("vllm")
    llm = _CutOffLLM()
    engine = VllmEngine(llm, "m", tokenizer=None)  # type: ignore[arg-type]
    engine._ignore_eos = ignore_eos
    request = GenerationRequest(request_id="r", prompt_token_ids=[5], max_tokens=3, priority=1)
    result = await engine.generate(request)
    assert result.finish_reason == expected
    assert llm.priorities == [1]  # the lane's priority reaches vLLM


class _RecordingLLM(_StandInLLM):
    """The stand-in, keeping the ``SamplingParams`` of every request."""

    def __init__(self) -> None:
        self.params: list[Any] = []

    async def generate(self, prompt: Any, params: Any, request_id: str, priority: int = 0) -> AsyncIterator[Any]:
        self.params.append(params)
        async for output in super().generate(prompt, params, request_id, priority):
            yield output


async def test_a_profiles_sampling_and_stop_strings_reach_vllms_sampling_params() -> None:
    pytest.importorskip("vllm")
    llm = _RecordingLLM()
    engine = VllmEngine(llm, "m", tokenizer=None)  # type: ignore[arg-type]
    sampled = GenerationRequest(
        request_id="s",
        prompt_token_ids=[5],
        max_tokens=8,
        temperature=0.7,
        top_p=0.6,
        top_k=20,
        repetition_penalty=1.05,
        stop=("</t>",),
    )
    await engine.generate(sampled)
    await engine.generate(_request())
    hunyuan, greedy = llm.params
    assert (hunyuan.temperature, hunyuan.top_p, hunyuan.top_k, hunyuan.repetition_penalty) == (0.7, 0.6, 20, 1.05)
    assert hunyuan.stop == ["</t>"] and hunyuan.detokenize  # stop strings are matched on text
    assert (greedy.temperature, greedy.top_k, greedy.repetition_penalty) == (0.0, 0, 1.0)
    assert not greedy.stop and not greedy.detokenize  # no text work when nothing needs it
