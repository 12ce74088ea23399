"""The vLLM adapter's own rules, with a stand-in for ``AsyncLLM`` (the real one runs in the e2e tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from contract.errors import EngineUnavailableError
from contract.repetition import repeating_token_tail
from worker.engine import GenerationRequest
from worker.loop_watch import WATCH_EVERY_TOKENS, first_loop_end
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


class _StreamingLLM:
    """Streams scripted tokens as ``DELTA`` outputs of ``chunk`` tokens, like ``AsyncLLM.generate`` does.

    Remembers each request's ``SamplingParams``, how many tokens it produced, whether the caller
    stopped listening (vLLM aborts the request then) and which requests still hold a slot.
    """

    def __init__(self, tokens: list[int], chunk: int = 1, finish_reason: str = "length") -> None:
        self.tokens, self.chunk, self.finish_reason = tokens, chunk, finish_reason
        self.params: list[Any] = []
        self.produced: dict[str, int] = {}
        self.closed_early: list[str] = []
        self.running: set[str] = set()
        self._aborted: set[str] = set()

    async def generate(self, prompt: Any, params: Any, request_id: str, priority: int = 0) -> AsyncIterator[Any]:
        self.params.append(params)
        self.running.add(request_id)
        sent = 0
        try:
            while True:
                await asyncio.sleep(0)  # one engine step
                if request_id in self._aborted:
                    yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=[], finish_reason="abort")])
                    return
                delta = self.tokens[sent : sent + self.chunk]
                sent += len(delta)
                self.produced[request_id] = sent
                last = sent >= len(self.tokens)
                reason = self.finish_reason if last else None
                yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=list(delta), finish_reason=reason)])
                if last:
                    return
        except GeneratorExit:
            self.closed_early.append(request_id)
            raise
        finally:
            self.running.discard(request_id)

    async def abort(self, request_id: str) -> None:
        self._aborted.add(request_id)


def _looping(prefix: int = 21, period: int = 3, total: int = 200) -> list[int]:
    """``prefix`` distinct tokens, then a span of ``period`` tokens repeated up to ``total`` tokens."""
    head = list(range(1000, 1000 + prefix))
    span = list(range(1, period + 1))
    return head + (span * total)[: total - prefix]


def _watched(request_id: str = "w", max_tokens: int = 200) -> GenerationRequest:
    return GenerationRequest(
        request_id=request_id, prompt_token_ids=[5], max_tokens=max_tokens, stop_on_repetition=True
    )


async def test_a_watched_loop_stops_at_the_first_looping_checkpoint_and_frees_its_slot() -> None:
    pytest.importorskip("vllm")
    from vllm.sampling_params import RequestOutputKind

    tokens = _looping()
    llm = _StreamingLLM(tokens)
    engine = VllmEngine(llm, "m", tokenizer=None)  # type: ignore[arg-type]
    result = await engine.generate(_watched())

    end = first_loop_end(tokens)
    assert end is not None and end % WATCH_EVERY_TOKENS == 0 and end < len(tokens)
    assert result.finish_reason == "repetition"
    assert list(result.token_ids) == tokens[:end]
    assert repeating_token_tail(result.token_ids) is not None  # the evidence is in what comes back
    assert repeating_token_tail(result.token_ids[: end - WATCH_EVERY_TOKENS]) is None  # not one checkpoint sooner
    assert llm.produced["w"] == end  # nothing generated past the checkpoint (one token a step here)
    assert llm.closed_early == ["w"] and llm.running == set()  # vLLM aborted it: its slot is free
    (params,) = llm.params
    assert params.output_kind == RequestOutputKind.DELTA
    if hasattr(params, "stream_interval"):
        assert params.stream_interval == WATCH_EVERY_TOKENS


@pytest.mark.parametrize("chunk", [1, 5, 16, 17, 64, 500])
async def test_where_a_watched_request_stops_depends_on_its_tokens_not_on_how_they_were_batched(chunk: int) -> None:
    pytest.importorskip("vllm")
    tokens = _looping(prefix=40, period=7)
    engine = VllmEngine(_StreamingLLM(tokens, chunk=chunk), "m", tokenizer=None)  # type: ignore[arg-type]
    result = await engine.generate(_watched())
    assert result.finish_reason == "repetition"
    assert list(result.token_ids) == tokens[: first_loop_end(tokens)]


async def test_a_watched_request_that_does_not_loop_ends_as_the_model_ends_it() -> None:
    pytest.importorskip("vllm")
    tokens = list(range(100, 190))
    llm = _StreamingLLM(tokens, chunk=16, finish_reason="stop")
    engine = VllmEngine(llm, "m", tokenizer=None)  # type: ignore[arg-type]
    result = await engine.generate(_watched())
    assert (list(result.token_ids), result.finish_reason) == (tokens, "stop")
    assert llm.closed_early == [] and llm.running == set()


async def test_a_loop_seen_only_at_the_last_checkpoint_keeps_the_models_own_finish_reason() -> None:
    pytest.importorskip("vllm")
    tokens = _looping(prefix=8, period=2, total=2 * WATCH_EVERY_TOKENS)  # loops at 32, which is the end
    assert first_loop_end(tokens) == len(tokens)
    engine = VllmEngine(_StreamingLLM(tokens, chunk=3), "m", tokenizer=None)  # type: ignore[arg-type]
    result = await engine.generate(_watched())
    assert (list(result.token_ids), result.finish_reason) == (tokens, "length")


async def test_cancelling_a_watched_request_still_ends_it_with_abort() -> None:
    pytest.importorskip("vllm")
    tokens = list(range(100, 400))  # no loop: only the abort can end it early
    llm = _StreamingLLM(tokens)
    engine = VllmEngine(llm, "m", tokenizer=None)  # type: ignore[arg-type]
    running = asyncio.create_task(engine.generate(_watched("job-1", max_tokens=300)))
    while llm.produced.get("job-1", 0) < 10:
        await asyncio.sleep(0)
    await engine.abort("job-1")  # what Translator.abort does when the job is cancelled
    result = await running
    assert result.finish_reason == "abort"
    assert 10 <= len(result.token_ids) < len(tokens)
    assert list(result.token_ids) == tokens[: len(result.token_ids)]
    assert llm.running == set()


async def test_an_unwatched_request_keeps_the_final_only_hot_path() -> None:
    pytest.importorskip("vllm")
    from vllm.sampling_params import RequestOutputKind

    llm = _RecordingLLM()
    engine = VllmEngine(llm, "m", tokenizer=None)  # type: ignore[arg-type]
    await engine.generate(_request())
    (params,) = llm.params
    assert params.output_kind == RequestOutputKind.FINAL_ONLY
    assert getattr(params, "stream_interval", None) is None
