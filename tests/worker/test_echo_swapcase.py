"""The echo engine's swapcase mode: letters sent to the model come back swapped, placeholder tags kept."""

from __future__ import annotations

import pytest

from worker.deterministic_engine import echo_engine, swap_case_outside_tags
from worker.engine import GenerationRequest


@pytest.mark.parametrize(
    ("sent", "answered"),
    [
        ("Click <x1>here</x1> to open <x2/>.", "cLICK <x1>HERE</x1> TO OPEN <x2/>."),
        ("<X1>Not a tag</X1> <x0/> <x12345/>", "<x1>nOT A TAG</x1> <X0/> <X12345/>"),
        ("Привет, Ωμέγα 123", "пРИВЕТ, ωΜΈΓΑ 123"),
        ("", ""),
    ],
)
def test_letters_outside_tags_are_swapped(sent: str, answered: str) -> None:
    assert swap_case_outside_tags(sent) == answered


async def test_the_swapcase_engine_answers_without_the_mark() -> None:
    engine = echo_engine(mode="swapcase")
    text = "See <x1>the guide</x1> at <x2/>."
    request = GenerationRequest(request_id="r1", prompt_token_ids=engine.tokenizer.encode(text), max_tokens=1000)
    result = await engine.generate(request)
    assert engine.tokenizer.decode(result.token_ids) == "sEE <x1>THE GUIDE</x1> AT <x2/>."
    assert result.finish_reason == "stop"
