"""Runaway control (issue 34): a bounded retry after a length stop, loops caught and failed as degenerate output."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis

from cli.main import format_job
from contract.errors import DegenerateOutputError, TruncatedTranslationError
from contract.schemas import JobSpec, JobStatus
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import ChunkTokenizer, DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.profiles import IdentityProfile
from worker.profiles.base import Sampling
from worker.translator import LOOP_PENALTY, RETRY_SAMPLING, Translator

from .conftest import WorkerFactory, wait_all
from .test_long_texts import rambling

TEXT = "This text is short enough."  # 7 tokens of the chunk tokenizer: a first budget of 16 + 2 x 7 = 30
FIRST = 30


def _spec(text: str = TEXT, job_id: str = "job") -> JobSpec:
    return JobSpec(job_id=job_id, text=text, source_lang="en", target_lang="fr", created_at=0.0)


class RecordingEngine(DeterministicEngine):
    """The deterministic engine, keeping every request it was sent (sampling, budget, stop_on_repetition)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self.sent.append(request)
        return await super().generate(request)


def looping(text: str, request: GenerationRequest) -> str:
    """A model that falls into a loop after a few words, whatever it is asked."""
    return "Ce texte est assez court, " + "et encore et encore " * (4 * request.max_tokens)


def looping_unless_sampled(text: str, request: GenerationRequest) -> str:
    """Loops when greedy; the sampled, penalised retry gets out of it."""
    return looping(text, request) if request.temperature == 0 else "Ce texte est assez court."


def _translator(engine: DeterministicEngine, max_new_tokens: int | None = None, **kwargs: Any) -> Translator:
    return Translator(engine, IdentityProfile(engine.tokenizer), max_new_tokens, **kwargs)


async def test_the_retry_after_a_length_stop_is_bounded_by_the_source_not_the_context() -> None:
    engine = RecordingEngine(max_model_len=8192, rewrite=rambling)
    with pytest.raises(TruncatedTranslationError) as caught:
        await _translator(engine).translate(_spec(), "r-1")
    assert not isinstance(caught.value, DegenerateOutputError)  # new words all along: cut off, not a loop
    assert engine.budgets == [FIRST, 2 * FIRST]  # not 8192 - 7, all the context allows
    assert caught.value.output_tokens == 3 * FIRST  # both tries' tokens: three times the first budget at most
    assert str(caught.value).startswith("translation cut off:")
    assert f"also when retried with {2 * FIRST} tokens" in str(caught.value)
    assert [r.temperature for r in engine.sent] == [0.0, 0.0]  # a plain cut-off retries greedy, bigger

    engine = RecordingEngine(max_model_len=8192, rewrite=rambling)
    with pytest.raises(TruncatedTranslationError):
        await _translator(engine, length_retry_factor=3.5).translate(_spec(), "r-2")
    assert engine.budgets == [FIRST, 105]  # the factor is a setting (ceil 3.5 x 30)

    engine = RecordingEngine(max_model_len=7 + 40, rewrite=rambling)  # 40 tokens of room after the prompt
    with pytest.raises(TruncatedTranslationError, match="--max-model-len"):
        await _translator(engine).translate(_spec(), "r-3")
    assert engine.budgets == [FIRST, 40]  # capped by the room the context leaves

    engine = RecordingEngine(max_model_len=8192, rewrite=rambling)
    with pytest.raises(TruncatedTranslationError, match="no room for a bigger retry"):
        await _translator(engine, length_retry_factor=1.0).translate(_spec(), "r-4")
    assert engine.budgets == [FIRST]  # factor 1: no retry


def test_the_retry_factor_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_LENGTH_RETRY_FACTOR", "3")
    assert Settings().length_retry_factor == 3.0
    monkeypatch.setenv("DRAGOMAN_LENGTH_RETRY_FACTOR", "0.5")
    with pytest.raises(ValueError):
        Settings()


async def test_a_loop_is_caught_after_the_fact_retried_once_sampled_and_penalised_then_failed() -> None:
    engine = RecordingEngine(rewrite=looping)
    with pytest.raises(DegenerateOutputError) as caught:
        await _translator(engine).translate(_spec(), "r-1")
    first, retry = engine.sent
    assert (first.max_tokens, first.temperature, first.repetition_penalty) == (FIRST, 0.0, 1.0)
    assert first.stop_on_repetition is False  # the hot path keeps final-only outputs
    assert retry.request_id == "r-1-retry" and retry.max_tokens == FIRST  # a loop gets no bigger budget
    assert (retry.temperature, retry.top_p) == (RETRY_SAMPLING.temperature, RETRY_SAMPLING.top_p) == (0.7, 0.95)
    assert retry.repetition_penalty == LOOP_PENALTY == 1.2
    assert retry.stop_on_repetition is True
    message = str(caught.value)
    assert message.startswith("degenerate output: the translation fell into a loop also on its sampled retry")
    assert "repeating ' encore et encore et' (5-token span" in message  # the span, decoded
    assert f"{2 * FIRST} output tokens spent" in message
    assert caught.value.output_tokens == 2 * FIRST and caught.value.pieces == 1
    assert isinstance(caught.value, TruncatedTranslationError)  # the token counts travel the same way


