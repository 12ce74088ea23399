"""Watching a generation for a loop while it grows (``GenerationRequest.stop_on_repetition``).

An engine that streams a request's tokens hands each new batch of them to a :class:`LoopWatch`,
which looks for a looping tail (:func:`contract.repetition.repeating_token_tail`) at fixed
checkpoints: every :data:`WATCH_EVERY_TOKENS` tokens. Fixed checkpoints (not "whenever tokens
arrive") make the stopping point a function of the tokens alone, so a greedy request stops at the
same token however its outputs were batched, on the real engine and the deterministic one alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from contract.repetition import repeating_token_tail

WATCH_EVERY_TOKENS = 16
"""Tokens between two looks at a watched generation's tail.

The detector costs about ``TOKEN_MAX_PERIOD`` comparisons on an output that does not loop, and
vLLM builds one streamed output per interval (``SamplingParams.stream_interval``): a larger
interval costs the engine's frontend less, a smaller one stops a loop sooner (at most this many
tokens after the first checkpoint where it is visible). See bench/RESULTS.md, "Issue 34: watching
the stream"."""


class LoopWatch:
    """Finds the first checkpoint (a multiple of ``every`` tokens) at which a growing output loops."""

    def __init__(self, every: int = WATCH_EVERY_TOKENS) -> None:
        if every < 1:
            raise ValueError(f"a loop watch looks every 1 or more tokens, not {every}")
        self._every = every
        self._next = every

    def loop_end(self, token_ids: Sequence[int]) -> int | None:
        """How many of ``token_ids`` to keep because they loop there (a checkpoint), or ``None``.

        Call it with the whole output so far each time it grows; checkpoints already looked at
        are not looked at again.
        """
        count = len(token_ids)
        while self._next <= count:
            at = self._next
            self._next += self._every
            if repeating_token_tail(token_ids if at == count else token_ids[:at]) is not None:
                return at
        return None


def first_loop_end(token_ids: Sequence[int], every: int = WATCH_EVERY_TOKENS) -> int | None:
    """Where a watch would have stopped ``token_ids`` had they been generated one by one (``None``: nowhere)."""
    return LoopWatch(every).loop_end(token_ids)
