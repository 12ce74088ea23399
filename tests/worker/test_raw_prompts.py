"""Raw-prompt jobs in the translator: chat template or prompt as given, sampling passed on, stop sequences cut."""

from __future__ import annotations

from typing import Any

from contract.schemas import JobSpec
from worker.deterministic_engine import DeterministicEngine
from worker.engine import GenerationRequest, GenerationResult
from worker.profiles import IdentityProfile
from worker.translator import Translator, chat_prompt


class _Recording(DeterministicEngine):
    """The deterministic engine, keeping the requests it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self.seen.append(request)
        return await super().generate(request)


def _spec(generation: dict[str, Any]) -> JobSpec:
    return JobSpec(job_id="j", text="t", source_lang="und", target_lang="und", created_at=0.0, generation=generation)


async def test_a_completion_runs_its_prompt_with_its_sampling_and_budget() -> None:
    engine = _Recording()
    translator = Translator(engine, IdentityProfile(engine.tokenizer), max_new_tokens=512)
    generation = {"kind": "completion", "prompt": "Once upon a time", "max_tokens": 2, "temperature": 0.8, "seed": 3}
    result = await translator.translate(_spec(generation), "r1")
    [request] = engine.seen
    assert (request.max_tokens, request.temperature, request.top_p, request.seed) == (2, 0.8, 1.0, 3)
    assert result.output_tokens == 2 and "Once upon a time".startswith(result.text)
    assert result.prompt_tokens == len(engine.tokenizer.encode("Once upon a time"))


async def test_a_chat_goes_through_the_template_and_is_cut_at_a_stop_sequence() -> None:
    engine = _Recording()
    translator = Translator(engine, IdentityProfile(engine.tokenizer), max_new_tokens=512)
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    result = await translator.translate(_spec({"kind": "chat", "messages": messages, "stop": ["assistant"]}), "r2")
    assert result.text == "user: Hi\n" and result.finish_reason == "stop"
    assert engine.seen[0].temperature == 0.0  # greedy unless asked


def test_chat_prompt_uses_the_tokenizer_s_template_when_it_has_one() -> None:
    class Templated:
        chat_template = "{{ messages }}"

        def apply_chat_template(self, messages: Any, *, tokenize: bool, add_generation_prompt: bool) -> str:
            assert not tokenize and add_generation_prompt
            return f"<{len(messages)} messages>"

    assert chat_prompt(Templated(), [{"role": "user", "content": "x"}]) == "<1 messages>"