async def test_a_loop_that_the_sampled_retry_escapes_succeeds() -> None:
    engine = RecordingEngine(rewrite=looping_unless_sampled)
    translation = await _translator(engine).translate(_spec(), "r-1")
    assert translation.text == "Ce texte est assez court." and translation.finish_reason == "stop"
    assert [r.temperature for r in engine.sent] == [0.0, 0.7]


async def test_a_loop_whose_sampled_retry_runs_out_without_looping_is_cut_off_and_says_so() -> None:
    def loop_then_ramble(text: str, request: GenerationRequest) -> str:
        return looping(text, request) if request.temperature == 0 else rambling(text, request)

    engine = RecordingEngine(rewrite=loop_then_ramble)
    with pytest.raises(TruncatedTranslationError) as caught:
        await _translator(engine).translate(_spec(), "r-1")
    assert not isinstance(caught.value, DegenerateOutputError)
    message = str(caught.value)
    assert message.startswith(f"translation cut off: the translation stopped at its output budget (a budget of {FIRST}")
    assert "in a loop, repeating ' encore et encore et' (5-token span" in message
    assert f"its sampled retry with {FIRST} tokens did not loop but did not finish either" in message
    assert "DRAGOMAN_LENGTH_RETRY_FACTOR" not in message  # a bigger budget would not have helped
    assert caught.value.output_tokens == 2 * FIRST


async def test_a_loop_on_the_bigger_retry_fails_without_a_third_request() -> None:
    def loops_late(text: str, request: GenerationRequest) -> str:
        # New words up to the first budget, then a loop: only the retry's longer output shows it.
        return rambling(text, request)[: 4 * FIRST] + " encore" * 200

    engine = RecordingEngine(rewrite=loops_late)
    with pytest.raises(DegenerateOutputError, match=f"on its retry with {2 * FIRST} tokens") as caught:
        await _translator(engine).translate(_spec(), "r-1")
    assert engine.budgets == [FIRST, 2 * FIRST]
    assert caught.value.output_tokens == 3 * FIRST


async def test_a_sampling_profile_or_caller_samples_its_own_way_on_the_retry() -> None:
    engine = RecordingEngine(rewrite=looping)
    profile = IdentityProfile(engine.tokenizer)
    profile.sampling = Sampling(temperature=0.3, top_p=0.8, top_k=40)
    with pytest.raises(DegenerateOutputError):
        await Translator(engine, profile, None).translate(_spec(), "r-1")
    retry = engine.sent[1]
    assert (retry.temperature, retry.top_p, retry.top_k, retry.repetition_penalty) == (0.3, 0.8, 40, LOOP_PENALTY)

    engine = RecordingEngine(rewrite=looping)
    asked = Sampling(temperature=0.9, top_p=0.9, repetition_penalty=1.5)
    with pytest.raises(DegenerateOutputError):
        await _translator(engine).translate(_spec(), "r-2", sampling=asked)
    assert [(r.temperature, r.repetition_penalty) for r in engine.sent] == [(0.9, 1.5), (0.9, 1.5)]


async def test_an_engine_that_stops_a_loop_early_is_believed() -> None:
    class WatchingEngine(RecordingEngine):
        async def generate(self, request: GenerationRequest) -> GenerationResult:
            result = await super().generate(request)
            if request.stop_on_repetition:  # what VllmEngine does once its tail loops: stop early
                return GenerationResult(result.token_ids[:20], "repetition")
            return result

    engine = WatchingEngine(rewrite=looping)
    with pytest.raises(DegenerateOutputError, match="the engine stopped it after 20 tokens") as caught:
        await _translator(engine).translate(_spec(), "r-1")
    assert caught.value.output_tokens == FIRST + 20


async def test_a_repetition_the_source_has_is_no_loop() -> None:
    # "ha ha ha" x 100, answered with three times as much laughter (once translated into "ah"): a
    # length stop whose tail repeats what the source repeats is a cut-off, retried bigger and greedy.
    laughter = ("ha " * 100).strip()  # 75 tokens: a first budget of 16 + 2 x 75 = 166
    for rewrite in (lambda text, request: text * 3, lambda text, request: text.replace("ha", "ah") * 3):
        engine = RecordingEngine(rewrite=rewrite)
        translation = await _translator(engine).translate(_spec(laughter), "r-1")
        assert translation.finish_reason == "stop" and len(translation.text) == 3 * len(laughter)
        assert [(r.max_tokens, r.temperature) for r in engine.sent] == [(166, 0.0), (332, 0.0)]
    # A row of dashes (one token of 4 dashes, 50 times) copied whole: it finishes.
    engine = RecordingEngine()
    dashes = "-" * 200
    translation = await _translator(engine).translate(_spec(dashes), "r-3")
    assert translation.text == dashes and translation.finish_reason == "stop"
    # The retry of a source that repeats itself does not ask the engine to stop on repetition.
    engine = RecordingEngine(rewrite=rambling)
    with pytest.raises(TruncatedTranslationError):
        await _translator(engine).translate(_spec("ha ha ha ha ha ha, said the clown"), "r-4")
    assert [r.stop_on_repetition for r in engine.sent] == [False, False]


