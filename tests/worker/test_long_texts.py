"""Long texts translate whole and a cut-off translation never succeeds (issue 16), on the deterministic engine."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
import redis

from cli.main import format_job
from contract.errors import InputTooLongError, TruncatedTranslationError
from contract.schemas import JobSpec, JobStatus
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import ChunkTokenizer, DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.profiles import FewShotProfile, IdentityProfile
from worker.translator import Translator

from .conftest import WorkerFactory, wait_all


def _spec(text: str, source: str = "en", target: str = "fr") -> JobSpec:
    return JobSpec(job_id="job", text=text, source_lang=source, target_lang=target, created_at=0.0)


def rambling(text: str, request: GenerationRequest) -> str:
    """A model that never ends its answer without repeating itself: new words after the echo, no loop."""
    return text + "".join(f" word{i}" for i in range(4 * request.max_tokens))


def _metric(worker: Any, name: str, labels: dict[str, str] | None = None) -> float:
    value = worker.metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else float(value)


async def test_a_budget_stopped_generation_is_retried_then_failed_never_succeeded(
    client: Client, raw_redis: redis.Redis, pg: Any, start_worker: WorkerFactory
) -> None:
    engine = DeterministicEngine(
        max_model_len=1024, rewrite=lambda text, request: rambling(text, request) if "runaway" in text else text
    )
    runaway = client.submit("A runaway model never stops talking.", "en", "fr")
    fine = client.submit("A model that stops.", "en", "fr")
    async with start_worker(engine) as worker:
        job, ok = await wait_all(client, [runaway, fine])
        assert _metric(worker, "dragoman_finish_reasons_total", {"reason": "length"}) == 1
        assert _metric(worker, "dragoman_finish_reasons_total", {"reason": "stop"}) == 1
        assert _metric(worker, "dragoman_finish_reasons_total", {"reason": "abort"}) == 0

    assert job.status is JobStatus.FAILED and job.translation is None
    assert job.finish_reason == "length" and job.pieces == 1
    assert job.attempts == 1  # the retry is the translator's, not another delivery
    prompt_tokens = len(ChunkTokenizer().encode("A runaway model never stops talking."))
    first = 16 + 2 * prompt_tokens  # the first budget: 16 + headroom 2 x source tokens x the en -> fr ratio (1)
    retry = 2 * first  # the retry: length_retry_factor (2) x the first budget, not all the context allows
    assert sorted(engine.budgets) == sorted([first, retry, 16 + 2 * 5])
    assert job.error is not None and job.error.startswith("translation cut off:")
    assert f"budget of {first} tokens, after a {prompt_tokens}-token prompt in a 1024-token context" in job.error
    assert f"also when retried with {retry} tokens ({retry} used)" in job.error
    assert f"{first + retry} output tokens spent" in job.error and "DRAGOMAN_LENGTH_RETRY_FACTOR" in job.error
    assert job.output_tokens == first + retry and job.prompt_tokens == prompt_tokens  # every try's tokens

    row = pg.execute(
        "SELECT status, translated_text, finish_reason, pieces FROM jobs WHERE id = %s", (runaway,)
    ).fetchone()
    assert row == ("failed", None, "length", 1)
    events = {f["id"]: json.loads(f["payload"]) for _, f in raw_redis.xrange(client.keys.events_stream)}
    assert events[runaway]["status"] == "failed" and events[runaway]["error"] == job.error
    assert ok.status is JobStatus.SUCCEEDED and ok.finish_reason == "stop" and ok.pieces == 1
    shown = format_job(job)
    assert "finished by  length" in shown and "pieces       1" in shown


async def test_a_budget_stop_that_fits_on_the_retry_succeeds(client: Client, start_worker: WorkerFactory) -> None:
    tag = " [a much longer answer than the first budget of this short text expects, though it ends within twice that]"
    engine = DeterministicEngine(max_model_len=2048, tag=tag)
    job_id = client.submit("short", "en", "fr")
    async with start_worker(engine):
        (job,) = await wait_all(client, [job_id])
    assert job.status is JobStatus.SUCCEEDED and job.translation == "short" + tag
    assert job.finish_reason == "stop"
    assert len(engine.budgets) == 2 and engine.budgets[1] > engine.budgets[0]


async def test_a_max_new_tokens_cap_is_named_in_the_error() -> None:
    engine = DeterministicEngine(max_model_len=4096, rewrite=rambling)
    translator = Translator(engine, IdentityProfile(engine.tokenizer), 50)
    with pytest.raises(TruncatedTranslationError, match="raise DRAGOMAN_MAX_NEW_TOKENS") as caught:
        await translator.translate(_spec("This text is short enough."), "r-1")
    assert caught.value.output_tokens == 30 + 50
    assert engine.budgets == [30, 50]  # 16 + 2 x 7 tokens, then the cap (below 2 x 30): all it may have
    engine.budgets.clear()
    translator = Translator(engine, IdentityProfile(engine.tokenizer), 30)
    with pytest.raises(TruncatedTranslationError):
        await translator.translate(_spec("This text is short enough."), "r-2")
    assert engine.budgets == [30]  # the budget was already all it may have: no pointless retry


def _long_text() -> str:
    english = (
        "Paragraph {n} begins here. Dr. Smith, e.g. the one from the U.S. Army, wrote it in the morning. "
        "It talks about the weather, the mountains and a long walk along the river! Does it end well? "
        "It does, i.e. everyone gets home before dark. "
    )
    japanese = (
        "第{n}段落です。今日はとてもいい天気です。駅まで歩いて、コーヒーを一杯お願いしました。山の景色はきれいでした。"
    )
    chinese = "第{n}段。今天天气很好。我们去了火车站，然后喝了一杯咖啡。"
    paragraphs: list[str] = []
    n = 0
    while sum(map(len, paragraphs)) + 2 * len(paragraphs) < 9_500:
        n += 1
        if n % 4 == 2:
            paragraphs.append(japanese.format(n=n) * 3)
        elif n % 4 == 0:
            paragraphs.append(chinese.format(n=n) * 4)
        else:
            paragraphs.append((english.format(n=n) * 2).strip())
    text = "\n\n".join(paragraphs)
    text += "\n\n" + "Last paragraph. " * ((10_000 - len(text) - 2) // 16)
    return text.rstrip()


async def test_a_ten_thousand_character_text_comes_back_as_one_job_with_every_paragraph_in_order(
    client: Client, raw_redis: redis.Redis, pg: Any, settings: Settings, start_worker: WorkerFactory
) -> None:
    text = _long_text()
    assert 9_900 <= len(text) <= settings.max_text_chars
    engine = DeterministicEngine(max_model_len=512, delay_s=0.01)  # far too small for the whole text
    job_id = client.submit(text, "en", "ja")
    async with start_worker(engine) as worker:
        (job,) = await wait_all(client, [job_id])
        assert _metric(worker, "dragoman_job_pieces_total") == job.pieces
    assert job.status is JobStatus.SUCCEEDED and job.finish_reason == "stop"
    assert job.translation == text  # the identity profile echoes: every paragraph, in order, breaks kept
    assert job.translation.split("\n\n") == text.split("\n\n")
    assert job.pieces is not None and job.pieces >= 10 and job.pieces == engine.requests
    assert engine.peak_in_flight > 1  # the pieces ran as concurrent engine requests
    assert pg.execute("SELECT count(*) FROM jobs WHERE id = %s", (job_id,)).fetchone() == (1,)
    events = [f for _, f in raw_redis.xrange(client.keys.events_stream) if f["id"] == job_id]
    assert len(events) == 1 and events[0]["status"] == "succeeded"


class _FewShotEcho:
    """A stand-in for a base model on the few-shot prompt: answers the last source line, then a newline."""

    def __init__(self, max_model_len: int = 2048) -> None:
        self.max_model_len = max_model_len
        self.model_name = "few-shot-echo"
        self.tokenizer = _NewlineChunkTokenizer()
        self.prompts: list[str] = []

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        prompt = self.tokenizer.decode(request.prompt_token_ids)
        self.prompts.append(prompt)
        source = re.findall(r"^English: (.*)$", prompt, re.MULTILINE)[-1]
        answer = self.tokenizer.encode(f" <{source}>\nEnglish: more")
        return GenerationResult(token_ids=answer[: request.max_tokens], finish_reason="stop")

    async def abort(self, request_id: str) -> None:
        """Nothing runs long enough to abort."""

    def shutdown(self) -> None:
        """Nothing to release."""


class _NewlineChunkTokenizer(ChunkTokenizer):
    def get_vocab(self) -> dict[str, int]:
        return {"\n": 10}

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return super().decode(token_ids, skip_special_tokens)


async def test_the_few_shot_profile_keeps_paragraphs_by_translating_sentence_by_sentence() -> None:
    engine = _FewShotEcho()
    translator = Translator(engine, FewShotProfile(engine.tokenizer), None)  # type: ignore[arg-type]
    text = "First paragraph.\n\nSecond  paragraph, two   spaces.\n  Indented line. Dr. Who too.\n\n\nLast one.\n"
    result = await translator.translate(_spec(text), "r-1")
    assert result.text == (
        "<First paragraph.>\n\n<Second paragraph, two spaces.>\n  <Indented line.> <Dr. Who too.>\n\n\n<Last one.>\n"
    )
    assert result.pieces == 5 and result.finish_reason == "stop"
    assert all(prompt.count("\nFrench:") == 4 for prompt in engine.prompts)  # three examples and the line


async def test_every_profile_translates_up_to_max_text_chars() -> None:
    text = _long_text()
    few_shot = _FewShotEcho(max_model_len=512)
    translator = Translator(few_shot, FewShotProfile(few_shot.tokenizer), None, max_piece_chars=4000)  # type: ignore[arg-type]
    result = await translator.translate(_spec(text), "r-1")
    assert result.finish_reason == "stop"
    assert len(result.text.split("\n\n")) == len(text.split("\n\n"))
    assert result.text.replace("<", "").replace(">", "").replace(" ", "") == text.replace(" ", "")

    identity = DeterministicEngine(max_model_len=8192)
    result = await Translator(identity, IdentityProfile(identity.tokenizer), None, max_piece_chars=1500).translate(
        _spec(text), "r-2"
    )
    assert result.text == text and result.pieces > 1  # fits the context, but not the per-piece limit


async def test_cancelling_a_job_aborts_every_piece() -> None:
    engine = DeterministicEngine(max_model_len=256, delay_s=30)
    translator = Translator(engine, IdentityProfile(engine.tokenizer), None)
    task = asyncio.create_task(translator.translate(_spec("Sentence one is here. " * 40), "job-1"))
    while engine.in_flight < 2:
        await asyncio.sleep(0.01)
    await translator.abort("job-1")
    result = await asyncio.wait_for(task, 5)
    assert result.finish_reason == "abort"
    assert len(engine.aborted) == result.pieces > 1 and all(r.startswith("job-1-p") for r in engine.aborted)


async def test_a_prompt_that_cannot_fit_even_a_few_characters_is_a_clear_error() -> None:
    class LongHeader(IdentityProfile):
        def build_prompt(self, spec: JobSpec) -> str:
            return "instructions " * 100 + spec.text

    engine = DeterministicEngine(max_model_len=64)
    translator = Translator(engine, LongHeader(engine.tokenizer), None)
    with pytest.raises(InputTooLongError, match="context is 64 tokens"):
        await translator.translate(_spec("Hello there."), "r-1")
