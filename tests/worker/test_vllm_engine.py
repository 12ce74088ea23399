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