async def test_a_source_repeated_a_little_does_not_excuse_a_runaway_of_it() -> None:
    # The source says "encore" twice; the output says it hundreds of times.
    engine = RecordingEngine(rewrite=looping)
    with pytest.raises(DegenerateOutputError):
        await _translator(engine).translate(_spec("Encore, encore! This text is short enough."), "r-1")


async def test_the_rule_applies_per_piece_of_a_long_text() -> None:
    paragraphs = [f"Paragraph {n} is a short one, and it ends here." for n in range(3)]
    engine = RecordingEngine(
        max_model_len=64,  # each paragraph is its own piece
        rewrite=lambda text, request: looping(text, request) if "Paragraph 1" in text else text,
    )
    with pytest.raises(DegenerateOutputError, match=r"^degenerate output: piece 2 of 3 fell into a loop") as caught:
        await _translator(engine).translate(_spec("\n\n".join(paragraphs)), "r-1")
    assert caught.value.pieces == 3
    retries = [r for r in engine.sent if r.request_id.endswith("-retry")]
    assert [r.request_id for r in retries] == ["r-1-p1-retry"]  # only the looping piece was retried


async def test_cancelling_a_job_on_its_sampled_retry_aborts_it() -> None:
    class SlowRetries(RecordingEngine):
        async def generate(self, request: GenerationRequest) -> GenerationResult:
            if request.request_id.endswith("-retry"):
                self.sent.append(request)
                self.retry_started.set()
                await self.released.wait()
                return GenerationResult((), "abort")
            return await super().generate(request)

    engine = SlowRetries(rewrite=looping)
    engine.retry_started, engine.released = asyncio.Event(), asyncio.Event()  # type: ignore[attr-defined]
    translator = _translator(engine)
    task = asyncio.create_task(translator.translate(_spec(), "r-1"))
    await asyncio.wait_for(engine.retry_started.wait(), 5)  # type: ignore[attr-defined]

    async def abort_then_release() -> None:
        await translator.abort("r-1")
        engine.released.set()  # type: ignore[attr-defined]

    await abort_then_release()
    translation = await asyncio.wait_for(task, 5)
    assert translation.finish_reason == "abort"
    assert engine.aborted == ["r-1-retry"]


async def test_how_each_job_ended_is_on_its_row(
    client: Client, raw_redis: redis.Redis, pg: Any, start_worker: WorkerFactory
) -> None:
    def model(text: str, request: GenerationRequest) -> str:
        if "loop" in text:
            return looping(text, request)
        if "ramble" in text:
            return rambling(text, request)
        return text

    engine = DeterministicEngine(max_model_len=1024, rewrite=model)
    ids = [client.submit(t, "en", "fr") for t in ("It will loop forever.", "It will ramble on.", "It stops.")]
    async with start_worker(engine) as worker:
        loops, rambles, stops = await wait_all(client, ids)
        reasons = worker.metrics.registry.get_sample_value
        assert reasons("dragoman_finish_reasons_total", {"reason": "repetition"}) == 1
        assert reasons("dragoman_finish_reasons_total", {"reason": "length"}) == 1
        assert reasons("dragoman_finish_reasons_total", {"reason": "stop"}) == 1

    assert loops.status is JobStatus.FAILED and loops.finish_reason == "repetition" and loops.attempts == 1
    assert loops.error is not None and loops.error.startswith("degenerate output:")
    first = 16 + 2 * len(ChunkTokenizer().encode("It will loop forever."))
    assert loops.output_tokens == 2 * first
    assert rambles.status is JobStatus.FAILED and rambles.finish_reason == "length"
    assert rambles.error is not None and rambles.error.startswith("translation cut off:")
    assert stops.status is JobStatus.SUCCEEDED and stops.finish_reason == "stop"
    row = pg.execute("SELECT status, finish_reason FROM jobs WHERE id = %s", (ids[0],)).fetchone()
    assert row == ("failed", "repetition")
    events = {f["id"]: json.loads(f["payload"]) for _, f in raw_redis.xrange(client.keys.events_stream)}
    assert events[ids[0]]["error"] == loops.error
    assert "finished by  repetition (the output fell into a loop" in format_job(loops)
