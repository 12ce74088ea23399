"""The loop watch: fixed checkpoints, each looked at once, the token thresholds of contract.repetition."""

from __future__ import annotations

import pytest

from contract.repetition import TOKEN_MIN_LENGTH, repeating_token_tail
from worker.loop_watch import LoopWatch, first_loop_end


def test_checkpoints_are_multiples_of_the_interval_however_the_tokens_arrive() -> None:
    tokens = list(range(100, 110)) + [7] * 40  # one token repeated from index 10
    seen = []
    for step in (1, 3, 8, 13, 50):
        watch = LoopWatch(every=8)
        ends = [watch.loop_end(tokens[:n]) for n in range(step, len(tokens) + step, step)]
        seen.append(next(e for e in ends if e is not None))
    # 16 repeated tokens (TOKEN_MIN_LENGTH) end at index 26: the first checkpoint past it is 32.
    assert TOKEN_MIN_LENGTH == 16 and seen == [32] * 5
    assert first_loop_end(tokens, every=8) == 32
    assert repeating_token_tail(tokens[:32]) is not None and repeating_token_tail(tokens[:24]) is None


def test_a_checkpoint_is_looked_at_once_and_an_output_that_does_not_loop_never_stops() -> None:
    watch = LoopWatch(every=4)
    tokens = list(range(1, 200))
    assert all(watch.loop_end(tokens[:n]) is None for n in range(0, 200, 3))
    assert watch.loop_end([9] * 199) is None  # its checkpoints were all looked at already, on other tokens
    assert watch.loop_end([9] * 200) == 200  # the next one was not


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every 1 or more tokens"):
        LoopWatch(every=0)
