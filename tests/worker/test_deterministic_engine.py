"""The test engine's tokenizer: exact round trips and realistic token counts."""

from __future__ import annotations

import pytest

from contract.repetition import TOKEN_MAX_PERIOD
from worker.deterministic_engine import ChunkTokenizer, DeterministicEngine
from worker.engine import GenerationRequest
from worker.loop_watch import WATCH_EVERY_TOKENS, first_loop_end

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


async def test_a_watched_endless_request_stops_where_the_loop_watch_first_sees_its_loop() -> None:
    engine = DeterministicEngine(endless_if=lambda prompt: prompt.startswith("la "))
    prompt = engine.tokenizer.encode("la la la ")  # 3 tokens, repeated until the budget
    unwatched = await engine.generate(GenerationRequest("u", prompt, max_tokens=500))
    assert (len(unwatched.token_ids), unwatched.finish_reason) == (500, "length")  # as before

    watched = await engine.generate(GenerationRequest("w", prompt, max_tokens=500, stop_on_repetition=True))
    end = first_loop_end(unwatched.token_ids)
    assert end == WATCH_EVERY_TOKENS  # 16 looping tokens (TOKEN_MIN_LENGTH) are seen at the first checkpoint
    assert watched.finish_reason == "repetition"
    assert list(watched.token_ids) == list(unwatched.token_ids)[:end]
    assert (engine.watched, engine.stopped_on_repetition) == (1, 1)


async def test_a_watched_request_that_does_not_loop_is_unchanged() -> None:
    engine = DeterministicEngine(
        tag=" #7", endless_if=lambda prompt: prompt.startswith("long"), rewrite=lambda text, request: text.upper()
    )
    text = "twelve chars and a few more words that never repeat themselves"
    prompt = engine.tokenizer.encode(text)
    for stop_on_repetition in (False, True):
        result = await engine.generate(GenerationRequest("r", prompt, 100, stop_on_repetition=stop_on_repetition))
        assert engine.tokenizer.decode(result.token_ids) == f"{text} #7".upper()
        assert result.finish_reason == "stop"
    # An endless prompt longer than the longest span the watch looks for loops unseen, to its budget.
    long = engine.tokenizer.encode("long " + " ".join(f"w{i:03}" for i in range(TOKEN_MAX_PERIOD)))
    result = await engine.generate(GenerationRequest("l", long, 400, stop_on_repetition=True))
    assert (len(result.token_ids), result.finish_reason) == (400, "length")
    assert (engine.watched, engine.stopped_on_repetition) == (2, 0)
