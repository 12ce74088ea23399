"""Per-job controls in a running worker: they reach the prompt tokens, a control the profile cannot apply
fails the job at once, and the row says which glossary terms the translation missed."""

from __future__ import annotations

import uuid

from contract.controls import Formality
from contract.errors import UnsupportedControlError
from contract.schemas import JobSpec, JobStatus
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.profiles import FewShotProfile, IdentityProfile, PromptProfile, Qwen3Profile, TemplateProfile
from worker.service import Worker
from worker.translator import Translator

from .conftest import identity_worker, wait_all


class RecordingEngine(DeterministicEngine):
    """The deterministic engine, keeping every request it was sent."""

    def __init__(self, max_model_len: int = 8_192) -> None:
        super().__init__(max_model_len=max_model_len)
        self.sent: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self.sent.append(request)
        return await super().generate(request)


class EchoFewShot(FewShotProfile):
    """The few-shot prompt on the deterministic engine (whose chunk tokenizer has no vocabulary to stop on)."""

    def stop_token_ids(self) -> tuple[int, ...]:
        return ()


def first_attempts(engine: RecordingEngine) -> list[GenerationRequest]:
    """The requests of first attempts (the echoed prompt outruns its budget, so each is retried once)."""
    return [r for r in engine.sent if not r.request_id.endswith("-retry")]


def _spec(text: str, **controls: object) -> JobSpec:
    return JobSpec(job_id=str(uuid.uuid4()), text=text, source_lang="en", target_lang="fr", created_at=0.0, **controls)  # type: ignore[arg-type]


async def test_the_glossary_and_context_reach_the_prompt_tokens() -> None:
    engine = RecordingEngine()
    # The echo answers with the whole prompt, longer than twice a sentence's budget: retried big enough.
    translator = Translator(engine, EchoFewShot(engine.tokenizer), None, length_retry_factor=100)
    job = _spec("The cat sleeps on the sofa.", glossary={"cat": "chat", "dog": "chien"}, context="Pets at home.")
    await translator.translate(job, "r1")
    [request] = first_attempts(engine)
    prompt = engine.tokenizer.decode(request.prompt_token_ids)
    assert (
        "Context (not to translate): Pets at home.\nTerms: cat = chat\nEnglish: The cat sleeps on the sofa." in prompt
    )
    assert "chien" not in prompt  # a term not in the text stays out of the prompt


async def test_a_long_text_sends_each_piece_its_own_terms_and_the_same_context() -> None:
    engine = RecordingEngine()
    translator = Translator(engine, EchoFewShot(engine.tokenizer), None, length_retry_factor=100)
    job = _spec("The cat sleeps. The dog barks.", glossary={"cat": "chat", "dog": "chien"}, context="Pets.")
    await translator.translate(job, "r2")
    prompts = [engine.tokenizer.decode(r.prompt_token_ids) for r in first_attempts(engine)]
    assert len(prompts) == 2  # few-shot sends one sentence at a time
    assert "Terms: cat = chat\n" in prompts[0] and "chien" not in prompts[0]
    assert "Terms: dog = chien\n" in prompts[1] and "= chat" not in prompts[1]
    assert all("Context (not to translate): Pets.\n" in p for p in prompts)


async def test_a_long_texts_pieces_leave_room_for_the_glossary_lines_they_carry() -> None:
    # Four paragraphs of 50 tokens; a glossary line of about 47 tokens for the term in the first.
    # Two paragraphs (101 tokens) would fit a piece if the glossary line were not counted; with it
    # they do not (47 + 101 + a 218-token budget > 330), so each paragraph is its own piece, and
    # every piece gets the budget of its own text (the line of a term is not text to translate).
    engine = RecordingEngine(max_model_len=330)
    template = "{% for t in glossary %}{{ t.source }} means {{ t.target }} here.\n{% endfor %}{{ text }}"
    profile = TemplateProfile(engine.tokenizer, {"template": template, "supports": ["glossary"]}, "test")
    filler = ("word " * 40)[:200]
    paragraphs = ["alpha" + filler[5:], filler, filler, filler]
    job = _spec("\n\n".join(paragraphs), glossary={"alpha": "x" * 165, "omega": "y"})
    translation = await Translator(engine, profile, None).translate(job, "r5")
    requests = first_attempts(engine)
    assert len(requests) == 4 and translation.pieces == 4
    assert "alpha means xxx" in engine.tokenizer.decode(requests[0].prompt_token_ids)
    assert {r.max_tokens for r in requests} == {16 + 2 * 50}
    assert all(len(r.prompt_token_ids) + r.max_tokens < 330 for r in requests)  # none cut to the room left


async def test_a_profiles_sampling_reaches_the_engine() -> None:
    engine = RecordingEngine()

    class Sampled(Qwen3Profile):
        def build_prompt(self, spec: JobSpec) -> str:  # the deterministic tokenizer has no chat template
            return spec.text

    translator = Translator(engine, Sampled(engine.tokenizer), None)
    await translator.translate(_spec("Hello there."), "r3")
    [request] = engine.sent
    assert (request.temperature, request.top_p, request.top_k, request.repetition_penalty) == (0.7, 0.8, 20, 1.0)


async def test_an_unsupported_control_raises_before_the_engine_is_asked() -> None:
    engine = RecordingEngine()
    translator = Translator(engine, EchoFewShot(engine.tokenizer), None)
    try:
        await translator.translate(_spec("Hello.", formality=Formality.FORMAL), "r4")
    except UnsupportedControlError as exc:
        assert "'few-shot' cannot apply formality" in str(exc)
    else:
        raise AssertionError("formality on a base model must be refused")
    assert engine.sent == []


def _worker(settings: Settings, urls: ServiceUrls, engine: DeterministicEngine, profile: PromptProfile) -> Worker:
    return identity_worker(settings, urls, engine, profile=profile)


async def test_the_row_names_the_missed_terms_and_an_unsupported_control_fails_at_once(
    client: Client, settings: Settings, service_urls: ServiceUrls
) -> None:
    engine = DeterministicEngine()
    worker = _worker(settings, service_urls, engine, IdentityProfile(engine.tokenizer))  # echoes the text
    await worker.start()
    try:
        echoed, plain = await wait_all(
            client,
            [
                client.submit("The Cat sleeps.", "en", "fr", glossary={"cat": "chat", "sleeps": "sleeps", "dog": "x"}),
                client.submit("The cat sleeps.", "en", "fr"),
            ],
        )
    finally:
        await worker.stop(grace_seconds=5)
    assert echoed.status is JobStatus.SUCCEEDED and echoed.glossary_misses == ["cat"]
    assert plain.glossary_misses is None

    engine = DeterministicEngine()
    worker = _worker(settings, service_urls, engine, EchoFewShot(engine.tokenizer))
    await worker.start()
    try:
        [formal] = await wait_all(client, [client.submit("Good morning.", "en", "fr", formality="formal")])
    finally:
        await worker.stop(grace_seconds=5)
    assert formal.status is JobStatus.FAILED and formal.attempts == 1 and engine.requests == 0
    assert formal.error and "'few-shot' cannot apply formality" in formal.error
