"""The test engine's tokenizer: exact round trips and realistic token counts."""

from __future__ import annotations

import pytest

from worker.deterministic_engine import ChunkTokenizer, DeterministicEngine
from worker.engine import GenerationRequest

TEXTS = ["", "a", "abcd", "abcde", "  a\n\tb  ", "Où est la gare ?", "駅はどこですか？", "🙂x"]


@pytest.mark.parametrize("text", TEXTS)
def test_chunk_tokenizer_round_trips_exactly(text: str) -> None:
    tokenizer = ChunkTokenizer()
    ids = tokenizer.encode(text)
    assert len(ids) == -(-len(text.encode()) // 4)
    assert tokenizer.decode(ids) == text


def test_concatenated_token_lists_decode_to_the_concatenated_texts() -> None:
    tokenizer = ChunkTokenizer()
    assert tokenizer.decode(tokenizer.encode("abc") + tokenizer.encode(" #12")) == "abc #12"


def test_a_character_cut_by_the_token_budget_is_dropped_not_garbled() -> None:
    tokenizer = ChunkTokenizer()
    ids = tokenizer.encode("abc駅")  # 'abc' + first byte of 駅 | the two other bytes of 駅
    assert tokenizer.decode(ids[:1]) == "abc"


async def test_engine_echoes_the_prompt_and_stops_at_max_tokens() -> None:
    engine = DeterministicEngine(tag=" #7")
    prompt = engine.tokenizer.encode("twelve chars")
    full = await engine.generate(GenerationRequest("r1", prompt, max_tokens=100, stop_token_ids=()))
    assert engine.tokenizer.decode(full.token_ids) == "twelve chars #7"
    assert full.finish_reason == "stop"
    cut = await engine.generate(GenerationRequest("r2", prompt, max_tokens=2, stop_token_ids=()))
    assert engine.tokenizer.decode(cut.token_ids) == "twelve c"
    assert cut.finish_reason == "length"
