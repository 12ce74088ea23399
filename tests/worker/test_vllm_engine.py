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

    async def generate(self, prompt: Any, params: Any, request_id: str) -> AsyncIterator[Any]:
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
