"""The output budget's expansion table: one ratio per script, looked up from language tags."""

from __future__ import annotations

import pytest

from contract.expansion import (
    TOKENS_PER_LATIN_TOKEN,
    UNKNOWN_SCRIPT_RATIO,
    expansion_ratio,
    script_of,
    script_ratio,
)
from contract.schemas import JobSpec
from worker.deterministic_engine import DeterministicEngine
from worker.profiles import IdentityProfile
from worker.translator import Translator


@pytest.mark.parametrize(
    ("language", "script"),
    [
        ("en", "Latn"),
        ("fr", "Latn"),
        ("ja", "Jpan"),
        ("zh", "Hans"),
        ("zh-TW", "Hant"),
        ("ko", "Kore"),
        ("ru", "Cyrl"),
        ("sr-Latn", "Latn"),
        ("ar", "Arab"),
        ("hi", "Deva"),
        ("th", "Thai"),
        ("am", "Ethi"),
    ],
)
def test_languages_map_to_the_script_they_are_written_in(language: str, script: str) -> None:
    assert script_of(language) == script
    assert script in TOKENS_PER_LATIN_TOKEN


def test_ratios_follow_how_densely_each_script_tokenizes() -> None:
    assert all(0.5 <= ratio <= 3.0 for ratio in TOKENS_PER_LATIN_TOKEN.values())
    assert expansion_ratio("en", "fr") == 1.0
    assert expansion_ratio("en", "zh") < expansion_ratio("en", "ja") < 1.0  # Han packs more per token
    assert expansion_ratio("en", "ru") > 1.0 and expansion_ratio("en", "hi") > expansion_ratio("en", "ru")
    assert expansion_ratio("zh", "en") > 1.0  # into English from Chinese: more tokens than the source
    assert expansion_ratio("ja", "ja") == 1.0
    assert script_ratio("qaa") == TOKENS_PER_LATIN_TOKEN.get(script_of("qaa"), UNKNOWN_SCRIPT_RATIO)


def test_the_translator_budgets_by_the_language_pair() -> None:
    engine = DeterministicEngine(max_model_len=100_000)
    translator = Translator(engine, IdentityProfile(engine.tokenizer), None)
    assert translator.max_tokens_for(100, 100, ratio=2.0 * expansion_ratio("en", "hi")) == 16 + 320
    assert translator.max_tokens_for(100, 100, ratio=2.0 * expansion_ratio("en", "zh")) == 16 + 160
    assert translator.max_tokens_for(99_990, 100) == 10  # never past the context
    spec = JobSpec(job_id="j", text="x", source_lang="en", target_lang="zh", created_at=0.0)
    assert translator._expansion(spec) == pytest.approx(1.6)
