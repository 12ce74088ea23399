"""A document segment's placeholder tags: checked, retried once, else the text between them translated alone."""

from __future__ import annotations

import re
import uuid

import pytest

from contract.errors import UnsupportedControlError
from contract.inline_tags import Tag, tokens
from contract.schemas import JobSpec
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest
from worker.profiles import IdentityProfile
from worker.profiles.few_shot import FewShotProfile
from worker.translator import RETRY_SAMPLING, Translator

SOURCE = "Click <x1>here</x1> to <x2>open</x2> the file, then press <x3/>."
TAG = re.compile(r"</?x\d+/?>")


def shout(text: str, _: GenerationRequest) -> str:
    """A translation that keeps the tags."""
    return "".join(str(t) if isinstance(t, Tag) else t.upper() for t in tokens(text))


def drop_tags(text: str, request: GenerationRequest) -> str:
    """A translation that loses every tag."""
    return TAG.sub("", shout(text, request))


def _spec(text: str = SOURCE, *, inline_tags: bool = True, **fields: object) -> JobSpec:
    return JobSpec(
        job_id=str(uuid.uuid4()),
        text=text,
        source_lang="en",
        target_lang="fr",
        created_at=0.0,
        inline_tags=inline_tags,
        **fields,  # type: ignore[arg-type]
    )


def _translator(rewrite: object) -> tuple[Translator, DeterministicEngine, list[GenerationRequest]]:
    seen: list[GenerationRequest] = []

    def recording(text: str, request: GenerationRequest) -> str:
        seen.append(request)
        return rewrite(text, request)  # type: ignore[operator,no-any-return]

    engine = DeterministicEngine(rewrite=recording)
    return Translator(engine, IdentityProfile(engine.tokenizer), None), engine, seen


async def test_a_translation_that_keeps_the_tags_is_used_as_is() -> None:
    translator, _, seen = _translator(shout)
    translation = await translator.translate(_spec(), "r1")
    assert translation.text == "CLICK <x1>HERE</x1> TO <x2>OPEN</x2> THE FILE, THEN PRESS <x3/>."
    assert translation.inline_tags == "kept"
    assert len(seen) == 1


async def test_lost_tags_are_retried_once_with_sampling() -> None:
    def lose_when_greedy(text: str, request: GenerationRequest) -> str:
        return drop_tags(text, request) if request.temperature == 0 else shout(text, request)

    translator, _, seen = _translator(lose_when_greedy)
    translation = await translator.translate(_spec(), "r2")
    assert translation.inline_tags == "retried"
    assert translation.text == "CLICK <x1>HERE</x1> TO <x2>OPEN</x2> THE FILE, THEN PRESS <x3/>."
    assert [r.temperature for r in seen] == [0.0, RETRY_SAMPLING.temperature]
    assert translation.output_tokens > len(translator.engine.tokenizer.encode(translation.text))  # both counted


async def test_tags_lost_twice_fall_back_to_the_text_runs_between_them() -> None:
    translator, _, seen = _translator(drop_tags)
    translation = await translator.translate(_spec(), "r3")
    assert translation.inline_tags == "fallback"
    assert translation.text == "CLICK <x1>HERE</x1> TO <x2>OPEN</x2> THE FILE, THEN PRESS <x3/>."
    prompts = [translator.engine.tokenizer.decode(r.prompt_token_ids) for r in seen]
    assert prompts[:2] == [SOURCE, SOURCE]
    assert sorted(prompts[2:]) == sorted(["Click", "here", "to", "open", "the file, then press"])
    assert "<x" not in "".join(prompts[2:])  # the text runs reach the model without tags


async def test_a_text_without_the_flag_is_never_checked() -> None:
    translator, _, seen = _translator(drop_tags)
    translation = await translator.translate(_spec(inline_tags=False), "r4")
    assert translation.inline_tags is None and len(seen) == 1
    assert "<x1>" not in translation.text


async def test_a_documents_context_is_dropped_for_a_profile_that_takes_none() -> None:
    class NoContext(IdentityProfile):
        supports = frozenset()

    engine = DeterministicEngine()
    translator = Translator(engine, NoContext(engine.tokenizer), None)
    document_segment = _spec("Hello.", inline_tags=False, context="Before.", document_id=str(uuid.uuid4()))
    assert (await translator.translate(document_segment, "r5")).text == "Hello."
    with pytest.raises(UnsupportedControlError):  # a job's own context is still a demand
        await translator.translate(_spec("Hello.", inline_tags=False, context="Before."), "r6")


def test_the_few_shot_prompt_shows_a_tagged_example_only_for_tagged_text() -> None:
    engine = DeterministicEngine()
    profile = FewShotProfile(engine.tokenizer)
    tagged = profile.build_prompt(_spec())
    assert "English: Press <x1>the button</x1> to open the <x2>menu</x2>." in tagged
    assert "French: Appuyez sur <x1>le bouton</x1> pour ouvrir le <x2>menu</x2>." in tagged
    assert "English: Type <x1/> and then save the <x2>file</x2>.\nFrench: Tapez <x1/> puis enregistrez le" in tagged
    assert tagged.endswith(f"English: {SOURCE}\nFrench:")
    assert "<x1>" not in profile.build_prompt(_spec("Click here.", inline_tags=False))
